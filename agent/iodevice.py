"""A node's I/O device: one queue that every job on the node shares (Wiseman & Feitelson
2003 §3.1: "each node is an independent PC with its own processor, memory, and disk").

Before this, every rank of the synthetic program slept its own device latency, so two
I/O-bound jobs on one node never waited for each other and §4.1.2's disk contention
("these jobs interfere with each other when writing to the disk") could not appear.
Here the agent keeps the node's disk: a Unix socket in its run directory
(``COSCHED_IODEV`` in every rank's environment) and one worker that serves requests
one at a time, first come first served. A request names its service time (the
program's ``--device-latency``: how long the write occupies the disk); the client
blocks in ``recv`` without using the CPU until its request has been served, as a
process waiting for a disk does.

The service goes on while the requester is frozen (a disk finishes a write whatever
the scheduler does with the process that issued it); the answer waits in the socket.

Protocol: the client sends ``"<seconds>\\n"``; the device answers
``"ok <queued_s> <served_s>\\n"`` once served (``queued_s``: time spent waiting behind
other requests), or ``"error <why>\\n"`` and closes the connection. Limits keep the
agent safe from what a job sends: at most :data:`MAX_SERVICE` seconds per request,
:data:`MAX_LINE` bytes per line, :data:`MAX_CLIENTS` connections.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common.serverstop import stop_server

log = logging.getLogger(__name__)

ENV = "COSCHED_IODEV"
SOCKET_NAME = "iodev.sock"
MAX_SERVICE = 1.0  # seconds per request
MAX_LINE = 64
MAX_CLIENTS = 256


@dataclass
class _Request:
    seconds: float
    queued_at: float
    done: threading.Event
    waited: float = 0.0


@dataclass
class DeviceStats:
    """What the device served, for the agent's status and the tests."""

    requests: int = 0
    busy_seconds: float = 0.0
    queued_seconds: float = 0.0
    max_queue: int = 0


class IoDevice:
    """The node's disk: a FIFO of requests served by one worker (module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = path
        self.clock = clock
        self.sleep = sleep
        self.stats = DeviceStats()
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._server: _Server | None = None
        self._threads: list[threading.Thread] = []
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)

    # ---- the device ------------------------------------------------------------------
    def submit(self, seconds: float) -> float:
        """Queue one request and wait until it has been served; returns the time it
        waited behind others."""
        req = _Request(seconds, self.clock(), threading.Event())
        self._queue.put(req)
        self.stats.max_queue = max(self.stats.max_queue, self._queue.qsize())
        req.done.wait()
        return req.waited

    def _work(self) -> None:
        while True:
            req = self._queue.get()
            if req is None:
                return
            began = self.clock()
            req.waited = began - req.queued_at
            if req.seconds > 0:
                self.sleep(req.seconds)
            self.stats.requests += 1
            self.stats.busy_seconds += self.clock() - began
            self.stats.queued_seconds += req.waited
            req.done.set()

    # ---- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Bind the socket (any user on the node may use the disk) and start serving."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise OSError(f"{self.path} exists and is not a socket: remove it")
            os.unlink(self.path)
        server = _Server(str(self.path), _Handler, device=self)
        # Jobs run as their submitters (agent/runas.py); the disk is the node's, not one
        # user's, so the socket is open to all (what it does is bounded, above).
        os.chmod(self.path, 0o666)
        self._server = server
        worker = threading.Thread(target=self._work, name="iodev-worker", daemon=True)
        accept = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="iodev", daemon=True
        )
        self._threads = [worker, accept]
        for t in self._threads:
            t.start()
        log.info("I/O device at %s", self.path)

    def close(self) -> None:
        if self._server is not None:
            stop_server(self._server)
            self._server = None
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self._queue.put(None)
        for t in self._threads:
            t.join(timeout=MAX_SERVICE + 1.0)
        self._threads = []


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: str, handler: type[_Handler], *, device: IoDevice) -> None:
        self.device = device
        super().__init__(address, handler)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        device = self.server.device
        if not device._clients.acquire(blocking=False):
            self._reply(f"error more than {MAX_CLIENTS} clients")
            return
        try:
            while True:
                line = self.rfile.readline(MAX_LINE + 1)
                if not line:
                    return
                seconds = _parse(line)
                if seconds is None:
                    self._reply(
                        f"error want one number of seconds in [0, {MAX_SERVICE:g}] per line"
                    )
                    return
                waited = device.submit(seconds)
                self._reply(f"ok {waited:.6f} {seconds:.6f}")
        except OSError:
            return  # the client went away: nothing to answer
        finally:
            device._clients.release()

    def _reply(self, text: str) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write(text.encode() + b"\n")


def _parse(line: bytes) -> float | None:
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        return None
    try:
        value = float(line.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None
    if not math.isfinite(value) or not 0.0 <= value <= MAX_SERVICE:
        return None
    return value


class DeviceClient:
    """A rank's connection to its node's device (apps/synthetic.py ``--device node``)."""

    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self._buf = b""
        self.waited = 0.0  # seconds spent queued behind other requests, in all

    def request(self, seconds: float) -> float:
        """One device operation of ``seconds``; blocks until served, returns the queue wait."""
        self.sock.sendall(f"{seconds:.6f}\n".encode())
        while b"\n" not in self._buf:
            chunk = self.sock.recv(128)
            if not chunk:
                raise OSError("the node's I/O device closed the connection")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        parts = line.decode("ascii", "replace").split()
        if not parts or parts[0] != "ok" or len(parts) != 3:
            text = line.decode(errors="replace")
            raise OSError(f"the node's I/O device refused the request: {text}")
        waited = float(parts[1])
        self.waited += waited
        return waited

    def close(self) -> None:
        self.sock.close()
