"""A job's network bytes, from the kernel: the network part of its demand for N + 1 gangs
(issue 31; controller/policies/devices.py).

Which sockets are the job's: those its processes hold, found from the job's cgroup (its
pids, the kernel's list) and each pid's ``/proc/PID/fd`` links (``socket:[INODE]``). What
they moved: the node namespace's TCP sockets dumped once per ack through sock_diag
(``inet_diag`` with ``INET_DIAG_INFO``: each socket's inode and ``tcp_info``), whose
``tcpi_bytes_acked`` (bytes sent and acknowledged) and ``tcpi_bytes_received`` the kernel
keeps. Nothing the job says is believed: not the message library's own counters (the
shared page it writes, agent/nicproto.py), nor its environment.

Choices: TCP over IPv4 and IPv6 only (the message library's mesh and MPI's TCP
transport); a socket's bytes count from when it is first seen, and a socket closed
between two acks loses what it moved since the last one (the mesh's sockets live as
long as the job). Bytes over the node's loopback count too; a job's ranks are one per
node in the testbed's gangs, so they have none.

:class:`NetMeter` is the per-job bookkeeping, pure given the two readers it is handed.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

INET_DIAG_INFO = 2  # the tcp_info extension (linux/inet_diag.h)
# TCP states that can move data (ESTABLISHED, FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, CLOSING):
# the kernel skips the rest (a busy host's thousands of TIME_WAIT sockets) in the dump
DATA_STATES = sum(1 << s for s in (1, 4, 5, 8, 9, 11))


def socket_inodes(pids: Iterable[int], proc: str = "/proc") -> set[int]:
    """Inodes of the sockets the processes hold (a process gone meanwhile has none)."""
    out: set[int] = set()
    for pid in pids:
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.startswith("socket:["):
                    out.add(int(target[8:-1]))
    return out


class TcpDiag:
    """sock_diag of this network namespace, kept open between acks (opening costs ms)."""

    def __init__(self) -> None:
        self._ds: Any = None

    def __call__(self) -> dict[int, tuple[int, int]]:
        """Every TCP socket that can move data: inode -> (bytes acked, bytes received)."""
        from pyroute2 import DiagSocket

        if self._ds is None:
            self._ds = DiagSocket()
            self._ds.bind()
        out: dict[int, tuple[int, int]] = {}
        ext = 1 << (INET_DIAG_INFO - 1)
        for family in (socket.AF_INET, socket.AF_INET6):
            for msg in self._ds.get_sock_stats(family=family, states=DATA_STATES, extensions=ext):
                info = msg.get_attr("INET_DIAG_INFO")
                inode = msg["idiag_inode"]
                if info is None or not inode:
                    continue
                out[inode] = (int(info["tcpi_bytes_acked"]), int(info["tcpi_bytes_received"]))
        return out

    def close(self) -> None:
        if self._ds is not None:
            with contextlib.suppress(OSError):
                self._ds.close()
            self._ds = None


@dataclass
class NetMeter:
    """Per job, the (sent, received) bytes of its sockets since the previous call."""

    read_sockets: Callable[[], Mapping[int, tuple[int, int]]] = field(default_factory=TcpDiag)
    inodes_of: Callable[[Iterable[int]], set[int]] = socket_inodes
    _last: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    def deltas(self, pids: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
        """``pids``: each live job's processes. A job no longer given is forgotten."""
        for gone in set(self._last) - set(pids):
            del self._last[gone]
        if not pids:
            return {}
        stats = self.read_sockets()
        out: dict[str, list[int]] = {}
        for job, job_pids in pids.items():
            last = self._last.get(job, {})
            now: dict[int, tuple[int, int]] = {}
            sent = received = 0
            for ino in self.inodes_of(job_pids):
                if ino not in stats:
                    continue  # not TCP, or closed since the fd was read
                s, r = now[ino] = stats[ino]
                s0, r0 = last.get(ino, (0, 0))
                sent += max(0, s - s0)
                received += max(0, r - r0)
            self._last[job] = now
            out[job] = [sent, received]
        return out

    def close(self) -> None:
        close = getattr(self.read_sockets, "close", None)
        if close is not None:
            close()
