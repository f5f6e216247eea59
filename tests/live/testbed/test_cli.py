"""The tests of tests/unit/testbed/test_cli.py that start processes or sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cli import main
from tests.support.swf_trace import write_trace


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "testbed.cli", "policies"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # as `| head` does once it has what it wants
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err and proc.returncode in (0, 141)


def test_simulate_swf_writes_results_and_counts_rejected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [(0, 10, 4, 20, 0), (1, 5, 16, 5, 0), (2, 5, 4, 10, 0), (3, 5, 8, 5, 0)]
    trace = write_trace(tmp_path / "t.swf", rows)
    out = tmp_path / "out"
    rc = main(
        [
            "simulate",
            "--policy",
            "fcfs,easy",
            "--workload",
            f"swf:{trace}",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert "rejected job 2 (fcfs): size 16 > 8 nodes" in text
    summary = json.loads((out / "summary-easy.json").read_text())
    assert summary["nodes"] == 8  # from the trace's MaxProcs
    assert summary["completed"] == 3 and summary["rejected"] == 1
    csv_lines = (out / "jobs-fcfs.csv").read_text().splitlines()
    assert csv_lines[0].startswith("job_id,submit,size")
    assert len(csv_lines) == 1 + 3


def test_load_sweep_with_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "simulate",
            "--policy",
            "gang,paired-gang",
            "--workload",
            "lublin",
            "--jobs",
            "60",
            "--nodes",
            "8",
            "--profile",
            "homogeneous",
            "--loads",
            "0.4,0.8",
            "--out",
            str(tmp_path),
            "--plot",
            "--quiet",
        ]
    )
    assert rc == 0
    assert (tmp_path / "jobs_in_system.png").stat().st_size > 1000
    assert (tmp_path / "slowdown_vs_load.png").stat().st_size > 1000
    loads = {round(json.loads(p.read_text())["load"], 2) for p in tmp_path.glob("summary-*.json")}
    assert loads == {0.4, 0.8}
