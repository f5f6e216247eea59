"""The agent against a fake cgroupfs: enforcement logic and the protocol, no root."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from agent.daemon import Agent, AgentConfig
from agent.jobs import Job
from common.cgroups import V1Driver
from common.cgroups.fake import FakeCgroupFS, fake_v1

KEY = b"unit-test-key-0123456789abcdef"
PARENT = "cosched/u0"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_agent(tmp_path: Path, clock: Clock | None = None) -> tuple[Agent, FakeCgroupFS]:
    fs = fake_v1(tmp_path / "cg")
    drv = V1Driver(tmp_path / "cg", fs=fs, freeze_timeout=0.2, poll_interval=1e-4)
    cfg = AgentConfig(
        node="u0",
        listen=("127.0.0.1", 0),
        key=KEY,
        cgroup_parent=PARENT,
        run_dir=tmp_path / "run",
        fifo_priority=0,
        failsafe_timeout=2.0,
    )
    agent = Agent(cfg, driver=drv, clock=clock or time.monotonic)
    return agent, fs


def add_fake_job(agent: Agent, jid: str, frozen: bool = False) -> Job:
    cg = f"{PARENT}/job-{jid}"
    agent.driver.create(cg)
    # A (fake) pid keeps the reattached job alive across reap().
    agent.driver.add_pid(cg, 900000 + len(agent.jobs))
    if frozen:
        agent.driver.freeze(cg)
    job = Job(jid, cg, frozen=frozen, reattached=True)
    agent.jobs[jid] = job
    return job


def state(tmp_path: Path, jid: str) -> str:
    return (tmp_path / "cg/freezer" / PARENT / f"job-{jid}/freezer.state").read_text().strip()


def shares(tmp_path: Path, jid: str) -> int:
    return int((tmp_path / "cg/cpu" / PARENT / f"job-{jid}/cpu.shares").read_text())


def test_apply_quantum(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    for j in "abc":
        add_fake_job(agent, j)
    fs.set_usage(f"{PARENT}/job-a", 5_000)
    ack = agent.apply({"a": 900, "b": 100})
    assert state(tmp_path, "c") == "FROZEN"
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    assert (shares(tmp_path, "a"), shares(tmp_path, "b")) == (9216, 1024)
    assert set(ack["freeze_latency_s"]) == {"c"}
    assert ack["cpu_ns"]["a"] == 5_000
    fs.set_usage(f"{PARENT}/job-a", 12_000)
    ack = agent.apply({"c": 100})
    assert ack["cpu_ns"]["a"] == 7_000  # since the previous quantum
    assert set(ack["freeze_latency_s"]) == {"a", "b"}
    assert set(ack["thaw_latency_s"]) == {"c"}
    assert state(tmp_path, "a") == "FROZEN" and state(tmp_path, "c") == "THAWED"


def test_failed_freeze_is_reported(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b")
    fs.stuck.add(tmp_path / "cg/freezer" / PARENT / "job-b")
    ack = agent.apply({})
    assert "b" in ack["errors"] and "a" not in ack["errors"]
    assert agent.jobs["a"].frozen and not agent.jobs["b"].frozen
    assert state(tmp_path, "b") == "THAWED"


def test_failsafe_thaws_and_resets_weights(tmp_path: Path) -> None:
    clk = Clock()
    agent, _ = make_agent(tmp_path, clk)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b")
    agent.apply({"a": 900})
    assert state(tmp_path, "b") == "FROZEN"
    clk.t += 1.0
    agent.step(0)
    assert state(tmp_path, "b") == "FROZEN"  # not yet
    clk.t += 1.5
    agent.step(0)
    assert agent.failsafe.active
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    assert shares(tmp_path, "a") == shares(tmp_path, "b") == 1024
    snap = agent.snapshot()
    assert snap.failsafe_active and snap.heartbeat_age_s == pytest.approx(2.5)
    assert agent.metrics.registry.get_sample_value("cosched_agent_failsafe_activations_total") == 1


def test_reattach(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    drv = agent.driver
    drv.ensure_parent(PARENT)
    drv.create(f"{PARENT}/job-live")
    drv.add_pid(f"{PARENT}/job-live", 999999)
    drv.freeze(f"{PARENT}/job-live")
    drv.set_weight(f"{PARENT}/job-live", 300)
    drv.create(f"{PARENT}/job-gone")
    agent._reattach()
    live = agent.jobs["live"]
    assert live.reattached and live.frozen and live.weight == 300 and not live.ended
    gone = agent.jobs["gone"]
    assert gone.ended and gone.exit_code is None
    assert [e["job_id"] for e in agent.server.backlog] == ["gone"]  # for the next session
    assert not drv.exists(f"{PARENT}/job-gone")
    fs.exit_pid(999999)
    agent.reap()
    assert live.ended and live.exit_code is None


# ---- over a socket -----------------------------------------------------------


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Agent, tuple[str, int]]]:
    agent, _ = make_agent(tmp_path)
    agent.start()
    assert agent.listener is not None
    addr = agent.listener.getsockname()
    t = threading.Thread(target=agent.loop, daemon=True)
    t.start()
    try:
        yield agent, addr
    finally:
        agent.stop()
        t.join(5)
        agent.shutdown()


def test_hello_and_status(running: tuple[Agent, tuple[str, int]]) -> None:
    _, addr = running
    with AgentClient(addr, KEY) as c:
        assert c.hello["node"] == "u0" and c.hello["backend"] == "v1"
        st = c.status()
        assert st["jobs"] == [] and not st["failsafe_active"]
        assert c.heartbeat()["node"] == "u0"


def test_wrong_node_and_unknown_job(running: tuple[Agent, tuple[str, int]]) -> None:
    _, addr = running
    with AgentClient(addr, KEY) as c:
        with pytest.raises(AgentError) as e:
            c.quantum("n9", 1, {})
        assert e.value.code == "wrong_node"
        with pytest.raises(AgentError) as e:
            c.quantum("u0", 1, {"nope": 100})
        assert e.value.code == "unknown_job"
        with pytest.raises(AgentError) as e:
            c.kill("u0", "nope")
        assert e.value.code == "unknown_job"
        with pytest.raises(AgentError) as e:
            c.request(wire.QUANTUM, {"q": 1, "node": "u0"})
        assert e.value.code == "bad_request"
        assert c.quantum("u0", 2, {})["q"] == 2  # connection still fine


def test_launch_exit_event(running: tuple[Agent, tuple[str, int]], tmp_path: Path) -> None:
    _, addr = running
    with AgentClient(addr, KEY) as c:
        rep = c.launch(
            "u0",
            "j1",
            [sys.executable, "-c", "import os; print(os.environ['COSCHED_RANK'],"
             " os.environ['COSCHED_JOB_SECRET'])"],
            ranks=[0, 1],
            start_frozen=False,
        )  # fmt: skip
        assert set(rep["pids"]) == {"0", "1"}
        deadline = time.monotonic() + 10
        while len(c.events) < 1 and time.monotonic() < deadline:
            c.poll(0.1)
        ev = c.events.popleft().data
        assert ev["job_id"] == "j1" and ev["exit_code"] == 0
        out = Path(rep["run_dir"])
        assert out.parent == tmp_path / "run" and out.name.startswith("job-j1.")
        lines = [(out / f"rank-{r}.out").read_text().split() for r in (0, 1)]
        # one secret for the launch's ranks (agent/jobsecret.py), none on a command line
        assert [x[0] for x in lines] == ["0", "1"] and lines[0][1] == lines[1][1]
        assert len(lines[0][1]) == 64
        with pytest.raises(AgentError) as e:
            c.launch("u0", "../x", ["true"])
        assert e.value.code == "bad_request"


def _expect_refusal_and_close(sock: socket.socket) -> wire.Message:
    """The error a peer that never authenticated gets: signed with the public (empty) key,
    never with the cluster key (issue 28), then the connection closes."""
    data = b""
    sock.settimeout(5)
    while chunk := sock.recv(65536):
        data += chunk
    with pytest.raises(wire.PeerRefused):
        wire.FrameDecoder(KEY).feed(data)  # not a cluster-key signature
    msgs = wire.FrameDecoder(wire.PUBLIC_KEY).feed(data)
    assert msgs and msgs[-1].type == wire.ERROR
    return msgs[-1]


def test_forged_frame_closes_then_good_client_works(
    running: tuple[Agent, tuple[str, int]],
) -> None:
    _, addr = running
    s = socket.create_connection(addr)
    forged = wire.Session(b"wrong-key-wrong-key", "mallory").make(wire.HELLO, {"nonce": "x"})[1]
    s.sendall(forged)
    assert _expect_refusal_and_close(s).data["code"] == "bad_mac"
    s.close()
    s = socket.create_connection(addr)
    s.sendall(b"\x00" * 64)
    assert _expect_refusal_and_close(s).data["code"] == "bad_magic"
    s.close()
    with AgentClient(addr, KEY) as c:
        assert c.status()["node"] == "u0"


def test_replayed_frames_refused(running: tuple[Agent, tuple[str, int]]) -> None:
    _, addr = running
    c = AgentClient(addr, KEY)
    c.connect()
    seq, frame = c.session.make(wire.STATUS, {})
    c.send_raw(frame)
    assert c.wait_reply(seq).type == wire.OK
    c.send_raw(frame)  # same seq on the same connection
    with pytest.raises((AgentError, ConnectionError)):
        c.wait_reply(seq + 1, timeout=2)
        c.poll(1)
    c.close()
    # The recorded frame replayed on a fresh connection (after its own hello).
    c2 = AgentClient(addr, KEY)
    c2.connect()
    c2.send_raw(frame)
    with pytest.raises((AgentError, ConnectionError)):
        c2.poll(2)
        c2.poll(1)
    c2.close()
    with AgentClient(addr, KEY) as ok:
        assert ok.heartbeat()["node"] == "u0"


def test_oversize_frame_refused_then_good_client_works(
    running: tuple[Agent, tuple[str, int]],
) -> None:
    _, addr = running
    with AgentClient(addr, KEY) as c:
        # A session that announces a body over 1 MiB: refused before it is buffered.
        c.send_raw(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.MAX_BODY + 1))
        with pytest.raises(AgentError) as e:
            c.poll(2)
        assert e.value.code == "too_large"
        with pytest.raises(ConnectionError):
            c.poll(2)  # and the connection is closed
    s = socket.create_connection(addr)
    s.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.MAX_BODY + 1))
    assert _expect_refusal_and_close(s).data["code"] == "too_large"
    s.close()
    # before its hello a peer may send no more than a hello's worth (issue 28)
    s = socket.create_connection(addr)
    s.sendall(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.HELLO_MAX_BODY + 1))
    assert _expect_refusal_and_close(s).data["code"] == "too_large"
    s.close()
    with AgentClient(addr, KEY) as c:
        assert c.status()["node"] == "u0"


def test_event_without_a_session_reaches_the_next_one(
    running: tuple[Agent, tuple[str, int]],
) -> None:
    agent, addr = running
    # No controller connected: the event waits (the loop thread only appends too).
    agent.server.send_event({"node": "u0", "job_id": "j9", "event": "exit", "exit_code": 3})
    with AgentClient(addr, KEY) as c:
        deadline = time.monotonic() + 5
        while not c.events and time.monotonic() < deadline:
            c.poll(0.1)
        assert [e.data["job_id"] for e in c.events] == ["j9"]
    assert not agent.server.backlog


def test_a_tool_session_does_not_take_the_controllers_events(
    running: tuple[Agent, tuple[str, int]],
) -> None:
    """A status query that connects first must not consume the backlog (the fault suite
    lost a rank's exit that way: the job never ended)."""
    agent, addr = running
    agent.server.send_event({"node": "u0", "job_id": "j7", "event": "exit", "exit_code": 0})
    with AgentClient(addr, KEY, sender="fault-test") as tool:
        tool.status()
        tool.poll(0.3)
        assert not tool.events  # the backlog is the controller's
        # and an event while only a tool listens: the tool sees it, the backlog keeps it
        agent.server.send_event({"node": "u0", "job_id": "j8", "event": "exit", "exit_code": 0})
        deadline = time.monotonic() + 5
        while not tool.events and time.monotonic() < deadline:
            tool.poll(0.1)
        assert [e.data["job_id"] for e in tool.events] == ["j8"]
    with AgentClient(addr, KEY) as ctl:  # sender "controller"
        deadline = time.monotonic() + 5
        while len(ctl.events) < 2 and time.monotonic() < deadline:
            ctl.poll(0.1)
        assert [e.data["job_id"] for e in ctl.events] == ["j7", "j8"]
    assert not agent.server.backlog


def test_ended_jobs_are_forgotten_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.daemon as daemon

    monkeypatch.setattr(daemon, "KEEP_ENDED", 3)
    agent, _ = make_agent(tmp_path)
    for i in range(5):
        job = add_fake_job(agent, f"e{i}")
        agent._end(job, 0, "exited")
    assert sorted(agent.jobs) == ["e2", "e3", "e4"]  # the last KEEP_ENDED, newest kept
    live = add_fake_job(agent, "live")
    monkeypatch.setattr(daemon, "KEEP_ENDED_S", -1.0)  # every ended job is past it
    agent._end(add_fake_job(agent, "e5"), 0, "exited")
    assert sorted(agent.jobs) == ["live"]
    assert not live.ended and "live" in agent.jobs  # a running job is never pruned
