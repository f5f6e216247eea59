"""API handlers and both channels (unix socket with SO_PEERCRED; TCP with HMAC frames)."""

from __future__ import annotations

import getpass
import json
import os
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from controller.api import Caller, Context, handle
from controller.client import ControllerClient, ControllerError, ControllerUnavailable
from controller.scheduler import Scheduler
from controller.server import MAX_LINE, Server
from tests.support.controller_fakes import BUSY, Clock, FakePool

KEY = b"k" * 32


class FakeDaemon:
    def __init__(self) -> None:
        self.stopped = False

    def write_checkpoint(self) -> str:
        return "/tmp/ck.json"

    def request_shutdown(self, checkpoint: bool) -> str | None:
        self.stopped = True
        return "/tmp/ck.json" if checkpoint else None

    def status_extra(self) -> dict[str, Any]:
        return {"checkpoint": None}


def ctx() -> Context:
    clock = Clock()
    s = Scheduler("gang", {}, FakePool(2), wall=clock, mono=clock)
    return Context(
        s,
        FakeDaemon(),
        operators=frozenset({0}),  # uids (controller/rights.py)
        user_exists=lambda u: u in {"root", "alice", "bob"},
    )


def call(c: Context, user: str, op: object, **args: Any) -> dict[str, Any]:
    return handle(c, {"op": op, "args": args}, Caller(user, "unix"))


def err(reply: dict[str, Any]) -> str:
    assert reply["ok"] is False, reply
    assert "\n" not in reply["error"]
    return str(reply["error"])


def test_handlers_and_errors() -> None:
    c = ctx()
    jid = call(c, "alice", "submit", spec=BUSY)["result"]["job_id"]
    assert "unknown op" in err(call(c, "alice", "launch"))
    assert "unknown user 'eve'" in err(call(c, "eve", "jobs"))
    assert "missing args.spec" in err(call(c, "alice", "submit"))
    assert "exceeds the cluster" in err(call(c, "alice", "submit", spec={"size": 9, "argv": ["x"]}))
    assert "unknown class" in err(call(c, "alice", "submit", spec=dict(BUSY, **{"class": "x"})))
    assert "operator only" in err(call(c, "alice", "set", quantum=0.5))
    assert "want seconds >= 0.01" in err(call(c, "root", "set", quantum=0.001))
    assert call(c, "root", "set", quantum=0.05)["result"]["quantum"] == 0.05
    assert call(c, "alice", "config")["result"]["quantum"] == 0.05
    assert "no job 99" in err(call(c, "alice", "job", job_id=99))
    assert "belongs to 'alice'" in err(call(c, "bob", "kill", job_id=jid))
    rec = call(c, "alice", "job", job_id=jid)["result"]
    assert rec["state"] == "frozen" and len(rec["ranks"]) == 2 and rec["ranks"][0]["stdout"]
    m = call(c, "bob", "matrix")["result"]
    assert m["slots"] == [[jid, jid]] and m["jobs"][str(jid)]["user"] == "alice"
    sl = call(c, "bob", "slice", size=1)["result"]
    assert sl["fits"] is False and sl["packed"] == [[jid, jid]]
    assert "slice: size" in err(call(c, "bob", "slice", size=0))
    st = call(c, "bob", "status")["result"]
    assert st["policy"] == "gang" and st["agents"] == {"n0": True, "n1": True}
    assert "python_objects" not in st  # a heap walk only on request
    # no quantum has run: nothing measured yet (Figs. 3 and 13 read this each quantum)
    assert st["last_quantum"] == {
        "utilization": {},
        "devices": {},
        "slot": None,
        "partner": None,
        "runnable": [],
    }
    mem = call(c, "bob", "status", memory=True)["result"]
    assert mem["python_objects"] > 1000 and mem["jobs_in_system"] == 1
    kinds = mem["python_object_types"]  # the soak's leak finder: counts by type
    assert kinds["dict"] > 0 and sum(kinds.values()) <= mem["python_objects"]
    assert call(c, "alice", "class", job_id=jid, **{"class": "standby"})["result"]["class"] == (
        "standby"
    )
    assert call(c, "alice", "kill", job_id=jid)["result"]["state"] == "killed"
    assert call(c, "alice", "jobs")["result"] == []
    assert len(call(c, "alice", "jobs", all=True)["result"]) == 1
    assert "must be a JSON object" in err(handle(c, [1], Caller("alice", "unix")))
    assert call(c, "root", "shutdown")["result"]["path"] == "/tmp/ck.json"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, Context]]:
    c = ctx()
    c.operators = frozenset({getpass.getuser()})
    c.user_exists = lambda u: True
    sel = selectors.DefaultSelector()
    srv = Server(
        sel,
        lambda req, caller: handle(c, req, caller),
        unix_path=str(tmp_path / "controller.sock"),
        tcp=("127.0.0.1", 0),
        key=KEY,
    )
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            for key, mask in sel.select(0.05):
                srv.ready(key.data, mask)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield srv, c
    finally:
        stop.set()
        t.join()
        srv.close()


