"""Fuzz targets of issue 28: the NIC socket's datagrams, and nesting depth at every JSON
entry point (the controller's unix socket, its TCP port before the MAC is checked, the
agent's and relay's frames after it, the NIC registration, mpilaunch's remote shell).

* "NIC datagrams": registrations (well formed, with fuzzed fields, nested, noise)
  carrying descriptors of every kind a job could hand over (sealed and unsealed pages,
  short pages, pipes, this job's mesh sockets, stray TCP and unix sockets), then
  event datagrams, through a real NicServer's socket. Fails on any exception;
  "accepted" when the registration was taken.
* "JSON nesting": documents nested 0 to 100,000 deep (arrays, objects, mixed,
  brackets inside strings, escapes) at each entry point. Fails on any exception
  other than the surface's own refusal, when a document deeper than 32 levels is
  taken, or when a well-formed shallow one is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from agent import nicguard, nicproto, wire
from agent.nic import NicServer
from common import safejson
from common.ports import free_port

KEY = b"fuzz-key-0123456789abcdef012345"
USER_KEY = b"fuzz-user-key-0123456789abcdef0"
PEERS = ("127.0.0.1", "127.0.0.1")


# ---- the NIC socket ---------------------------------------------------------------------------
class _Nic:
    """A real NicServer on a temporary socket; this process is rank 0 of job "j" (size 2)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cosched-fuzz-nic-"))
        self.port = free_port()
        me = os.getpid()
        view = nicguard.JobView("j", {0: me}, lambda: [me], PEERS, self.port)
        self.nic = NicServer(
            self.dir / "nic.sock",
            "n0",
            authorize=lambda job: view if job == "j" else f"no running job {job!r}",
            peer_erl=lambda node: 0.0,
            node_of_addr=lambda addr: "n1",
            on_event=lambda key, ev: None,
        )
        self.nic.open()
        self.mesh_lst = socket.create_server(("127.0.0.1", self.port))

    def mesh_socket(self) -> tuple[socket.socket, socket.socket]:
        far = socket.create_connection(("127.0.0.1", self.port))
        near, _ = self.mesh_lst.accept()
        return near, far


_NIC: list[_Nic] = []


def _fd(kind: str, keep: list[Any]) -> int:
    if kind in ("sealed", "unsealed", "short"):
        fd = os.memfd_create("fuzz", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, 100 if kind == "short" else nicproto.STATE_SIZE)
        if kind != "short":
            with open(fd, "r+b", closefd=False) as f:
                f.write(struct.pack("<IIII", nicproto.MAGIC, nicproto.VERSION, 0, 0))
        if kind != "unsealed":
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        keep.append(fd)
        return fd
    if kind == "pipe":
        r, w = os.pipe()
        keep += [r, w]
        return r
    if kind == "mesh":
        near, far = _NIC[0].mesh_socket()
        keep += [near, far]
        return near.fileno()
    if kind == "stray-tcp":
        lst = socket.create_server(("127.0.0.1", 0))
        c = socket.create_connection(lst.getsockname())
        keep += [lst, c]
        return c.fileno()
    a, b = socket.socketpair()
    keep += [a, b]
    return a.fileno()


FD_KINDS = ["sealed", "unsealed", "short", "pipe", "mesh", "stray-tcp", "unix"]
_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
_json = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip


def _registration(n_socks: int, changes: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"op": "register", "job": "j", "rank": 0, "pid": 1,
                           "socks": [{"peer": 1, "addr": "127.0.0.1"}] * n_socks}  # fmt: skip
    msg.update(changes or {})
    return json.dumps(msg).encode()


