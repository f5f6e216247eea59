"""The tests of tests/unit/agent/test_daemon.py that start processes or sockets."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from agent.daemon import Agent
from tests.support.agent_fakes import KEY, make_agent, serving


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Agent, tuple[str, int]]]:
    agent, _ = make_agent(tmp_path)
    with serving(agent) as addr:
        yield agent, addr


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
