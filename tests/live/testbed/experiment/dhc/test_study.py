"""The tests of tests/unit/testbed/experiment/dhc/test_study.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main as cli

SPEC = """
kind = "dhc-sim"
[dhc]
name = "dhc-tiny"
pes = 8
gangs = 150
loads = [0.3]
point_loads = [0.515]
waste_pes = [32]
waste_rounds = 300
waste_table_pes = 64
[executor]
workers = 1
"""


def test_tiny_study_writes_report_plots_and_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "dhc.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert cli(["experiment", "run", str(spec), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reproduced:" in printed or "direction only:" in printed
    report = (out / "report.md").read_text()
    for heading in ("## Findings beside the paper's", "## Table 1", "Fig. 4", "Fig. 9", "Fig. 11",
                    "Fig. 19", "## §4.1", "## Fig. 18"):  # fmt: skip
        assert heading in report, heading
    for png in ("fig2-3", "fig4", "fig6-7", "fig9", "fig10-12", "fig11", "fig18", "fig19"):
        assert (out / f"{png}.png").stat().st_size > 1000
    doc = json.loads((out / "results.json").read_text())
    assert doc["kind"] == "dhc-sim" and doc["schema"] == 1
    families = {p["family"] for p in doc["data"]["points"]}
    assert families == {"balancing-any", "balancing-pe0", "mapping", "algorithms", "distributions"}
    # `cosched experiment report` rebuilds it from results.json, byte for byte
    before = (out / "report.md").read_text()
    (out / "report.md").unlink()
    capsys.readouterr()
    assert cli(["experiment", "report", str(out / "results.json")]) == 0
    assert (out / "report.md").read_text() == before
    assert (
        "Read at load 0.515, the nearest run to the paper's 0.645"
        in (out / "report.md").read_text()
    )


TABLE1 = """
kind = "dhc-sim"
[dhc]
name = "t1"
pes = 8
gangs = 150
seeds = 2
loads = [0.645]
point_loads = []
families = ["balancing"]
origins = ["any"]
waste = false
[executor]
workers = 1
"""


def test_table1_alone_is_the_mean_over_seeds_without_a_pe1_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """experiments/dhc-table1.toml's shape: one load, requests from any thread, seeds."""
    spec = tmp_path / "t1.toml"
    spec.write_text(TABLE1)
    out = tmp_path / "out"
    assert cli(["experiment", "run", str(spec), "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    points = doc["data"]["points"]
    assert {p["family"] for p in points} == {"balancing-any"} and len(points) == 10
    report = (out / "report.md").read_text()
    assert "| scheme | ours, any thread (mean of 2 seeds) | paper (any thread) |" in report
    assert "PE #1" not in report and not (out / "fig2-3.png").exists()
    root = [p["load_per_pe"] for p in points if p["label"] == "root"]
    assert f"| root | {sum(root) / 2:.2f} | 2.57 |" in report
