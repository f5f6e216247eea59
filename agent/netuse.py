"""A job's network bytes, from the kernel: the network part of its demand for N + 1 gangs
(issue 31; controller/policies/devices.py).

Which sockets are the job's: those its processes hold, found from the job's cgroup (its
pids, the kernel's list) and each pid's ``/proc/PID/fd`` links (``socket:[INODE]``). What
they moved: the agent (root) takes a duplicate of each such descriptor (pidfd_getfd,
Linux >= 5.6), reads the kernel's ``tcp_info`` of it (``tcpi_bytes_acked``: bytes sent
and acknowledged; ``tcpi_bytes_received``) and closes the duplicate at once, so the job's
socket closes when the job closes it. Nothing the job says is believed: not the message
library's own counters (the shared page it writes, agent/nicproto.py), nor its
environment.

Measured here (one job, 8 TCP sockets): a sock_diag dump of a fresh namespace through
pyroute2 cost 2.0 ms of CPU per ack (its netlink layer runs an asyncio loop per request),
this way 0.13 ms (the commit that made the change has the figures and the command).

Choices: TCP over IPv4 and IPv6 only (the message library's mesh and MPI's TCP
transport); a socket's bytes count from when it is first seen, and a socket closed
between two acks loses what it moved since the last one (the mesh's sockets live as
long as the job). Bytes over the node's loopback count too; a job's ranks are one per
node in the testbed's gangs, so they have none.

:class:`NetMeter` is the per-job bookkeeping, pure given the two readers it is handed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

SYS_PIDFD_GETFD = 438  # the same number on every architecture (asm-generic)
_TCP_INFO_BYTES_ACKED = 120  # offsets in struct tcp_info (u64s), Linux >= 4.1
_TCP_INFO_LEN = 136
_U64X2 = struct.Struct("<QQ")
_libc = ctypes.CDLL(None, use_errno=True)

#: a socket the job holds: (pid, fd) in that process
Where = tuple[int, int]
# Bounds on what one ack reads of a job, so that a job holding huge numbers of
# descriptors slows its own figure, not the agent's loop: the first MAX_FDS entries of
# each process, MAX_SOCKETS sockets in all (the message library holds one per peer).
MAX_FDS = 4096
MAX_SOCKETS = 1024


def job_sockets(pids: Iterable[int], proc: str = "/proc") -> dict[int, Where]:
    """inode -> one (pid, fd) holding it, for the sockets the processes hold (a process
    gone meanwhile holds none)."""
    out: dict[int, Where] = {}
    for pid in pids:
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)[:MAX_FDS]
        except OSError:
            continue
        for fd in fds:
            if len(out) >= MAX_SOCKETS:
                return out
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.startswith("socket:["):
                    out.setdefault(int(target[8:-1]), (pid, int(fd)))
    return out


def _pidfd_getfd(pidfd: int, fd: int) -> int:
    got = int(_libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0))
    if got < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return got


def tcp_counts(pid: int, fd: int) -> tuple[int, int] | None:
    """(bytes acked, bytes received) of the TCP socket ``fd`` of ``pid``; None for another
    kind of socket."""
    pidfd = os.pidfd_open(pid)
    try:
        dup = _pidfd_getfd(pidfd, fd)
    finally:
        os.close(pidfd)
    s = socket.socket(fileno=dup)
    try:
        if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    finally:
        s.close()
    if len(info) < _TCP_INFO_LEN:
        return None
    acked, received = _U64X2.unpack_from(info, _TCP_INFO_BYTES_ACKED)
    return int(acked), int(received)


@dataclass
class NetMeter:
    """Per job, the (sent, received) bytes of its sockets since the previous call."""

    read: Callable[[int, int], tuple[int, int] | None] = tcp_counts
    sockets_of: Callable[[Iterable[int]], Mapping[int, Where]] = job_sockets
    _last: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    def deltas(self, pids: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
        """``pids``: each live job's processes. A job no longer given is forgotten."""
        for gone in set(self._last) - set(pids):
            del self._last[gone]
        out: dict[str, list[int]] = {}
        for job, job_pids in pids.items():
            last = self._last.get(job, {})
            now: dict[int, tuple[int, int]] = {}
            sent = received = 0
            for ino, (pid, fd) in self.sockets_of(job_pids).items():
                try:
                    counts = self.read(pid, fd)
                except OSError:
                    continue  # closed, or its process gone, since the fd was listed
                if counts is None:
                    continue  # not TCP
                s, r = now[ino] = counts
                s0, r0 = last.get(ino, (0, 0))
                sent += max(0, s - s0)
                received += max(0, r - r0)
            self._last[job] = now
            out[job] = [sent, received]
        return out
