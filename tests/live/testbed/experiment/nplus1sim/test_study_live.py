"""The N + 1 study's --quick variant through the CLI (it records the git commit: a
process, so live)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import pipeline
from testbed.experiment.nplus1sim.study import KINDS, per_seed
from testbed.experiment.results import REPO

SPEC = REPO / "experiments" / "nplus1-sim.toml"


def test_the_quick_variant_compares_the_three_policies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q"
    assert main(["experiment", "run", str(SPEC), "--quick", "--out", str(out)]) == 0
    res = pipeline.read(out / "results.json")
    data = res.data
    assert res.kind == "nplus1-sim"
    assert {r["policy"] for r in data["runs"]} == {"gang", "paired-gang", "nplus1"}
    seeds = data["spec"]["seeds"]
    for policy in ("gang", "paired-gang", "nplus1"):
        rates = per_seed(data, policy, "rate")
        assert len(rates) == seeds and all(0.0 < r <= 1.0 for r in rates)
    # the same stream for every policy: the same jobs of each kind
    for r in data["runs"]:
        same = next(o for o in data["runs"] if o["seed"] == r["seed"])
        assert {k: r["kinds"][k]["jobs"] for k in KINDS} == {
            k: same["kinds"][k]["jobs"] for k in KINDS
        }
        assert set(r["use"]) == {"cpu", "disk", "net"}
        assert all(0.0 <= v <= 1.0 for vs in r["use"].values() for v in vs)
    report = (out / "report.md").read_text()
    assert "N + 1 gangs against paired-gang" in report and "| disk + net |" in report
    assert (out / "device-use.png").stat().st_size > 0
    capsys.readouterr()