def test_unix_channel_uses_peer_uid(served: tuple[Server, Context], tmp_path: Path) -> None:
    _srv, c = served
    with ControllerClient(str(tmp_path / "controller.sock"), retry=2) as cl:
        jid = cl.request("submit", spec=dict(BUSY, name="x"), user="mallory")["job_id"]
        assert c.sched.table.jobs[jid].user == getpass.getuser()  # the 'user' arg is ignored
        with pytest.raises(ControllerError, match="unknown op"):
            cl.request("nope")


def test_tcp_channel_authenticated_and_forgery_refused(served: tuple[Server, Context]) -> None:
    srv, c = served
    addr = srv.tcp_address
    with ControllerClient(tcp=addr, key=KEY, user="alice", retry=2) as cl:
        jid = cl.request("submit", spec=BUSY)["job_id"]
    assert c.sched.table.jobs[jid].user == "alice"
    # wrong key: the hello is refused and the connection closed
    with pytest.raises(ControllerError, match=r"refused|bad_mac"):
        ControllerClient(tcp=addr, key=b"x" * 32, user="alice", retry=0.5).request("jobs")
    # a valid session whose frame is tampered with
    ag = AgentClient(addr, KEY, sender="client:alice")
    ag.connect()
    _, frame = ag.session.make("request", {"op": "submit", "args": {"spec": BUSY}, "user": "bob"})
    forged = bytearray(frame)
    forged[-40] ^= 1
    ag.send_raw(bytes(forged))
    with pytest.raises((AgentError, ConnectionError, wire.WireError)):
        ag.poll(1.0)
        ag.poll(1.0)
    ag.close()
    # replaying a recorded frame on a new connection is refused too
    ag2 = AgentClient(addr, KEY, sender="client:alice")
    ag2.connect()
    ag2.send_raw(frame)
    with pytest.raises((AgentError, ConnectionError, wire.WireError)):
        ag2.poll(1.0)
        ag2.poll(1.0)
    ag2.close()
    assert [j.user for j in c.sched.table.jobs.values()] == ["alice"]
    # the server still serves
    with ControllerClient(tcp=addr, key=KEY, user="alice", retry=2) as cl:
        assert len(cl.request("jobs")) == 1


def test_client_retries_until_controller_appears(tmp_path: Path) -> None:
    path = str(tmp_path / "late.sock")
    with pytest.raises(ControllerUnavailable):
        ControllerClient(path, retry=0.3).request("jobs")

    def serve_later() -> None:
        import time

        time.sleep(0.4)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(1)
        conn, _ = s.accept()
        conn.recv(1000)
        conn.sendall(b'{"ok": true, "result": [42]}\n')
        conn.close()
        s.close()

    t = threading.Thread(target=serve_later)
    t.start()
    assert ControllerClient(path, retry=5).request("jobs") == [42]
    t.join()
    os.unlink(path)


def _read_to_eof(s: socket.socket) -> bytes:
    s.settimeout(5)
    got = bytearray()
    while chunk := s.recv(1 << 16):
        got += chunk
    return bytes(got)


def test_unix_line_over_1mib_refused_then_served(
    served: tuple[Server, Context], tmp_path: Path
) -> None:
    path = str(tmp_path / "controller.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b'{"op":"jobs"}\n' + b"x" * (MAX_LINE + 1))
    answers = [json.loads(line) for line in _read_to_eof(s).splitlines()]
    s.close()
    assert answers[0]["ok"] is True  # the whole line before the long one is answered
    assert answers[-1] == {"ok": False, "error": "request line longer than 1 MiB"}
    with ControllerClient(path, retry=2) as cl:
        assert cl.request("jobs") == []


def test_unix_client_that_half_closes_gets_its_answer(
    served: tuple[Server, Context], tmp_path: Path
) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(tmp_path / "controller.sock"))
    s.sendall(b'{"op":"jobs"}\n')
    s.shutdown(socket.SHUT_WR)  # "that is all": the answer must still come
    assert json.loads(_read_to_eof(s))["ok"] is True
    s.close()


