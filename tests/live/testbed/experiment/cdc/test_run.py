"""The tests of tests/unit/testbed/experiment/cdc/test_run.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.cli import main
from tests.support.cdc_run import CANNED


def test_experiment_report_command_rewrites_a_report(tmp_path: Path, capsys: Any) -> None:
    from testbed.experiment import results

    made = results.made_now("cosched experiment run experiments/cdc-policies.toml")
    results.write(tmp_path / "results.json", results.Results("cdc-live", CANNED, made))
    assert main(["experiment", "report", str(tmp_path / "results.json")]) == 0
    assert "ours -30.8 %" in capsys.readouterr().out
    assert "CC-B" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "claims.png").exists()
