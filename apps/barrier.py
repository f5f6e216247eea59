"""Barrier through rank 0 over TCP, as in the test program of seed 000 §4.1.1.

"The barrier is implemented by all processes sending a message to process 0
and waiting for a reply. Process 0 sends the reply only after it receives a
message from every other process in the job." (seed 000 §4.1.1)

Protocol (one ASCII line per message, ``\\n`` terminated):

* on connect, rank *r* > 0 sends ``hello <rank> <size>``; rank 0 answers
  ``welcome`` or ``error <reason>`` (duplicate rank, size mismatch, ...);
* each barrier *k* (0, 1, 2, ...): every rank > 0 sends ``arrive <k>``; rank 0
  arrives through a local call (no socket), reads ``arrive <k>`` from every
  peer, then sends ``release <k> <stop>`` to all, where ``<stop>`` is ``1``
  when rank 0 asked the job to stop after this barrier (the ``--duration``
  stop condition: all ranks agree because the decision travels with the
  release), else ``0``.

Rank 0 is single-threaded on purpose: it only ever waits for arrivals after
it has arrived itself, so reading the peers one after the other costs nothing
and avoids a server thread that would itself consume CPU under gang
scheduling. Ranks may start in any order: rank 0 listens before anything
else and accepts peers for up to ``connect_timeout`` seconds; peers retry a
refused connection for the same bounded time. Waiting *inside* a barrier has
no timeout by default, because a gang-scheduled job can legitimately stay
frozen for many quanta; a peer that dies shows up as end-of-file, which is
reported as a :class:`BarrierError` naming the rank.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import BinaryIO

DEFAULT_CONNECT_TIMEOUT = 60.0
_RETRY_INTERVAL = 0.05
_MAX_LINE = 256


class BarrierError(RuntimeError):
    """The barrier cannot proceed: a peer is missing, died, or broke the protocol."""


@dataclass
class _Peer:
    rank: int
    sock: socket.socket
    reader: BinaryIO


def _readline(reader: BinaryIO, who: str) -> str:
    try:
        raw = reader.readline(_MAX_LINE)
    except OSError as exc:
        raise BarrierError(f"{who}: connection lost ({exc})") from exc
    if not raw:
        raise BarrierError(f"{who}: connection closed (did the process exit or crash?)")
    if not raw.endswith(b"\n"):
        raise BarrierError(f"{who}: protocol error, line too long or truncated: {raw[:40]!r}")
    return raw.decode("ascii", "replace").strip()


def _send(sock: socket.socket, line: str, who: str) -> None:
    try:
        sock.sendall((line + "\n").encode("ascii"))
    except OSError as exc:
        raise BarrierError(f"{who}: cannot send {line.split()[0]!r} ({exc})") from exc


@dataclass
class Barrier:
    """One rank's end of the job-wide barrier.

    Use as a context manager, or call :meth:`open` then :meth:`close`.
    ``addr`` is rank 0's address (peers connect to it; rank 0 binds to it,
    ``""`` meaning every interface). ``port`` 0 lets rank 0 pick a free port,
    readable from :attr:`port` after :meth:`listen` (tests use this).
    """

    rank: int
    size: int
    addr: str = "127.0.0.1"
    port: int = 0
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    wait_timeout: float | None = None
    bind_addr: str = ""
    count: int = 0
    _listener: socket.socket | None = field(default=None, repr=False)
    _peers: list[_Peer] = field(default_factory=list, repr=False)
    _sock: socket.socket | None = field(default=None, repr=False)
    _reader: BinaryIO | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise BarrierError(f"job size must be at least 1, got {self.size}")
        if not 0 <= self.rank < self.size:
            raise BarrierError(f"rank {self.rank} is outside 0..{self.size - 1}")
        if self.size > 1 and self.rank > 0 and not self.port:
            raise BarrierError("a rank other than 0 needs rank 0's port (COSCHED_PORT)")

    # -- setup -------------------------------------------------------------

    def listen(self) -> None:
        """Rank 0 only: bind and listen now, so early peers are not refused for long."""
        if self.rank != 0 or self.size == 1 or self._listener is not None:
            return
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lst.bind((self.bind_addr, self.port))
        except OSError as exc:
            lst.close()
            where = f"{self.bind_addr or '0.0.0.0'}:{self.port}"
            raise BarrierError(
                f"rank 0 cannot listen on {where} ({exc}); is another job using the port?"
            ) from exc
        lst.listen(self.size)
        self.port = lst.getsockname()[1]
        self._listener = lst

    def open(self) -> Barrier:
        """Connect the job: rank 0 accepts every peer, peers connect to rank 0."""
        if self.size == 1:
            return self
        if self.rank == 0:
            self.listen()
            self._accept_all()
        else:
            self._connect()
        return self

    def _accept_all(self) -> None:
        assert self._listener is not None
        deadline = time.monotonic() + self.connect_timeout
        seen: dict[int, _Peer] = {}
        while len(seen) < self.size - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, self.size)) - set(seen))
                raise BarrierError(
                    f"rank 0: ranks {missing} did not connect within {self.connect_timeout:g} s"
                )
            self._listener.settimeout(left)
            try:
                conn, peer_addr = self._listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(left)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = conn.makefile("rb")
            who = f"rank 0: peer {peer_addr[0]}:{peer_addr[1]}"
            try:
                words = _readline(reader, who).split()
                reason = self._check_hello(words, seen)
            except BarrierError:
                reader.close()
                conn.close()
                continue  # a stray connection (port scan, wrong job) is not fatal
            if reason:
                _send(conn, f"error {reason}", who)
                reader.close()
                conn.close()
                continue
            _send(conn, "welcome", who)
            conn.settimeout(self.wait_timeout)
            seen[int(words[1])] = _Peer(int(words[1]), conn, reader)
        self._peers = [seen[r] for r in sorted(seen)]
        self._listener.close()
        self._listener = None

    def _check_hello(self, words: list[str], seen: dict[int, _Peer]) -> str:
        if len(words) != 3 or words[0] != "hello" or not all(w.isdigit() for w in words[1:]):
            return "expected 'hello <rank> <size>'"
        rank, size = int(words[1]), int(words[2])
        if size != self.size:
            return f"size mismatch: rank 0 has size {self.size}, rank {rank} says {size}"
        if not 1 <= rank < self.size:
            return f"rank {rank} is outside 1..{self.size - 1}"
        if rank in seen:
            return f"rank {rank} is already connected"
        return ""

    def _connect(self) -> None:
        deadline = time.monotonic() + self.connect_timeout
        who = f"rank {self.rank}"
        last: OSError | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BarrierError(
                    f"{who}: cannot reach rank 0 at {self.addr}:{self.port} within "
                    f"{self.connect_timeout:g} s ({last}); is rank 0 running?"
                )
            try:
                sock = socket.create_connection((self.addr, self.port), timeout=min(left, 5.0))
            except socket.gaierror as exc:
                raise BarrierError(f"{who}: bad rank 0 address {self.addr!r} ({exc})") from exc
            except OSError as exc:
                # Rank 0 may simply not have started yet: retry until the deadline.
                last = exc
                time.sleep(min(_RETRY_INTERVAL, max(left, 0.0)))
                continue
            break
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(max(deadline - time.monotonic(), 1.0))
        reader = sock.makefile("rb")
        _send(sock, f"hello {self.rank} {self.size}", who)
        reply = _readline(reader, f"{who}: waiting for rank 0's welcome")
        if reply != "welcome":
            sock.close()
            raise BarrierError(f"{who}: rank 0 refused: {reply.removeprefix('error ')}")
        sock.settimeout(self.wait_timeout)
        self._sock, self._reader = sock, reader

    # -- the barrier -------------------------------------------------------

    def wait(self, stop: bool = False) -> bool:
        """Arrive at the next barrier and block until every rank has arrived.

        ``stop`` is only heeded on rank 0: it asks every rank to stop after
        this barrier. Returns the job-wide stop decision carried by the release.
        """
        k = self.count
        if self.size == 1:
            decided = stop
        elif self.rank == 0:
            decided = self._wait_root(k, stop)
        else:
            decided = self._wait_peer(k)
        self.count = k + 1
        return decided

    def _wait_root(self, k: int, stop: bool) -> bool:
        for peer in self._peers:
            line = _readline(peer.reader, f"rank 0: barrier {k}: rank {peer.rank}")
            if line != f"arrive {k}":
                raise BarrierError(
                    f"rank 0: barrier {k}: rank {peer.rank} sent {line!r}, expected 'arrive {k}'"
                )
        release = f"release {k} {int(stop)}"
        for peer in self._peers:
            _send(peer.sock, release, f"rank 0: barrier {k}: rank {peer.rank}")
        return stop

    def _wait_peer(self, k: int) -> bool:
        assert self._sock is not None and self._reader is not None, "open() first"
        who = f"rank {self.rank}: barrier {k}"
        _send(self._sock, f"arrive {k}", who)
        line = _readline(self._reader, f"{who}: waiting for rank 0")
        words = line.split()
        if len(words) != 3 or words[:2] != ["release", str(k)] or words[2] not in ("0", "1"):
            raise BarrierError(f"{who}: rank 0 sent {line!r}, expected 'release {k} 0|1'")
        return words[2] == "1"

    # -- teardown ----------------------------------------------------------

    def close(self) -> None:
        """Close every socket; safe to call twice."""
        for peer in self._peers:
            peer.reader.close()
            peer.sock.close()
        self._peers = []
        if self._reader is not None:
            self._reader.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> Barrier:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