def test_tcp_oversize_frame_refused_then_served(served: tuple[Server, Context]) -> None:
    srv, _ = served
    ag = AgentClient(srv.tcp_address, KEY, sender="client:alice")
    ag.connect()
    ag.send_raw(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.MAX_BODY + 1))
    with pytest.raises(AgentError) as e:
        ag.poll(2)
    assert e.value.code == "too_large"
    with pytest.raises(ConnectionError):
        ag.poll(2)
    ag.close()
    with ControllerClient(tcp=srv.tcp_address, key=KEY, user="alice", retry=2) as cl:
        assert cl.request("jobs") == []


ALICE_KEY = b"alice-key-0123456789abcdef0123"
BOB_KEY = b"bob-key-0123456789abcdef012345"


def test_per_user_keys_make_the_server_decide_the_user(served: tuple[Server, Context]) -> None:
    srv, c = served
    srv.user_keys = {"alice": ALICE_KEY, "bob": BOB_KEY}
    addr = srv.tcp_address
    # alice's key makes the client alice, whatever the request says
    with ControllerClient(tcp=addr, key=ALICE_KEY, user="alice", retry=2) as cl:
        jid = cl.request("submit", spec=BUSY)["job_id"]
        ag = cl._agent
        assert ag is not None
        reply = ag.request("request", {"op": "submit", "args": {"spec": BUSY}, "user": "root"})
        jid2 = reply.data["result"]["job_id"]
    assert c.sched.table.jobs[jid].user == "alice" and c.sched.table.jobs[jid2].user == "alice"
    # bob cannot kill alice's job
    with (
        ControllerClient(tcp=addr, key=BOB_KEY, user="bob", retry=2) as cl,
        pytest.raises(ControllerError, match="belongs to 'alice'"),
    ):
        cl.request("kill", job_id=jid)
    # claiming to be alice with bob's key, the cluster key, or an unknown user: refused
    for key, user in ((BOB_KEY, "alice"), (KEY, "alice"), (KEY, "root"), (ALICE_KEY, "eve")):
        with pytest.raises(ControllerError, match=r"refused|bad_mac|credential"):
            ControllerClient(tcp=addr, key=key, user=user, retry=0.3).request("jobs")
    assert {j.user for j in c.sched.table.jobs.values()} == {"alice"}


def test_user_keys_directory_is_checked(tmp_path: Path) -> None:
    from common.keys import KeyFileError, read_user_keys

    d = tmp_path / "users"
    d.mkdir(mode=0o755)
    with pytest.raises(KeyFileError, match=r"holds no NAME\.key"):
        read_user_keys(str(d))
    (d / "alice.key").write_bytes(ALICE_KEY)
    (d / "alice.key").chmod(0o644)
    with pytest.raises(KeyFileError, match="readable or writable by others"):
        read_user_keys(str(d))
    (d / "alice.key").chmod(0o600)
    assert read_user_keys(str(d)) == {"alice": ALICE_KEY}
    (d / "bob.key").write_bytes(KEY)
    (d / "bob.key").chmod(0o600)
    with pytest.raises(KeyFileError, match="is the cluster key"):
        read_user_keys(str(d), KEY)
    d.chmod(0o777)
    with pytest.raises(KeyFileError, match="writable by others"):
        read_user_keys(str(d))


def test_a_full_unix_backlog_is_waited_out_not_an_error(tmp_path: Path) -> None:
    """A flood of connects fills the controller socket's accept backlog; a client's connect
    then fails with EAGAIN at once (seen in the flood test of issue 28). The client must
    treat that as a busy controller and try again within its retry period."""
    path = str(tmp_path / "busy.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(0)
    fillers = []
    try:
        while True:  # fill the backlog until a connect is refused with EAGAIN
            f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            f.settimeout(1.0)
            try:
                f.connect(path)
            except BlockingIOError:
                f.close()
                break
            fillers.append(f)
            assert len(fillers) < 64, "the backlog never filled"

        def serve() -> None:
            time.sleep(0.3)  # the client has met EAGAIN by now
            for _ in range(len(fillers) + 1):
                conn, _addr = srv.accept()
                conn.settimeout(2.0)
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    data = b""
                if data:
                    conn.sendall(json.dumps({"ok": True, "result": "pong"}).encode() + b"\n")
                    conn.close()
                    return
                conn.close()

        for f in fillers:
            f.close()  # closed clients still wait in the backlog until accepted
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with ControllerClient(path, retry=5.0, timeout=2.0) as cl:
            assert cl.request("status") == "pong"
        t.join(5)
    finally:
        srv.close()
