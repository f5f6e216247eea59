"""Relays (controller/relay.py, controller/relaypool.py) over emulated agents, as processes.

The emulated agents (agent/emulated.py) are the real agent code; the relays run as
``python -m controller.relay``; the controller core is the real Scheduler over
RelayPool. No root, loopback only.
"""

from __future__ import annotations

import itertools
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from controller.nodes import NodeInfo
from controller.relay import main as relay_main
from controller.relaypool import RelayInfo, RelayPool
from controller.scheduler import Scheduler

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))

import control_scale  # noqa: E402

N, R = 16, 2


class Tree:
    """N emulated agents in one process behind R relay processes."""

    def __init__(self, tmp: Path, failsafe: float) -> None:
        self.port = 20000 + secrets.randbelow(300) * 40  # below the ephemeral range (32768-)
        self.key = secrets.token_hex(32).encode()
        self.kf = tmp / "key"
        self.kf.write_bytes(self.key)
        self.kf.chmod(0o600)
        self.state = tmp / "cluster.json"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.host = control_scale.start_host(
            N, self.port, self.kf, tmp / "emulated.log", failsafe=failsafe, state=self.state
        )
        self.procs.append(self.host)
        self.relays: list[subprocess.Popen[bytes]] = []
        self.infos: list[RelayInfo] = []
        per = N // R
        for i in range(R):
            addr = ("127.0.0.1", self.port + N + 1 + i)
            names = tuple(f"n{j}" for j in range(i * per, (i + 1) * per))
            self.relays.append(
                control_scale.start_relay(f"r{i}", addr, self.state, f"{i * per}:{(i + 1) * per}",
                                          self.kf, tmp / f"relay{i}.log", failsafe=failsafe)
            )  # fmt: skip
            self.procs.append(self.relays[-1])
            self.infos.append(RelayInfo(f"r{i}", addr, names))
        self.nodes = [
            NodeInfo(f"n{i}", ("127.0.0.1", self.port + i), "127.0.0.1", 1.0) for i in range(N)
        ]

    def pool(self) -> RelayPool:
        p = RelayPool(self.nodes, self.infos, self.key, timeout=5.0)
        p.connect_all(30.0)
        return p

    def hello(self, node: int) -> dict[str, Any]:
        """An agent's hello, asked directly (the hello does not feed its fail-safe)."""
        c = AgentClient(self.nodes[node].address, self.key, sender="test", timeout=5.0)
        try:
            return c.connect()
        finally:
            c.close()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def make_tree(tmp_path: Path) -> Iterator[Any]:
    trees: list[Tree] = []

    def make(failsafe: float = 30.0) -> Tree:
        trees.append(Tree(tmp_path, failsafe))
        return trees[-1]

    try:
        yield make
    finally:
        for t in trees:
            t.stop()


@pytest.mark.timeout(120)
def test_gang_through_relays_switches_every_node(make_tree: Any) -> None:
    t = make_tree()
    pool = t.pool()
    assert all(pool.connected().values())
    assert pool.agent_info("n9")["node"] == "n9"  # the agents' hellos came with the relay's
    sched = Scheduler("gang", {}, pool)
    ids = [sched.submit({"name": f"w{k}", "size": N, "argv": ["true"]}, "root") for k in (0, 1)]
    seen: list[Any] = []
    inner = pool.quantum_summary

    def spy(q: int, commands: Any, at: float | None = None, **kw: Any) -> Any:
        out = inner(q, commands, at, **kw)
        seen.append(out)
        return out

    pool.quantum_summary = spy  # type: ignore[method-assign]
    thawed = []
    for k in range(10):
        sched.tick()
        if k < 3:
            continue
        running = set()
        for node in pool.relay_of:
            st = pool.status(node)
            assert st is not None
            running.add(tuple(sorted(j["job_id"] for j in st["jobs"] if j["state"] == "running")))
        assert len(running) == 1  # the same gang on every node, behind both relays
        thawed.append(running.pop())
    assert sched.telemetry.counters.failed_commands == 0
    for summary, failed in seen[3:]:
        # one summary per relay, merged: every node answered, both jobs' CPU summed, the
        # apply instants' spread over all N nodes, every node's freeze confirmation
        assert not failed and summary.answered == N
        assert set(summary.cpu_ns) == set(ids)
        assert summary.applied[0] == N and summary.applied[2] >= summary.applied[1]
        assert len(summary.freeze_confirms) == N
        assert all(summary.counted.get(j) in (None, N) for j in ids)
    assert sched.last_utilization  # the gang's utilization came through the summaries
    assert set(thawed) == {(str(ids[0]),), (str(ids[1]),)}
    assert all(a != b for a, b in itertools.pairwise(thawed))
    # a node's own request goes through its relay, and refusals come back as they were
    st = pool.status("n12")
    assert st is not None and st["node"] == "n12" and len(st["jobs"]) == 2
    with pytest.raises(AgentError) as e:
        pool.request("n3", wire.KILL, {"node": "n3", "job_id": "no-such-job"})
    assert e.value.code != "unreachable"
    # the relay refuses a node that is not behind it
    c = pool.up.clients["r0"]
    assert c is not None
    with pytest.raises(AgentError) as e:
        c.request(wire.STATUS, {"node": "n12"})
    assert e.value.code == "wrong_node"
    pool.close()


