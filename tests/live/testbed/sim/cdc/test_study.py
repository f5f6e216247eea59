"""The tests of tests/unit/testbed/sim/cdc/test_study.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cdc_study import REPO, SPEC


def test_experiment_run_quick_writes_the_report(tmp_path: Path) -> None:
    """`cosched experiment run experiments/cdc-paper-scale.toml --quick` (CI's run)."""
    from testbed.cli import main

    assert main(["experiment", "run", str(SPEC), "--quick", "--out", str(tmp_path)]) == 0
    env = json.loads((tmp_path / "results.json").read_text())
    assert env["kind"] == "cdc-sim"
    doc = env["data"]
    assert {r["scheme"] for r in doc["rows"]} == {"sb", "cc-b"}
    assert all(r["jobs"] == 2 and r["seeds"] == [1] for r in doc["rows"])
    assert "one seed: no verdict" in (tmp_path / "report.md").read_text()


def test_the_validation_runs_through_the_framework(tmp_path: Path) -> None:
    """`cosched experiment run experiments/cdc-sim-vs-live.toml --quick`: one cell."""
    from testbed.cli import main

    spec = REPO / "experiments" / "cdc-sim-vs-live.toml"
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(tmp_path)]) == 0
    env = json.loads((tmp_path / "results.json").read_text())
    assert env["kind"] == "cdc-sim-vs-live"
    (cell,) = env["data"]["cells"]
    assert (cell["scheme"], cell["load"], cell["mpl"]) == ("cc-b", "heavy", 5)
    assert "| heavy, MPL 5 | cc-b |" in (tmp_path / "report.md").read_text()
