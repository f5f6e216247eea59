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
from collections.abc import Callable
from typing import Any

from agent import wire
from common.conn import Connection, split_line
from controller.api import Caller

log = logging.getLogger("controller.server")

REQUEST = "request"
REPLY = "reply"
MAX_LINE = 1 << 20

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
        self.decoder: wire.FrameDecoder | None = None
        self.session: wire.Session | None = None
        self.established = False


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
    ) -> None:
        self.sel = sel
        self.handler = handler
        self.key = key
        self.user_keys = user_keys
        self.unix_path = unix_path
        self.listeners: list[socket.socket] = []
        self.conns: dict[int, _Conn] = {}
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
        s.listen(64)
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, ("listen", kind))
        self.listeners.append(s)

    def owns(self, data: object) -> bool:
        return isinstance(data, tuple) and len(data) == 2 and data[0] in ("listen", "conn")

    def ready(self, data: tuple[str, Any], mask: int) -> None:
        if data[0] == "listen":
            self._accept(data[1])
            return
        conn: _Conn = data[1]
        if mask & selectors.EVENT_READ:
            self._readable(conn)
        if mask & selectors.EVENT_WRITE and conn.open:
            conn.flush()

    def close(self) -> None:
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
        lsock = next(s for s in self.listeners if self.sel.get_key(s).data == ("listen", kind))
        try:
            sock, addr = lsock.accept()
        except (BlockingIOError, OSError):
            return
        if kind == "unix":
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, _gid = struct.unpack("3i", creds)
            conn = _Conn(self.sel, sock, kind, f"pid {pid} uid {uid}", self._forget)
            conn.user = uid_name(uid)
        else:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(self.sel, sock, kind, f"{addr[0]}:{addr[1]}", self._forget)
            assert self.key is not None
            conn.decoder = wire.FrameDecoder(self.key, key_for=self._key_for)
            conn.session = wire.Session(self.key, "controller")
        self.conns[conn.fd] = conn
        conn.register(("conn", conn))

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

    def _readable(self, conn: _Conn) -> None:
        data = conn.recv()
        if not data:
            return  # nothing yet, or EOF (then closed)
        if conn.closing:
            return
        if conn.kind == "unix":
            self._unix_data(conn, data)
        else:
            self._tcp_data(conn, data)

    # ---- unix: JSON lines ----------------------------------------------------------
    def _unix_data(self, conn: _Conn, data: bytes) -> None:
        for line in conn.frames(data, split_line):
            if not line.strip():
                continue
            try:
                req: object = json.loads(line)
            except ValueError as e:
                reply: dict[str, Any] = {"ok": False, "error": f"request is not JSON: {e}"}
            else:
                reply = self.handler(req, Caller(conn.user, "unix"))
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
            _, frame = conn.session.make(wire.ERROR, {"code": err.code, "reason": str(err)}, re)
        except wire.WireError:
            frame = b""  # cannot even say why: just close
        conn.refuse(frame)

    def _tcp_data(self, conn: _Conn, data: bytes) -> None:
        assert conn.decoder is not None and conn.session is not None
        try:
            msgs = conn.decoder.feed(data)
        except wire.WireError as e:
            self._refuse(conn, e)
            return
        for msg in msgs:
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
