"""The paired-resident study's --quick variant through the CLI (it records the git commit
and may run its simulations in worker processes: live)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import pipeline, registry
from testbed.experiment.results import REPO
from testbed.sim.calibration import load_calibration

SPEC = REPO / "experiments" / "paired-resident.toml"


def test_the_quick_variant_runs_without_the_term_and_at_the_measured_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q"
    assert main(["experiment", "run", str(SPEC), "--quick", "--workers", "1", "--out",
                 str(out)]) == 0  # fmt: skip
    res = pipeline.read(out / "results.json")
    assert res.kind == "paired-resident"
    measured = load_calibration(REPO / "experiments" / "calibration.toml").resident_cost
    assert measured is not None and res.data["meta"]["measured_cost"] == measured
    rows = res.data["runs"]
    assert {r["cost"] for r in rows} == {0.0, measured}
    assert all(r["unfinished"] == 0 for r in rows)
    # the term is applied: strict gang's run at the measured cost is not the one without it
    gang = {r["cost"]: r["mean_response"] for r in rows if r["policy"] == "gang"}
    assert gang[measured] != gang[0.0]
    text = (out / "report.md").read_text()
    assert "seed by seed" in text
    assert registry.study(res.kind).render(res.data)["report.md"] in text
    capsys.readouterr()
