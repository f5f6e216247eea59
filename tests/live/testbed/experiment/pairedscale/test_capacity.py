"""The paired-capacity study's --quick variant through the CLI (it records the git commit
and may run its simulations in worker processes: live)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import pipeline, registry
from testbed.experiment.pairedscale import capacity
from testbed.experiment.results import REPO

SPEC = REPO / "experiments" / "paired-capacity.toml"


def test_the_quick_variant_measures_throughput_and_the_what_if(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q"
    assert main(["experiment", "run", str(SPEC), "--quick", "--workers", "1", "--out",
                 str(out)]) == 0  # fmt: skip
    res = pipeline.read(out / "results.json")
    assert res.kind == "paired-capacity"
    rows = res.data["runs"]
    over = [r for r in rows if r["part"] == "overload"]
    assert {r["variant"] for r in over} == set(capacity.TERM_VARIANTS)
    # overloaded: never out of jobs late in the window, and paired gang serves more
    assert all(r["fewest_jobs_late"] > 0 for r in over)
    full = {r["policy"]: r["throughput_nominal"] for r in over if r["variant"] == "full"}
    assert 0 < full["gang"] < full["paired-gang"]
    # the what-if: strict gang at capacity 0.8 responds slower than at 1, paired unchanged
    for stream in capacity.STREAMS:
        mine = [r for r in rows if r["part"] == "capacity" and r["stream"] == stream]
        at = {r["capacity"]: r["mean_response"] for r in mine if r["policy"] == "gang"}
        assert set(at) == {1.0, 0.8} and at[0.8] > at[1.0]
    text = (out / "report.md").read_text()
    assert "What-if, not a measurement" in text and "### exp-runtimes" in text
    assert registry.study(res.kind).render(res.data)["report.md"] in text
    capsys.readouterr()
