"""Emulated agents (agent/emulated.py) driven by the real controller core: the 64-node
smoke version of benchmarks/control_scale.py (issue 15), on loopback, no root (the
pure tests are in tests/unit/agent/test_emulated.py)."""

from __future__ import annotations

import itertools
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))

import control_scale  # noqa: E402

from controller.nodes import AgentPool, NodeInfo  # noqa: E402
from controller.scheduler import Scheduler  # noqa: E402


@pytest.mark.timeout(120)
def test_64_emulated_nodes_switch_every_quantum(tmp_path: Path) -> None:
    n, port = 64, 19500 + secrets.randbelow(400)
    key = secrets.token_hex(32).encode()
    kf = tmp_path / "key"
    kf.write_bytes(key)
    kf.chmod(0o600)
    control_scale.raise_fd_limit(n)
    host = control_scale.start_host(n, port, kf, tmp_path / "emulated.log")
    try:
        nodes = [NodeInfo(f"n{i}", ("127.0.0.1", port + i), "127.0.0.1", 1.0) for i in range(n)]
        pool = AgentPool(nodes, key, timeout=10.0)
        pool.connect_all(60.0)
        assert all(pool.connected().values())
        assert pool.agent_info("n7")["node"] == "n7"
        sched = Scheduler("gang", {}, pool)
        ids = [sched.submit({"name": f"w{k}", "size": n, "argv": ["true"]}, "root") for k in (0, 1)]
        seen: list[dict[str, Any]] = []
        inner = pool.quantum

        def spy(q: int, commands: Any, at: float | None = None, **kw: Any) -> Any:
            out = inner(q, commands, at, **kw)
            seen.append(out)
            return out

        pool.quantum = spy  # type: ignore[method-assign]
        for _ in range(12):
            sched.tick()
        assert sched.telemetry.counters.failed_commands == 0
        # from the third quantum on, every node thaws one wide job and freezes the other
        thawed = []
        for out in seen[3:]:
            assert len(out) == n and all(r.error is None for r in out.values())
            jobs = {tuple(sorted(r.ack["thaw_latency_s"])) for r in out.values()}
            assert len(jobs) == 1  # the same gang on every node
            thawed.append(jobs.pop())
        assert set(thawed) == {(str(ids[0]),), (str(ids[1]),)}
        assert all(a != b for a, b in itertools.pairwise(thawed))
        # a kill is answered at once (a fake group never empties by itself: the real
        # driver's 2 s wait for it cost every relayed agent its connection)
        t0 = time.perf_counter()
        reply = pool.kill("n5", str(ids[0]))
        assert time.perf_counter() - t0 < 1.0 and reply["ended"] is True
        status = pool.status("n5")
        assert status is not None
        assert {j["job_id"]: j["state"] for j in status["jobs"]}[str(ids[0])] == "ended"
        pool.close()
    finally:
        host.terminate()
        host.wait(10)
    assert host.returncode == 0