@pytest.mark.timeout(120)
def test_time_triggered_plans_through_relays(make_tree: Any) -> None:
    t = make_tree()
    pool = t.pool()
    sched = Scheduler("gang", {}, pool)
    for k in (0, 1):
        sched.submit({"name": f"w{k}", "size": N, "argv": ["true"]}, "root")
    for _ in range(3):
        sched.tick()
    at = time.time() + 0.3
    out = pool.quantum(99, {n.name: {} for n in t.nodes}, at=at)
    assert all(r.error is None for r in out.values()), out
    assert time.time() >= at  # the acks came after the instant, as without relays
    pool.close()


def _wait_for(cond: Any, tick: Any = lambda: None, timeout: float = 30.0) -> bool:
    """Poll ``cond`` every 0.1 s (calling ``tick`` first) until it holds or ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        tick()
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.timeout(120)
def test_silent_controller_and_dead_relay_leave_agents_failsafe(make_tree: Any) -> None:
    failsafe = 2.0  # the agents' default
    t = make_tree(failsafe=failsafe)
    pool = t.pool()
    # the relays keep their agents alive only while the controller speaks: checked only
    # if it did speak every time within the timeout (a stalled host proves nothing here)
    last, gaps = time.monotonic(), []
    for _ in range(12):
        pool.maintain()
        now = time.monotonic()
        gaps.append(now - last)
        last = now
        time.sleep(0.25)
    alive = [t.hello(i)["failsafe_active"] for i in (0, 15)]
    if max(gaps) < failsafe / 2:
        assert not any(alive), gaps
    # a dead relay: its agents fail safe, the other relay's do not
    t.relays[1].kill()
    t.relays[1].wait()
    assert _wait_for(lambda: t.hello(15)["failsafe_active"], tick=pool.maintain)
    assert t.hello(15)["node"] == "n15"
    assert t.hello(0)["node"] == "n0" and not t.hello(0)["failsafe_active"]
    out = pool.quantum(1, {"n0": {}, "n15": {}})
    silent_since = time.monotonic()
    assert out["n0"].error is None and out["n15"].error and "r1" in out["n15"].error
    # a silent controller: the relay's own agents fail safe, not before a timeout
    assert _wait_for(lambda: t.hello(0)["failsafe_active"])
    assert time.monotonic() - silent_since >= failsafe * 0.9
    pool.close()


def test_relay_bad_state_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kf = tmp_path / "key"
    kf.write_bytes(secrets.token_hex(32).encode())
    kf.chmod(0o600)
    code = relay_main(["--name", "r0", "--listen", "127.0.0.1:1", "--state",
                       str(tmp_path / "missing.json"), "--key-file", str(kf)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "missing.json" in err[0]


def test_relaypool_refuses_a_node_behind_two_relays() -> None:
    nodes = [NodeInfo("n0", ("127.0.0.1", 1), "127.0.0.1")]
    infos = [RelayInfo("r0", ("127.0.0.1", 2), ("n0",)), RelayInfo("r1", ("127.0.0.1", 3), ("n0",))]
    with pytest.raises(ValueError, match="two relays"):
        RelayPool(nodes, infos, b"k" * 32)


def test_relay_refuses_a_timeout_that_is_not_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        relay_main(["--name", "r0", "--listen", "127.0.0.1:1", "--state",
                    str(tmp_path / "cluster.json"), "--key-file", str(tmp_path / "key"),
                    "--timeout", "0"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "--timeout 0.0: must be a positive" in err[-1]
