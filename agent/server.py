"""The agent's sockets: listening, connections, authenticated frames, refusals, job events.

Framing and authentication are agent/wire.py; what a request does is
agent/api.py. A connection is a :class:`common.conn.Connection` carrying a
frame decoder and a wire session; a frame that fails to decode or
authenticate is answered with an error, logged, and its connection closed,
while the agent keeps serving everyone else. Job events go to every
controller session, or wait (bounded) for the next one.

Whoever can reach the port can connect (issue 28): connections are accepted
in batches by common/guard.py's :class:`Acceptor` (EMFILE sheds, never
raises), an unauthenticated one is limited to a 4 KiB hello and
``Limits.handshake_s`` to send it, the oldest unauthenticated ones from one
address are evicted past ``Limits.pending_per_peer``, and a refusal to a peer
that has not authenticated is not signed with the cluster key
(agent/wire.py ``public_error``).
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from agent import wire
from common.conn import Connection
from common.guard import DEFAULT, Acceptor, Admission, Limits

CONTROLLER = "controller"  # the sender name of the scheduler's sessions (controller/nodes.py)

log = logging.getLogger("agent")

_LISTEN = ("agent-listen",)
# Job events kept while no controller is connected; past this the oldest go.
MAX_QUEUED_EVENTS = 10000
SWEEP_EVERY_S = 0.5  # how often deadlines are checked


class AgentConn(Connection):
    """A controller's connection: decoder, session, and whether hello was done."""

    def __init__(
        self,
        sel: selectors.BaseSelector,
        sock: socket.socket,
        peer: str,
        key: bytes,
        node: str,
        on_close: Callable[[Connection], None],
    ) -> None:
        super().__init__(sel, sock, peer, on_close=on_close)
        self.decoder = wire.FrameDecoder(key, first_max=wire.HELLO_MAX_BODY)
        self.session = wire.Session(key, f"agent:{node}")
        self.established = False
        self.peer_sender = ""  # the hello's sender: "controller" for the scheduler's sessions


class AgentServer:
    """Accept, read, check and hand each authenticated message to ``on_message``.

    ``on_message(conn, msg)`` is called for every frame that passed the
    session checks; ``on_heard()`` first, for every frame on an established
    session (it feeds the fail-safe).
    """

    def __init__(
        self,
        sel: selectors.BaseSelector,
        key: bytes,
        node: str,
        on_message: Callable[[AgentConn, wire.Message], None],
        on_heard: Callable[[AgentConn], None],
        limits: Limits = DEFAULT,
    ) -> None:
        self.sel = sel
        self.key = key
        self.node = node
        self.on_message = on_message
        self.on_heard = on_heard
        self.listener: socket.socket | None = None
        self.conns: dict[int, AgentConn] = {}
        self.backlog: deque[dict[str, Any]] = deque(maxlen=MAX_QUEUED_EVENTS)
        self.limits = limits
        self.admission = Admission(limits)
        self._acceptor: Acceptor | None = None
        self._next_sweep = 0.0

    def listen(self, address: tuple[str, int]) -> None:
        lsock = socket.create_server(address, reuse_port=False, backlog=self.limits.listen_backlog)
        lsock.setblocking(False)
        self.sel.register(lsock, selectors.EVENT_READ, _LISTEN)
        self.listener = lsock
        self._acceptor = Acceptor(lsock)

    def owns(self, tag: object) -> bool:
        return tag is _LISTEN or isinstance(tag, AgentConn)

    def ready(self, tag: object, mask: int) -> None:
        if tag is _LISTEN:
            self._accept()
            self.sweep()
            return
        assert isinstance(tag, AgentConn)
        if mask & selectors.EVENT_READ:
            self._readable(tag)
        if mask & selectors.EVENT_WRITE and tag.open:
            tag.flush()

    def sessions(self) -> list[AgentConn]:
        return [c for c in self.conns.values() if c.established and not c.closing]

    def send(
        self, conn: AgentConn, mtype: str, data: dict[str, Any], re: int | None = None
    ) -> None:
        _, frame = conn.session.make(mtype, data, re)
        conn.write(frame)

    def send_event(self, event: dict[str, Any]) -> None:
        """A job event to every session; kept for the next controller session when no
        controller (``sender`` "controller") is connected. A tool that connected in
        between (a status query) must not take an event the controller needs: one did,
        and a rank's exit was lost for good (tests/faults/test_agent_kill.py)."""
        sessions = self.sessions()
        for c in sessions:
            self.send(c, wire.JOB_EVENT, event)
        if not any(c.peer_sender == CONTROLLER for c in sessions):
            self.backlog.append(event)

    def send_backlog(self, conn: AgentConn) -> None:
        """Events that found no controller session, to a newly established one."""
        if conn.peer_sender != CONTROLLER:
            return
        while self.backlog:
            self.send(conn, wire.JOB_EVENT, self.backlog.popleft())

    def sweep(self) -> None:
        """Close connections past their handshake or idle deadline (at most every 0.5 s)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY_S
        for conn in self.admission.expired():
            assert isinstance(conn, AgentConn)
            if conn.established and conn.peer_sender == CONTROLLER:
                self.admission.heard(conn)  # the scheduler's session: its fail-safe rules
                continue
            log.info("closing %s: %s", conn.peer,
                     "silent too long" if conn.established else "no hello in time")  # fmt: skip
            conn.close()

    def close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
        for conn in list(self.conns.values()):
            conn.close()
        if self.listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self.listener)
            self.listener.close()
            self.listener = None

    # ---- connections ----------------------------------------------------------
    def _accept(self) -> None:
        assert self._acceptor is not None
        for sock, addr in self._acceptor.accept_many(self.limits.accept_batch):
            host, port = addr[0], addr[1]
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = AgentConn(self.sel, sock, f"{host}:{port}", self.key, self.node, self._forget)
            self.conns[conn.fd] = conn
            conn.register(conn)
            for old in self.admission.admit_pending(conn, host):
                assert isinstance(old, AgentConn)
                log.debug("evicting unauthenticated %s (too many from %s)", old.peer, host)
                old.close()

    def _forget(self, conn: Connection) -> None:
        self.conns.pop(conn.fd, None)
        self.admission.forget(conn)

    def refuse_and_close(self, conn: AgentConn, err: wire.WireError) -> None:
        """Log the refusal, tell the peer why (the stream is lost after it), close."""
        log.warning("refused frame from %s (%s): %s; closing", conn.peer, err.code, err)
        try:
            if conn.established:
                _, frame = conn.session.make(wire.ERROR, {"code": err.code, "reason": str(err)})
            else:  # never a cluster-key signature for someone without the key
                frame = wire.public_error(conn.session.sender, err.code, str(err))
        except wire.WireError:
            frame = b""  # cannot even say why: just close
        conn.refuse(frame)

    def _readable(self, conn: AgentConn) -> None:
        data = conn.recv()
        if data is None:
            return
        if not data:
            if conn.decoder.pending:
                log.warning("connection from %s closed inside a frame (truncated)", conn.peer)
            return
        if conn.closing:
            return
        try:
            msgs = conn.decoder.feed(data)
        except wire.WireError as e:
            self.refuse_and_close(conn, e)
            return
        for msg in msgs:
            try:
                conn.session.check_incoming(msg, conn.established)
            except wire.WireError as e:
                self.refuse_and_close(conn, e)
                return
            if conn.established:
                self.on_heard(conn)
                self.admission.heard(conn)
            self.on_message(conn, msg)
            if conn.established and self.admission.is_pending(conn):
                self.admission.authenticated(conn)  # the hello was taken
            if conn.closing or not conn.open:
                return
