"""The tests of tests/unit/testbed/experiment/test_pairedscale.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.experiment.pairedscale import report
from tests.support.pairedscale import _spec


def test_quick_study_runs_reports_and_judges(tmp_path: Path, cal: Path) -> None:
    from testbed.cli import main

    out = tmp_path / "out"
    spec = _spec(tmp_path, cal)
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["kind"] == "paired-scale"
    data = doc["data"]
    assert data["meta"]["quick"] and data["meta"]["seeds"] == [1, 2]
    rows = data["runs"]
    # every configuration at the quick loads, two seeds each; ablations at their loads
    assert {(r["label"], r["load"]) for r in rows} >= {("gang", 0.5), ("paired", 0.95)}
    assert all(r["seed"] in (1, 2) for r in rows)
    gang = [r for r in rows if r["label"] == "gang"]
    assert all("series" in r for r in gang)
    # the program term makes wide jobs longer: realised load above the nominal
    assert all(r["offered_realised"] > r["offered_nominal"] for r in gang)
    old = [r for r in rows if r["label"] == "gang-old-model"]
    assert all(r["offered_realised"] == pytest.approx(r["offered_nominal"]) for r in old)
    text = (out / "report.md").read_text()
    assert "## The paper beside ours" in text and "95 % confidence" in text
    assert (out / "fig11.png").stat().st_size > 0
    ids = {c.id for c in report.claims(rows)}
    assert "wiseman2003/fig10/ratio-0.5" in ids and "wiseman2003/s4.2/run-length" in ids
    # the report is rebuilt from results.json alone
    again = tmp_path / "again"
    again.mkdir()
    (again / "results.json").write_text((out / "results.json").read_text())
    assert main(["experiment", "report", str(again / "results.json")]) == 0
    assert (again / "report.md").read_text() == text
