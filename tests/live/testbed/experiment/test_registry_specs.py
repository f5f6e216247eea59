"""The tests of tests/unit/testbed/experiment/test_registry_specs.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import pipeline, registry

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    "name",
    [
        "rajaei-gang-vs-backfill.toml",
        "sim-paired-fig10-12.toml",
        "sim-paired-capacity.toml",
        "paired-trace-fig3-13.toml",
    ],
)
def test_quick_variants_of_simulated_studies_run(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q"
    assert (
        main(["experiment", "run", str(REPO / "experiments" / name), "--quick", "--out", str(out)])
        == 0
    )
    res = pipeline.read(out / "results.json")
    assert res.made.command.endswith(f"{name} --quick --out {out}")
    study = registry.study(res.kind)
    if name != "sim-paired-capacity.toml":  # loads above 1: beyond the paper's figures
        assert study.claims(res.data), "the quick run measures some of the paper's results"
    assert (out / "report.md").read_text().rstrip().endswith("writes this report again from it.")
    capsys.readouterr()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_dhc_quick_variant_runs(tmp_path: Path) -> None:
    out = tmp_path / "q"
    assert (
        main(
            ["experiment", "run", str(REPO / "experiments/dhc.toml"), "--quick", "--out", str(out)]
        )
        == 0
    )
    res = pipeline.read(out / "results.json")
    assert {c.id for c in registry.study("dhc-sim").claims(res.data)} >= {
        "fr1996/fig4/sd",
        "fr1996/s4.1/uniform",
        "fr1996/fig18/unit",
    }