def nic_datagrams() -> st.SearchStrategy[Any]:
    """(first datagram, descriptor kinds, later datagrams, the claimed backlog)."""
    register = st.fixed_dictionaries(
        {"op": st.just("register")},
        optional={
            "job": st.sampled_from(["j", "k", ""]) | _json,
            "rank": st.integers(-1, 3) | _json,
            "socks": st.lists(st.fixed_dictionaries({}, optional={
                "peer": st.integers(-1, 3) | _json, "addr": st.text(max_size=9) | _json}),
                max_size=3) | _json,
            "pid": _json,
        },
    ).map(lambda d: json.dumps(d).encode())  # fmt: skip
    deep = st.integers(0, 100_000).map(lambda n: b'{"op":"register","job":' + b"[" * n)
    noise = st.one_of(register, st.binary(max_size=200),
                      _json.map(lambda v: json.dumps(v).encode()), deep)  # fmt: skip
    kinds = st.lists(st.sampled_from(FD_KINDS), max_size=4)
    event = st.one_of(
        st.sampled_from([b'{"op":"coll","on":true}', b'{"op":"coll","on":false}']),
        st.binary(max_size=80),
        st.integers(0, 50_000).map(lambda n: b"[" * n),
    )
    events = st.lists(event, max_size=3)
    backlog = st.integers(0, 2000)
    # what the library sends (a sealed page, its mesh socket to rank 1), then one thing
    # changed: a field, or one descriptor swapped for another kind
    valid = st.sampled_from([(_registration(0), ["sealed"]),
                             (_registration(1), ["sealed", "mesh"])])  # fmt: skip
    field = st.sampled_from(["job", "rank", "socks", "op"])
    edited = st.tuples(valid, field, _json).map(
        lambda t: (_registration(len(t[0][1]) - 1, {t[1]: t[2]}), t[0][1]))  # fmt: skip
    swapped = st.tuples(valid, st.integers(0, 1), st.sampled_from(FD_KINDS)).map(
        lambda t: (t[0][0], [t[2] if i == t[1] else k for i, k in enumerate(t[0][1])]))  # fmt: skip
    first = st.one_of(valid, valid, edited, swapped, st.tuples(noise, kinds))
    return st.tuples(first, events, backlog).map(lambda t: (t[0][0], t[0][1], t[1], t[2]))


def nic_target(case: Any) -> str:
    if not _NIC:
        _NIC.append(_Nic())
    h = _NIC[0]
    nic = h.nic
    data, kinds, events, unexpected = case
    keep: list[Any] = []
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        client.connect(str(nic.path))
        conn = nic.accept()
        assert conn is not None
        fds = [_fd(k, keep) for k in kinds]
        try:
            socket.send_fds(client, [data], fds)
        except OSError:
            return "rejected"  # the datagram did not fit the socket: nothing reached the agent
        nic.readable(conn)
        taken = "j/0" in nic.procs
        for ev in events:
            if conn.fileno() < 0:
                break
            try:
                client.send(ev)
            except OSError:
                break
            nic.readable(conn)
        if "j/0" in nic.procs:  # a backlog claim, which the rank's sockets may not back
            os.pwrite(fds[0], struct.pack("<Q", unexpected), nicproto.OFF_UNEXPECTED)
            view = nic.views()["j/0"]
            # nothing was ever delivered on its sockets: a claimed backlog is not believed
            assert not view.pending, (unexpected, view)
        return "accepted" if taken else "rejected"
    finally:
        client.close()
        conn_fds = list(nic.conns.values())
        for c in conn_fds:  # the agent sees the EOF
            nic.readable(c)
        for k in keep:
            if isinstance(k, int):
                os.close(k)
            else:
                k.close()
        assert not nic.procs and not nic.conns, (nic.procs, nic.conns)


