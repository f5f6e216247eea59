"""Start-up: the full mesh of TCP connections between a job's ranks (docs/cdc.md).

Rank *r* listens on ``peers[r]`` at ``port`` + the number of lower ranks with
the same address (ranks sharing one host get consecutive ports), connects to
every lower rank -- retrying refused connects until the connect timeout, as
ranks start in any order -- and accepts every higher one. The first frame on
each connection is a HELLO from both sides (rank, job size, job id); a size
or job mismatch fails both ranks with the reason, a stray connection is
dropped and the wait goes on. The highest rank accepts nobody and does not
listen. Yu & Byun's cluster had GM ports opened at start the same way (§4.1).
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

from apps.mp import frame
from apps.mp.errors import MPError

RETRY_S = 0.05  # between connect attempts to a rank that is not listening yet
HELLO_SIZE_LIMIT = 256  # bytes of job id in a HELLO


class HandshakeRefused(MPError):
    """The peer is of another job or job size: waiting longer cannot help."""


@dataclass(frozen=True)
class Link:
    """One established connection (blocking, TCP_NODELAY set)."""

    peer: int
    addr: str
    sock: socket.socket


def port_of(peers: Sequence[str], port: int, rank: int) -> int:
    """Ranks sharing an address (one host) listen on consecutive ports."""
    return port + sum(1 for j in range(rank) if peers[j] == peers[rank])


def listen(rank: int, peers: Sequence[str], port: int, backlog: int) -> socket.socket:
    """Rank ``rank``'s bound, listening socket."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    addr, p = peers[rank], port_of(peers, port, rank)
    try:
        lst.bind((addr, p))
    except OSError as e:
        lst.close()
        raise MPError(f"rank {rank}: cannot listen on {addr}:{p} ({e})") from None
    lst.listen(max(8, backlog))
    return lst


def is_self_connected(sock: socket.socket) -> bool:
    """True when a connected socket's source and destination are one address and port."""
    try:
        return bool(sock.getsockname() == sock.getpeername())
    except OSError:
        return False


def connect_once(addr: tuple[str, int], timeout: float) -> socket.socket:
    """One connect to a peer that may not listen yet; callers retry on OSError.

    Linux's TCP simultaneous open: a connect to an unbound port of the
    ephemeral range can pick that very port as its source and connect to
    itself, holding the port the peer wants to listen on. Such a connection
    is closed and reported as refused.
    """
    s = socket.create_connection(addr, timeout=timeout)
    if is_self_connected(s):
        s.close()
        raise ConnectionRefusedError(errno.ECONNREFUSED, "connected to itself")
    return s


@dataclass
class Handshake:
    """The parameters both ends of every connection must agree on."""

    rank: int
    size: int
    peers: Sequence[str]
    port: int
    job: str
    timeout: float

    def connect_all(self, lst: socket.socket | None) -> list[Link]:
        """Connections to every other rank; closes them all and raises MPError on failure."""
        deadline = time.monotonic() + self.timeout
        links: list[Link] = []
        try:
            for j in range(self.rank):
                links.append(self._connect(j, deadline))
            if lst is not None:
                links += self._accept_all(lst, deadline)
        except BaseException:
            for link in links:
                link.sock.close()
            raise
        return links

    def _hello(self) -> bytes:
        job = self.job.encode()[:HELLO_SIZE_LIMIT]
        return frame.pack(frame.HELLO, self.rank, self.size, len(job), time.time_ns(), 0) + job

    def _read_hello(self, sock: socket.socket, who: str) -> tuple[int, int, str]:
        h = frame.unpack(_recv_exact(sock, frame.HEADER_SIZE, who), 0, who)
        if h.kind != frame.HELLO:
            raise MPError(f"bad frame from {who}: kind {h.kind}, expected HELLO ({frame.HELLO})")
        if h.size > HELLO_SIZE_LIMIT:
            raise MPError(f"bad frame from {who}: HELLO size {h.size} > {HELLO_SIZE_LIMIT}")
        job = _recv_exact(sock, h.size, who).decode(errors="replace")
        return h.src, h.tag, job

    def _check_hello(self, size: int, job: str, who: str) -> None:
        if size != self.size:
            raise HandshakeRefused(
                f"rank {self.rank}: {who}: job size mismatch (it has {size}, this rank {self.size})"
            )
        if job != self.job:
            raise HandshakeRefused(
                f"rank {self.rank}: {who}: belongs to job {job!r}, not {self.job!r}"
            )

    def _connect(self, j: int, deadline: float) -> Link:
        addr, port = self.peers[j], port_of(self.peers, self.port, j)
        who = f"rank {j} at {addr}:{port}"
        while True:
            try:
                s = connect_once((addr, port), max(0.1, deadline - time.monotonic()))
                break
            except OSError as e:
                if time.monotonic() + RETRY_S > deadline:
                    raise MPError(
                        f"rank {self.rank}: cannot reach {who} within "
                        f"{self.timeout:g} s ({e}); is rank {j} running?"
                    ) from None
                time.sleep(RETRY_S)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(self._hello())
            src, size, job = self._read_hello(s, who)
            if src != j:
                raise MPError(f"{who} answered as rank {src}")
            self._check_hello(size, job, who)
        except HandshakeRefused:
            s.close()
            raise
        except (OSError, MPError) as e:
            s.close()
            raise MPError(f"rank {self.rank}: handshake with {who} failed ({e})") from None
        return Link(j, addr, s)

    def _accept_all(self, lst: socket.socket, deadline: float) -> list[Link]:
        missing = set(range(self.rank + 1, self.size))
        links: list[Link] = []
        while missing:
            left = deadline - time.monotonic()
            if left <= 0:
                for link in links:
                    link.sock.close()
                raise MPError(
                    f"rank {self.rank}: ranks {sorted(missing)} did not connect within "
                    f"{self.timeout:g} s"
                )
            lst.settimeout(left)
            try:
                s, (addr, _port) = lst.accept()
            except TimeoutError:
                continue
            s.settimeout(max(0.1, deadline - time.monotonic()))
            who = f"a connection from {addr}"
            try:
                src, size, job = self._read_hello(s, who)
                who = f"rank {src} at {addr}"
                if src not in missing:
                    raise MPError(f"{who}: unexpected (duplicate rank or out of range)")
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(self._hello())  # first, so a mismatched peer learns why too
                self._check_hello(size, job, who)
            except HandshakeRefused:
                s.close()
                for link in links:
                    link.sock.close()
                raise
            except (MPError, OSError):
                s.close()
                continue  # a stray or broken connection: keep waiting for the real one
            missing.discard(src)
            links.append(Link(src, addr, s))
        return links


def _recv_exact(sock: socket.socket, n: int, who: str) -> bytes:
    out = bytearray()
    while len(out) < n:
        try:
            chunk = sock.recv(n - len(out))
        except TimeoutError:
            raise MPError(f"{who}: timed out during the handshake") from None
        except OSError as e:
            if e.errno in (errno.ECONNRESET, errno.EPIPE):
                raise MPError(f"{who}: connection reset during the handshake") from None
            raise
        if not chunk:
            raise MPError(f"{who}: connection closed during the handshake")
        out += chunk
    return bytes(out)
