"""The tests of tests/unit/testbed/sim/cdc/test_workload.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from testbed.sim.cdc.engine import CdcSim, SimJobSpec
from testbed.sim.cdc.platform import PAPER
from testbed.sim.cdc.program import from_trace
from tests.support.cdc_workload import REPO, _cli


def test_simulate_runs_the_schemes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["simulate", "--policy", "cc-b,batch", "--mpl", "3", "--workload",
            "WL3:jobs=3,job_seconds=2", "--out", str(tmp_path), "--quiet"]  # fmt: skip
    rc, out, _err = _cli(argv, capsys)
    assert rc == 0
    assert "cc-b" in out and "batch" in out
    summary = json.loads((tmp_path / "summary-cc-b.json").read_text())
    assert summary["mpl"] == 3 and summary["done"] == 3
    assert json.loads((tmp_path / "summary-batch.json").read_text())["mpl"] == 1
    rows = (tmp_path / "jobs-cc-b.csv").read_text().splitlines()
    assert rows[0].startswith("job_id,app,size") and len(rows) == 4


def test_a_recorded_trace_replays_with_every_message_matched(tmp_path: Path) -> None:
    """Record NPB CG (class S, 2 ranks) over our library, build the simulator's program from
    it: every rank's sends to a peer are what that peer waits for from it."""
    env = dict(os.environ, COSCHED_TRACE=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "apps.npb.cg", "--ranks", "2", "--class", "S", "--niter", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-500:]
    ops = [json.loads((tmp_path / f"rank{r}.json").read_text())["ops"] for r in range(2)]
    assert any(o == ["m", "rep"] for o in ops[0]) and any(o == ["m", "iter"] for o in ops[0])
    prog = from_trace("cg", ops, iterations=3)
    sent: Counter[tuple[int, int]] = Counter()
    waited: Counter[tuple[int, int]] = Counter()
    for r, rp in enumerate(prog.ranks):
        for steps, n in rp.segments:
            for cpu, sends, recvs, _b, _f in steps:
                assert cpu >= 0
                for dst, _nb in sends:
                    sent[(r, dst)] += n
                for src in recvs:
                    waited[(src, r)] += n
    assert sent == waited and sent
    # and it runs to completion in the simulator
    res = CdcSim("cc-b", 1, [1.0, 1.0], PAPER).run([SimJobSpec(0, 0.0, prog)])
    assert res.jobs[0].execution > prog.ranks[0].cpu_s() * 0.99
