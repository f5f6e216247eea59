"""testbed/cluster/agents.py on real processes (no root: plain children stand in for
agents): the start check after one grace for all, and stopping side by side."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from testbed.cluster import agents
from testbed.cluster.state import AgentRecord

IGNORES_TERM = "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"


def _child(code: str, log: Path) -> AgentRecord:
    with log.open("w") as out:
        p = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    return AgentRecord(
        node=log.stem, pid=p.pid, start_time=psutil.Process(p.pid).create_time(),
        cmd=[], log=str(log),
    )  # fmt: skip


def test_a_child_that_dies_in_its_grace_is_named_with_its_status_and_log(
    tmp_path: Path,
) -> None:
    ok = _child("import time; time.sleep(60)", tmp_path / "n0.log")
    bad = _child("import sys; print('bad key'); sys.exit(3)", tmp_path / "n1.log")
    try:
        with pytest.raises(RuntimeError, match=r"agent for n1 exited with status 3") as info:
            agents.await_agents([ok, bad], grace_s=0.5)
        assert "bad key" in str(info.value)
    finally:
        agents.stop_agents([ok, bad])
    assert not agents.same_process(ok.pid, ok.start_time)


def test_stop_agents_terms_all_and_kills_what_ignores_it(tmp_path: Path) -> None:
    polite = [_child("import time; time.sleep(60)", tmp_path / f"n{i}.log") for i in range(3)]
    stubborn = _child(IGNORES_TERM, tmp_path / "n3.log")
    recs = [*polite, stubborn]
    assert all(agents.same_process(r.pid, r.start_time) for r in recs)
    stopped = agents.stop_agents(recs, timeout_s=1.0)
    assert [r.node for r in stopped] == ["n0", "n1", "n2", "n3"]
    assert not any(agents.same_process(r.pid, r.start_time) for r in recs)
    assert agents.stop_agents(recs) == []  # nothing left: a second stop finds none