# ---- nesting depth at every JSON entry point ----------------------------------------------------
def _doc(shape: str, depth: int) -> bytes:
    if shape == "array":
        return b"[" * depth + b"1" + b"]" * depth
    if shape == "object":
        return b'{"k":' * depth + b"1" + b"}" * depth
    if shape == "mixed":
        return b'[{"k":' * (depth // 2) + b"[" * (depth % 2) + b"1" + b"]" * (depth % 2) + (
            b"}]" * (depth // 2))  # fmt: skip
    if shape == "strings":  # brackets inside strings are not nesting
        return b'["[{\\"",' * depth + b'"]]]{{"' + b"]" * depth
    return b"[" * depth  # unterminated


SHAPES = ["array", "object", "mixed", "strings", "open"]
ENTRIES = ["controller unix", "controller tcp", "agent frame", "nic register", "mpilaunch"]


def nesting_cases() -> st.SearchStrategy[Any]:
    depth = st.one_of(st.integers(0, 40), st.integers(0, 3000), st.just(100_000))
    return st.tuples(st.sampled_from(ENTRIES), st.sampled_from(SHAPES), depth)


class _Controller:
    """A real controller Server (unix socket and TCP with per-user keys) with a handler
    that answers every request: what is fuzzed is what reaches it."""

    def __init__(self) -> None:
        from controller.server import Server

        self.dir = Path(tempfile.mkdtemp(prefix="cosched-fuzz-ctl-"))
        self.sel = selectors.DefaultSelector()
        self.server = Server(self.sel, lambda req, caller: {"ok": True, "result": req},
                             unix_path=str(self.dir / "c.sock"), tcp=("127.0.0.1", 0), key=KEY,
                             user_keys={"u": USER_KEY})  # fmt: skip

    def pump(self, until: Any, rounds: int = 200) -> None:
        for _ in range(rounds):
            if until():
                return
            for key, mask in self.sel.select(0.01):
                if self.server.owns(key.data):
                    self.server.ready(key.data, mask)


_CTL: list[_Controller] = []


def _send_in_background(c: socket.socket, data: bytes) -> Any:
    """Send from a thread (the server under test runs in this one); errors are the
    server closing on us, which is its right."""
    import threading

    def send() -> None:
        with contextlib.suppress(OSError):
            c.sendall(data)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def _collect(ctl: _Controller, c: socket.socket, done: Any) -> bytes:
    got = bytearray()
    closed = [False]

    def answered() -> bool:
        r, _, _ = __import__("select").select([c], [], [], 0)
        if r:
            try:
                chunk = c.recv(1 << 20)
            except OSError:
                chunk = b""
            closed[0] = closed[0] or not chunk
            got.extend(chunk)
        return done(got, closed[0])

    ctl.pump(answered, rounds=1000)
    return bytes(got)


def _ask_unix(ctl: _Controller, doc: bytes) -> dict[str, Any]:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(str(ctl.dir / "c.sock"))
    try:
        t = _send_in_background(c, doc + b"\n")
        got = _collect(ctl, c, lambda g, closed: g.endswith(b"\n") or closed)
        t.join(10)
    finally:
        c.close()
    assert got.endswith(b"\n"), "no answer on the unix socket"
    return dict(json.loads(got.splitlines()[0]))


def _ask_tcp(ctl: _Controller, doc: bytes) -> bytes:
    c = socket.create_connection(ctl.server.tcp_address)
    frame = wire.HEADER.pack(wire.MAGIC, wire.VERSION, len(doc)) + doc + b"\0" * wire.MAC_SIZE
    try:
        t = _send_in_background(c, frame)
        got = _collect(ctl, c, lambda g, closed: closed)
        t.join(10)
    finally:
        c.close()
    return got


def nesting_target(case: Any) -> str:
    entry, shape, depth = case
    doc = _doc(shape, depth)
    try:
        want = safejson.depth(doc) <= safejson.MAX_DEPTH and json.loads(doc) is not None
    except (ValueError, RecursionError):
        want = False
    if entry.startswith("controller") and not _CTL:
        _CTL.append(_Controller())
    if entry == "controller unix" and not doc.strip():
        return "rejected"  # an empty line is skipped, unanswered
    if entry == "controller unix":
        reply = _ask_unix(_CTL[0], doc)
        got = bool(reply["ok"])
        assert got or "JSON" in reply["error"], reply
    elif entry == "controller tcp":
        # the first frame's body is parsed (for its sender) before its MAC is checked
        raw = _ask_tcp(_CTL[0], doc)
        # refused and closed; a reset may overtake the refusal frame while we still send
        if raw:
            msg = wire.FrameDecoder(wire.PUBLIC_KEY).feed(raw)[-1]
            assert msg.type == wire.ERROR, msg
        got = False
        want = False  # no MAC, no sender: always refused, never a crash
    elif entry == "agent frame":
        header = wire.HEADER.pack(wire.MAGIC, wire.VERSION, len(doc))
        import hashlib
        import hmac

        mac = hmac.new(KEY, header + doc, hashlib.sha256).digest()
        try:
            msgs = wire.FrameDecoder(KEY).feed(header + doc + mac)
            got = bool(msgs)
        except wire.WireError:
            got = False
        want = False  # a body that is not a frame's object is refused either way
    elif entry == "nic register":
        try:
            nicguard.parse_register(doc)
            got = True
        except nicguard.Refused:
            got = False
        want = False  # none of these is a registration
    else:  # mpilaunch's remote shell
        from apps import mpilaunch

        a, b = socket.socketpair()
        try:
            if len(doc) > mpilaunch.MAX_MESSAGE:
                return "rejected"
            t = __import__("threading").Thread(target=lambda: a.sendall(
                mpilaunch._LEN.pack(len(doc)) + doc), daemon=True)  # fmt: skip
            t.start()
            got = mpilaunch._recv(b) is not None
            t.join(10)
        finally:
            a.close()
            b.close()
    if safejson.depth(doc) > safejson.MAX_DEPTH:
        assert not got, f"{entry}: a document {safejson.depth(doc)} deep was taken"
    elif want:
        assert got, f"{entry}: a well-formed document {depth} deep was refused"
    return "accepted" if got else "rejected"
