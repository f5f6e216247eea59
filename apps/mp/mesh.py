"""Start-up: the full mesh of TCP connections between a job's ranks (docs/cdc.md).

Rank *r* listens on ``peers[r]`` at ``port`` + the number of lower ranks with
the same address (ranks sharing one host get consecutive ports), connects to
every lower rank -- retrying refused connects until the connect timeout, as
ranks start in any order -- and accepts every higher one. The first frame on
each connection is a HELLO from both sides (rank, job size, job id and a
fresh nonce); then each side proves it holds the job's secret (the connecting
rank first; apps/mp/auth.py). A connection that cannot prove it is dropped
and the wait goes on, so another job on the node cannot pose as a rank or
make the job fail (issue 28); a size or job mismatch between ranks that both
proved themselves fails both with the reason. The highest rank accepts
nobody and does not listen. Yu & Byun's cluster had GM ports opened at start
the same way (§4.1).
"""

from __future__ import annotations

import errno
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent import nicproto
from apps.mp import auth, frame
from apps.mp.errors import MPError

RETRY_S = 0.05  # between connect attempts to a rank that is not listening yet
HELLO_SIZE_LIMIT = 256  # bytes of job id in a HELLO
HANDSHAKE_S = 5.0  # one accepted connection's whole handshake, at most


class HandshakeRefused(MPError):
    """The peer is of another job or job size: waiting longer cannot help."""


@dataclass(frozen=True)
class Link:
    """One established connection (blocking, TCP_NODELAY set)."""

    peer: int
    addr: str
    sock: socket.socket


def port_of(peers: Sequence[str], port: int, rank: int) -> int:
    """Ranks sharing an address (one host) listen on consecutive ports (the agent checks
    a registered socket's ports with the same rule: agent/nicproto.py)."""
    return nicproto.mesh_port(peers, port, rank)


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
    """The parameters both ends of every connection must agree on; ``secret`` is the
    job's (apps/mp/auth.py)."""

    rank: int
    size: int
    peers: Sequence[str]
    port: int
    job: str
    timeout: float
    secret: bytes = b""

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

    def _hello(self, nonce: bytes) -> bytes:
        job = self.job.encode()[:HELLO_SIZE_LIMIT]
        return (
            frame.pack(frame.HELLO, self.rank, self.size, len(job) + auth.NONCE_SIZE,
                       time.time_ns(), 0)
            + job + nonce
        )  # fmt: skip

    def _read_hello(self, sock: socket.socket, who: str) -> tuple[int, int, str, bytes]:
        """(rank, size, job, nonce) the peer claims."""
        h = frame.unpack(_recv_exact(sock, frame.HEADER_SIZE, who), 0, who)
        if h.kind != frame.HELLO:
            raise MPError(f"bad frame from {who}: kind {h.kind}, expected HELLO ({frame.HELLO})")
        if not auth.NONCE_SIZE <= h.size <= HELLO_SIZE_LIMIT + auth.NONCE_SIZE:
            raise MPError(f"bad frame from {who}: HELLO size {h.size}")
        payload = _recv_exact(sock, h.size, who)
        job, nonce = payload[: -auth.NONCE_SIZE], payload[-auth.NONCE_SIZE :]
        return h.src, h.tag, job.decode(errors="replace"), nonce

    def _proof(self, role: str, src: int, dst: int, size: int, job: str,
               n_conn: bytes, n_acc: bytes) -> bytes:  # fmt: skip
        return auth.proof(self.secret, f"cosched-mesh-{role}", job, src, dst, size, n_conn, n_acc)

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
            mine = auth.new_nonce()
            s.sendall(self._hello(mine))
            src, size, job, theirs = self._read_hello(s, who)
            if src != j:
                raise MPError(f"{who} answered as rank {src}")
            s.sendall(self._proof("connect", self.rank, j, self.size, self.job, mine, theirs))
            got = _recv_exact(s, auth.PROOF_SIZE, who)
            if not auth.valid(self._proof("accept", j, self.rank, size, job, mine, theirs), got):
                raise MPError(f"{who} cannot prove it belongs to this job (wrong secret)")
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
            # a silent stray connection holds the wait up for a few seconds at most
            s.settimeout(max(0.1, min(HANDSHAKE_S, deadline - time.monotonic())))
            who = f"a connection from {addr}"
            try:
                src, size, job, theirs = self._read_hello(s, who)
                who = f"rank {src} at {addr}"
                if src not in missing:
                    raise MPError(f"{who}: unexpected (duplicate rank or out of range)")
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                mine = auth.new_nonce()
                s.sendall(self._hello(mine))  # first, so a mismatched peer learns why too
                got = _recv_exact(s, auth.PROOF_SIZE, who)
                if not auth.valid(self._proof("connect", src, self.rank, size, job, theirs,
                                              mine), got):  # fmt: skip
                    print(f"mp: rank {self.rank}: refused {who}: it cannot prove it belongs "
                          "to this job", file=sys.stderr, flush=True)  # fmt: skip
                    raise MPError(f"{who}: wrong secret")
                s.sendall(self._proof("accept", self.rank, src, self.size, self.job, theirs, mine))
                self._check_hello(size, job, who)
            except HandshakeRefused:
                s.close()
                for link in links:
                    link.sock.close()
                raise
            except (MPError, OSError):
                s.close()
                continue  # a stray, broken or impostor connection: keep waiting for the real one
            s.settimeout(None)
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
