"""Blocking client for the agent protocol (used by the controller, tests, benchmarks).

    with AgentClient(("10.0.0.1", 7070), key) as c:
        c.launch("n0", "7", ["./prog"], ranks=[0, 1])
        ack = c.quantum("n0", q=1, jobs={"7": 100})

Requests wait for the reply whose ``re`` is their seq; job_event frames that
arrive meanwhile are queued in ``events``. For fan-out to many agents without
threads, use ``send()`` on each client and then ``wait_reply()``.
"""

from __future__ import annotations

import secrets
import select
import socket
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from agent import wire


class AgentError(RuntimeError):
    """The agent answered a request with an error frame."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has data (or EOF) within ``timeout`` seconds.

    poll(), not select(): select() cannot watch a descriptor numbered 1024 or
    above, which a controller of several hundred agents reaches (found by
    benchmarks/control_scale.py at 1,024 nodes).
    """
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLPRI)
    return bool(p.poll(timeout * 1000.0))


class AgentClient:
    def __init__(
        self,
        address: tuple[str, int],
        key: bytes,
        *,
        sender: str = "controller",
        timeout: float = 5.0,
    ) -> None:
        self.address = address
        self.key = key
        self.sender = sender
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.session = wire.Session(key, sender)
        self.decoder = wire.FrameDecoder(key)
        self.events: deque[wire.Message] = deque()
        self._replies: dict[int, wire.Message] = {}
        self.hello: dict[str, Any] = {}

    # ---- connection ------------------------------------------------------
    def connect(self) -> dict[str, Any]:
        """Connect and authenticate; returns the agent's hello data."""
        self.sock = socket.create_connection(self.address, timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.session = wire.Session(self.key, self.sender)
        self.decoder = wire.FrameDecoder(self.key)
        nonce = secrets.token_hex(16)
        seq = self.send(wire.HELLO, {"nonce": nonce})
        try:
            reply = self._wait(seq, self.timeout, opening=True)
        except wire.PeerRefused as e:  # refused before we authenticated (wrong key, ...)
            raise AgentError(e.code, e.reason) from None
        if reply.type == wire.ERROR:
            raise AgentError(str(reply.data.get("code")), str(reply.data.get("reason")))
        if reply.type != wire.HELLO or reply.data.get("nonce") != nonce:
            raise wire.Replayed("hello reply does not echo our nonce")
        self.session.conn = reply.conn
        self.hello = reply.data
        return reply.data

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> AgentClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fileno(self) -> int:
        assert self.sock is not None
        return self.sock.fileno()

    # ---- raw ---------------------------------------------------------------
    def send(self, mtype: str, data: dict[str, Any] | None = None) -> int:
        """Send one request; returns its seq for wait_reply()."""
        if self.sock is None:
            raise ConnectionError("not connected")
        seq, frame = self.session.make(mtype, data)
        self.sock.sendall(frame)
        return seq

    def send_raw(self, frame: bytes) -> None:
        """Send pre-encoded bytes (tests of forged/replayed frames)."""
        if self.sock is None:
            raise ConnectionError("not connected")
        self.sock.sendall(frame)

    def wait_reply(self, seq: int, timeout: float | None = None) -> wire.Message:
        """Wait for the reply to ``seq``; raises AgentError on an error reply."""
        reply = self._wait(seq, self.timeout if timeout is None else timeout)
        if reply.type == wire.ERROR:
            raise AgentError(str(reply.data.get("code")), str(reply.data.get("reason")))
        return reply

    def request(
        self, mtype: str, data: dict[str, Any] | None = None, timeout: float | None = None
    ) -> wire.Message:
        return self.wait_reply(self.send(mtype, data), timeout)

    def poll(self, timeout: float = 0.0) -> None:
        """Read whatever has arrived (events, replies) within timeout."""
        self._read_some(time.monotonic() + timeout, opening=False)

    def _wait(self, seq: int, timeout: float, opening: bool = False) -> wire.Message:
        deadline = time.monotonic() + timeout
        while seq not in self._replies:
            if not self._read_some(deadline, opening):
                raise TimeoutError(f"no reply to request {seq} within {timeout}s")
        return self._replies.pop(seq)

    def _read_some(self, deadline: float, opening: bool) -> bool:
        """Read once; False on timeout. Raises ConnectionError on EOF."""
        assert self.sock is not None
        if not readable(self.sock, max(0.0, deadline - time.monotonic())):
            return False
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("agent closed the connection")
        for msg in self.decoder.feed(data):
            if opening and msg.type in (wire.HELLO, wire.ERROR) and not self.session.conn:
                # The hello reply carries the new connection nonce: adopt, then check.
                self.session.conn = msg.conn
            self.session.check(msg)
            if msg.type == wire.JOB_EVENT:
                self.events.append(msg)
            elif msg.re is not None:
                self._replies[msg.re] = msg
            elif msg.type == wire.ERROR:
                raise AgentError(str(msg.data.get("code")), str(msg.data.get("reason")))
        return True

    # ---- commands ----------------------------------------------------------
    def heartbeat(self, timeout: float | None = None) -> dict[str, Any]:
        return self.request(wire.HEARTBEAT, {}, timeout).data

    def status(self, node: str | None = None) -> dict[str, Any]:
        return self.request(wire.STATUS, {"node": node} if node else {}).data

    def launch(
        self,
        node: str,
        job_id: str,
        argv: list[str],
        *,
        ranks: list[int] | None = None,
        env: dict[str, str] | None = None,
        weight: int = 100,
        start_frozen: bool = True,
        cwd: str | None = None,
        size: int | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node": node,
            "job_id": job_id,
            "argv": argv,
            "ranks": ranks or [0],
            "env": env or {},
            "weight": weight,
            "start_frozen": start_frozen,
        }
        if cwd is not None:
            data["cwd"] = cwd
        if size is not None:
            data["size"] = size
        if user is not None:
            data["user"] = user  # who the ranks run as (agent/runas.py)
        return self.request(wire.LAUNCH, data).data

    def quantum_message(
        self,
        node: str,
        q: int,
        jobs: dict[str, int],
        start: float | None = None,
        at: float | None = None,
        measure: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The quantum request; ``at`` (CLOCK_REALTIME s) makes it time-triggered;
        ``measure`` names the I/O devices whose bytes the ack should carry (None: the
        agent reads them all, as for a controller that predates the key)."""
        data: dict[str, Any] = {
            "q": q,
            "node": node,
            "jobs": jobs,
            "start": time.time() if start is None else start,
        }
        if at is not None:
            data["at"] = at
        if measure is not None:
            data["measure"] = sorted(measure)
        return data

    def quantum(
        self,
        node: str,
        q: int,
        jobs: dict[str, int],
        start: float | None = None,
        at: float | None = None,
    ) -> dict[str, Any]:
        """Apply a quantum (at ``at``, if given); returns the ack data (cpu_ns per job, ...)."""
        wait = self.timeout + (max(0.0, at - time.time()) if at is not None else 0.0)
        msg = self.quantum_message(node, q, jobs, start, at)
        return self.request(wire.QUANTUM, msg, wait).data

    def kill(self, node: str, job_id: str) -> dict[str, Any]:
        return self.request(wire.KILL, {"node": node, "job_id": job_id}).data
