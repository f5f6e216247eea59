"""The controller's request channels (docs/controller-api.md).

* Unix socket, one JSON object per line; the caller is the socket peer's uid
  (``SO_PEERCRED``), so a local user cannot claim to be someone else.
* TCP with the agent wire protocol (agent/wire.py): HMAC-SHA256 frames,
  hello/nonce, strictly increasing sequence numbers; message ``request``,
  answer ``reply``. A frame that fails authentication or replays gets an
  ``error`` frame and the connection is closed; the daemon keeps serving.

Gorda & Brooks 1991 §3.1: "Every transaction between the daemon and client applications
take place using well-known socket serviced by the GS daemon". Non-blocking
sockets driven by the daemon's selector: requests are answered between quanta,
so a request never delays a context switch.

What any local user or peer can hold (issue 28, common/guard.py): accept never
raises (EMFILE sheds the connection); a unix-socket user holds at most
``Limits.open_per_user`` connections (root and the daemon's user exempt) and
one that stays silent for ``Limits.idle_s`` is closed; on TCP, unauthenticated
connections are capped per address (oldest evicted), get a 4 KiB hello and
``Limits.handshake_s`` to send it, and a refusal is not signed with the
cluster key. Request lines are parsed with their nesting bounded
(common/safejson.py); while a client leaves more than ``common.conn.MAX_OUT``
bytes of replies unread, its further requests wait unread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import secrets
import selectors
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from agent import wire
from common import safejson
from common.conn import Connection, split_line
from common.guard import DEFAULT, Acceptor, Admission, Limits
from controller.api import Caller

log = logging.getLogger("controller.server")

REQUEST = "request"
REPLY = "reply"
MAX_LINE = 1 << 20
SWEEP_EVERY_S = 0.5

Handler = Callable[[object, Caller], dict[str, Any]]


def uid_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid:{uid}"


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


class _Conn(Connection):
    """A client: JSON lines over the unix socket, or authenticated frames over TCP."""

    def __init__(
        self,
        sel: selectors.BaseSelector,
        sock: socket.socket,
        kind: str,
        peer: str,
        on_close: Callable[[Connection], None],
    ) -> None:
        # A unix client's request line is cut by frames(); a frame's size is the decoder's.
        max_input = MAX_LINE if kind == "unix" else None
        super().__init__(sel, sock, peer, max_input=max_input, on_close=on_close)
        self.kind = kind
        self.user = ""
        self.uid: int | None = None  # the unix peer's uid (SO_PEERCRED)
        self.decoder: wire.FrameDecoder | None = None
        self.session: wire.Session | None = None
        self.established = False
        self.waiting: deque[wire.Message] = deque()  # TCP requests left unread (backlogged)


class Server:
    def __init__(
        self,
        sel: selectors.BaseSelector,
        handler: Handler,
        *,
        unix_path: str | None,
        tcp: tuple[str, int] | None,
        key: bytes | None,
        user_keys: dict[str, bytes] | None = None,
        limits: Limits = DEFAULT,
    ) -> None:
        self.sel = sel
        self.handler = handler
        self.key = key
        self.user_keys = user_keys
        self.unix_path = unix_path
        self.listeners: list[socket.socket] = []
        self.conns: dict[int, _Conn] = {}
        self.limits = limits
        self.admission = Admission(limits)
        self.acceptors: dict[str, Acceptor] = {}
        self._next_sweep = 0.0
        if unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(unix_path)
            os.makedirs(os.path.dirname(unix_path) or ".", exist_ok=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(unix_path)
            os.chmod(unix_path, 0o666)  # any local user may ask; SO_PEERCRED says who
            self._listen(s, "unix")
        if tcp is not None:
            if key is None:
                raise ValueError("a TCP listener needs the cluster key (--key-file)")
            s = socket.create_server(tcp)
            self._listen(s, "tcp")
            self.tcp_address = s.getsockname()[:2]

    def _listen(self, s: socket.socket, kind: str) -> None:
        s.listen(self.limits.listen_backlog)
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, ("listen", kind))
        self.listeners.append(s)
        self.acceptors[kind] = Acceptor(s)

    def owns(self, data: object) -> bool:
        return isinstance(data, tuple) and len(data) == 2 and data[0] in ("listen", "conn")

    def ready(self, data: tuple[str, Any], mask: int) -> None:
        if data[0] == "listen":
            self._accept(data[1])
            self.sweep()
            return
        conn: _Conn = data[1]
        if mask & selectors.EVENT_READ:
            self._readable(conn)
        if mask & selectors.EVENT_WRITE and conn.open:
            conn.flush()
            if conn.open and not conn.backlogged and not conn.closing:
                self._resume(conn)  # requests left unread while its replies piled up

    def sweep(self) -> None:
        """Close connections past their handshake or idle deadline (at most every 0.5 s)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY_S
        for conn in self.admission.expired():
            assert isinstance(conn, _Conn)
            log.info("closing %s: %s", conn.peer,
                     "silent too long" if conn.established else "no hello in time")  # fmt: skip
            conn.close()

    def close(self) -> None:
        for a in self.acceptors.values():
            a.close()
        for c in list(self.conns.values()):
            c.drain_blocking()  # answers already queued (a shutdown reply) go out first
        for s in self.listeners:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(s)
            s.close()
        self.listeners = []
        if self.unix_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)

    # ---- connections -----------------------------------------------------------
    def _accept(self, kind: str) -> None:
        for sock, addr in self.acceptors[kind].accept_many(self.limits.accept_batch):
            if kind == "unix":
                self._accept_unix(sock)
            else:
                self._accept_tcp(sock, addr)

    def _accept_unix(self, sock: socket.socket) -> None:
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            sock.close()
            return
        pid, uid, _gid = struct.unpack("3i", creds)
        conn = _Conn(self.sel, sock, "unix", f"pid {pid} uid {uid}", self._forget)
        conn.user = uid_name(uid)
        conn.uid = uid
        self.conns[conn.fd] = conn
        conn.register(("conn", conn))
        if not self.admission.admit_user(conn, uid, exempt=uid == os.geteuid()):
            log.warning("refused a connection of uid %d: it holds %d already", uid,
                        self.limits.open_per_user)  # fmt: skip
            conn.refuse(
                json.dumps({"ok": False, "error": f"too many connections from {conn.user}"
                            f" (at most {self.limits.open_per_user}); close some"}).encode()
                + b"\n"
            )  # fmt: skip

    def _accept_tcp(self, sock: socket.socket, addr: Any) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(self.sel, sock, "tcp", f"{addr[0]}:{addr[1]}", self._forget)
        assert self.key is not None
        conn.decoder = wire.FrameDecoder(
            self.key, key_for=self._key_for, first_max=wire.HELLO_MAX_BODY
        )
        conn.session = wire.Session(self.key, "controller")
        self.conns[conn.fd] = conn
        conn.register(("conn", conn))
        for old in self.admission.admit_pending(conn, addr[0]):
            assert isinstance(old, _Conn)
            old.close()

    def _key_for(self, sender: str) -> bytes | None:
        """The key a TCP client's frames must carry (docs/security.md).

        With per-user keys (``--user-keys``) a client ``client:NAME`` must sign with
        NAME's key and is NAME; the cluster key is then not accepted at all (it is the
        agents' credential, not a user's). Without them, the cluster key, and the client
        names its user (a key holder is root on every node anyway).
        """
        if self.user_keys is None:
            return self.key
        name = sender.removeprefix("client:")
        return self.user_keys.get(name) if sender.startswith("client:") else None

    def _forget(self, conn: Connection) -> None:
        self.conns.pop(conn.fd, None)
        self.admission.forget(conn)

    def _readable(self, conn: _Conn) -> None:
        data = conn.recv()
        if not data:
            return  # nothing yet, or EOF (then closed)
        if conn.closing:
            return
        self.admission.heard(conn)
        if conn.kind == "unix":
            self._unix_data(conn, data)
        else:
            self._tcp_data(conn, data)

    def _resume(self, conn: _Conn) -> None:
        if conn.kind == "unix" and split_line(conn.inbuf, 0) is not None:
            self._unix_data(conn, b"")
        elif conn.waiting:
            self._tcp_messages(conn)

    # ---- unix: JSON lines ----------------------------------------------------------
    def _unix_data(self, conn: _Conn, data: bytes) -> None:
        lines = conn.frames(data, split_line)
        for i, line in enumerate(lines):
            if conn.backlogged:  # a client that does not read its replies: wait for it
                conn.inbuf[:0] = b"".join(lines[i:])
                return
            if not line.strip():
                continue
            try:
                req: object = safejson.loads(line)
            except ValueError as e:
                reply: dict[str, Any] = {"ok": False, "error": f"request is not JSON: {e}"}
            else:
                reply = self.handler(req, Caller(conn.user, "unix", conn.uid))
            conn.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            if not conn.open:
                return
        if conn.overflowed:
            log.warning("refused request from %s: line longer than %d bytes", conn.peer, MAX_LINE)
            conn.refuse(b'{"ok":false,"error":"request line longer than 1 MiB"}\n')

    # ---- tcp: authenticated frames -------------------------------------------------
    def _refuse(self, conn: _Conn, err: wire.WireError, re: int | None = None) -> None:
        log.warning("refused frame from %s (%s): %s; closing", conn.peer, err.code, err)
        assert conn.session is not None
        try:
            if conn.established:
                _, frame = conn.session.make(wire.ERROR, {"code": err.code, "reason": str(err)}, re)
            else:  # never a cluster-key signature for someone without the key
                frame = wire.public_error("controller", err.code, str(err), re)
        except wire.WireError:
            frame = b""  # cannot even say why: just close
        conn.refuse(frame)

    def _tcp_data(self, conn: _Conn, data: bytes) -> None:
        assert conn.decoder is not None
        try:
            conn.waiting.extend(conn.decoder.feed(data))
        except wire.WireError as e:
            self._refuse(conn, e)
            return
        self._tcp_messages(conn)

    def _tcp_messages(self, conn: _Conn) -> None:
        assert conn.decoder is not None and conn.session is not None
        while conn.waiting and not conn.backlogged:
            msg = conn.waiting.popleft()
            try:
                conn.session.check_incoming(msg, conn.established)
                if not conn.established and not isinstance(msg.data.get("nonce"), str):
                    raise wire.Malformed("first frame must be hello with a nonce")
                if conn.established and msg.type != REQUEST:
                    raise wire.BadRequest(f"{msg.type!r} is not a controller request")
            except wire.WireError as e:
                self._refuse(conn, e, msg.seq)
                return
            if not conn.established:
                if self.user_keys is not None:
                    # the server, not the client, decides the user: the key's owner
                    conn.user = msg.sender.removeprefix("client:")
                    conn.session.key = conn.decoder.key_used
                conn.session.conn = secrets.token_hex(16)
                conn.established = True
                self.admission.authenticated(conn)
                _, frame = conn.session.make(
                    wire.HELLO,
                    {"nonce": msg.data["nonce"], "conn": conn.session.conn, "node": "controller"},
                    msg.seq,
                )
                conn.write(frame)
                continue
            user = conn.user or msg.data.get("user")  # a per-user key's owner wins
            if not isinstance(user, str) or not user:
                reply: dict[str, Any] = {
                    "ok": False,
                    "error": "TCP requests must name their 'user'",
                }
            else:
                req = {"op": msg.data.get("op"), "args": msg.data.get("args", {})}
                reply = self.handler(req, Caller(user, "tcp"))
            _, frame = conn.session.make(REPLY, reply, msg.seq)
            conn.write(frame)
            if not conn.open:
                return
