"""Client of the controller API (docs/controller-api.md), used by the CLI and tests.

    c = ControllerClient()                       # <run dir>/controller.sock
    c = ControllerClient(tcp=("10.0.0.254", 7000), key=key, user="alice")
    job_id = c.request("submit", spec={"size": 2, "argv": ["./prog"]})["job_id"]

Gorda & Brooks 1991 §3.1: "If that socket is busy or unattached, the application
retries." Connection refused/reset/missing socket and ``busy:`` errors are
retried for ``retry`` seconds, so a controller restarting from its
checkpoint loses no request. Any other error reply raises ControllerError.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from agent import wire
from agent.client import AgentClient, AgentError

DEFAULT_RUN_DIR = "/run/cosched"
REQUEST = "request"


class ControllerError(RuntimeError):
    """The controller refused the request; str() is its one-line reason."""


class ControllerUnavailable(ControllerError):
    """No controller answered within the retry period."""


_RETRYABLE = (
    ConnectionRefusedError,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    FileNotFoundError,
    ConnectionError,
    TimeoutError,
    # a unix socket whose accept backlog is full (a flood of connects) answers a connect
    # with a timeout set by EAGAIN at once; it is a busy controller, so try again
    BlockingIOError,
)


def default_socket() -> str:
    return os.path.join(os.environ.get("COSCHED_RUN_DIR", DEFAULT_RUN_DIR), "controller.sock")


class ControllerClient:
    def __init__(
        self,
        socket_path: str | None = None,
        *,
        tcp: tuple[str, int] | None = None,
        key: bytes | None = None,
        user: str | None = None,
        retry: float = 30.0,
        timeout: float = 10.0,
    ) -> None:
        if tcp is not None and key is None:
            raise ValueError("TCP needs the cluster key")
        self.socket_path = socket_path or default_socket()
        self.tcp = tcp
        self.key = key
        self.user = user or os.environ.get("USER") or "root"
        self.retry = retry
        self.timeout = timeout
        self._unix: socket.socket | None = None
        self._rbuf = b""
        self._agent: AgentClient | None = None

    def close(self) -> None:
        if self._unix is not None:
            self._unix.close()
            self._unix = None
        if self._agent is not None:
            self._agent.close()
            self._agent = None

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, op: str, **args: Any) -> Any:
        """Send one request; returns ``result`` or raises ControllerError."""
        deadline = time.monotonic() + self.retry
        delay = 0.05
        last: object = None
        while True:
            try:
                reply = self._once(op, args)
            except _RETRYABLE as e:
                self.close()
                last = e
            except (wire.WireError, AgentError) as e:
                self.close()
                raise ControllerError(f"refused by the controller: {e}") from None
            else:
                if reply.get("ok"):
                    return reply.get("result")
                err = str(reply.get("error", "unknown error"))
                if not err.startswith("busy"):
                    raise ControllerError(err)
                last = err
            if time.monotonic() + delay > deadline:
                raise ControllerUnavailable(
                    f"controller not answering after {self.retry:.0f}s: {last}"
                )
            time.sleep(delay)
            delay = min(1.0, delay * 2)

    def _once(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        if self.tcp is not None:
            return self._once_tcp(op, args)
        if self._unix is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(self.socket_path)
            except OSError:
                s.close()
                raise
            self._unix = s
            self._rbuf = b""
        line = json.dumps({"op": op, "args": args}, separators=(",", ":")).encode() + b"\n"
        self._unix.sendall(line)
        while b"\n" not in self._rbuf:
            chunk = self._unix.recv(1 << 16)
            if not chunk:
                raise ConnectionResetError("controller closed the connection")
            self._rbuf += chunk
        raw, _, self._rbuf = self._rbuf.partition(b"\n")
        reply = json.loads(raw)
        if not isinstance(reply, dict):
            raise ControllerError("malformed reply")
        return reply

    def _once_tcp(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        assert self.tcp is not None and self.key is not None
        if self._agent is None:
            c = AgentClient(self.tcp, self.key, sender=f"client:{self.user}", timeout=self.timeout)
            try:
                c.connect()
            except BaseException:
                c.close()
                raise
            self._agent = c
        msg = self._agent.request(
            REQUEST, {"op": op, "args": args, "user": self.user}, self.timeout
        )
        return msg.data
