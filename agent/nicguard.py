"""What the NIC socket takes from a job, checked before the agent believes it (issue 28).

The NIC socket (agent/nic.py) is open to every local user, and what comes
through it steers the agent's boosts. A job could stop the agent with it
(nested JSON, a descriptor that is not a socket, a state page it truncates
under the agent's mapping: SIGBUS) or buy CPU it should not have (register
many times, as any rank, with made-up sockets and made-up pending messages).
This module holds the checks; agent/nic.py calls them:

* datagrams: a registration is at most :data:`MAX_REGISTER` bytes of JSON
  nested at most 4 levels (common/safejson.py); after it, the only datagrams
  are collective events, at most :data:`MAX_EVENT` bytes of flat JSON;
* who: the rank must be one the agent launched for that job on this node, not
  registered yet, and the caller must be that rank's process or a descendant
  of it, inside the job's cgroup (:func:`check_rank`);
* descriptors: the state page must be a memfd sealed against shrinking and at
  least a page long (:func:`check_state_fd`), so the agent's read-only
  mapping can never fault; every socket must be a TCP connection of this
  job's mesh to the peer rank it claims, by address and port
  (:func:`mesh_socket`); anything else refuses the registration, and the
  checks run before any descriptor is trusted;
* the ERL page the agent hands out is sealed (no shrinking, growing or new
  writable mappings) and given read-only (:func:`erl_page`);
* claims the agent cannot observe: the unexpected-queue length a rank reports
  counts as pending only within what its sockets delivered (at most one
  message per 40-byte header received, minus those it reports consumed,
  which may never go down) and only until the rank has had
  :data:`CLAIM_CPU_S` of CPU with the claim unchanged (:class:`ClaimCheck`):
  every message really received buys at most that much boosted CPU.
  Arrivals still on the sockets are the kernel's count, not the rank's.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import socket
import stat
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from agent import nicproto
from common import safejson

MAX_REGISTER = 16 << 10  # bytes of a registration datagram
REGISTER_DEPTH = 4  # {"socks": [{"peer": ...}]} is 3 deep
PENDING_PER_UID = 16  # unregistered connections one user may hold
REGISTER_S = 5.0  # an unregistered connection is closed after this long
CLAIM_CPU_S = 0.05  # boosted CPU one unchanged unexpected-queue claim may earn
MAX_EVENT = 64  # bytes of a collective event

_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux 5.1
_TCP_INFO_BYTES_RECEIVED = 128  # offset of tcpi_bytes_received (u64), Linux >= 4.1
_U64 = struct.Struct("=Q")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class Refused(ValueError):
    """A registration the agent will not take; the message is sent back."""


@dataclass(frozen=True)
class JobView:
    """What the agent knows of a job on this node, for checking its registrations."""

    job_id: str
    ranks: Mapping[int, int]  # rank -> pid, the ranks the agent launched here
    members: Callable[[], Collection[int]]  # pids in the job's cgroup, now
    peers: tuple[str, ...] = ()  # every rank's data address (COSCHED_PEERS)
    port: int = 0  # the job's base port (COSCHED_PORT)


def mesh_of(env: Mapping[str, str]) -> tuple[tuple[str, ...], int]:
    """(peers, port) from a launch's environment; ((), 0) when it does not say."""
    peers = tuple(p.strip() for p in env.get("COSCHED_PEERS", "").split(",") if p.strip())
    try:
        port = int(env.get("COSCHED_PORT", "0"))
    except ValueError:
        port = 0
    return peers, port


# ---- datagrams ---------------------------------------------------------------------------
def parse_register(data: bytes) -> tuple[str, int, list[int]]:
    """(job, rank, claimed peer rank of each socket) of a registration datagram."""
    if len(data) > MAX_REGISTER:
        raise Refused(f"registration of {len(data)} bytes (at most {MAX_REGISTER})")
    try:
        msg = safejson.loads(data, max_depth=REGISTER_DEPTH)
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused(f"registration is not JSON: {e}") from None
    if not isinstance(msg, dict) or msg.get("op") != "register":
        raise Refused("the first datagram must be {'op': 'register', ...}")
    job, rank, socks = msg.get("job"), msg.get("rank"), msg.get("socks")
    if not isinstance(job, str) or not _is_int(rank) or not isinstance(socks, list):
        raise Refused("register: job (str), rank (int) and socks (list) are required")
    peers = [s.get("peer") if isinstance(s, dict) else None for s in socks]
    if not all(_is_int(p) for p in peers):
        raise Refused("register: every socket must name its peer rank (int)")
    return job, int(rank), [int(p) for p in peers]  # type: ignore[arg-type]


def parse_event(data: bytes) -> bool | None:
    """A collective event's ``on`` (entered: True, left: False); None if it is not one."""
    if len(data) > MAX_EVENT:
        return None
    try:
        msg = safejson.loads(data, max_depth=1)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(msg, dict) and msg.get("op") == "coll" and isinstance(msg.get("on"), bool):
        return bool(msg["on"])
    return None


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---- who -------------------------------------------------------------------------------------
def check_rank(view: JobView, rank: int, pid: int) -> None:
    if rank not in view.ranks:
        raise Refused(f"rank {rank} of job {view.job_id!r} does not run on this node")
    try:
        members = view.members()
    except Exception as e:  # the cgroup layer's own errors too: refuse, never fail the loop
        raise Refused(f"cannot read the cgroup of job {view.job_id!r}: {e}") from None
    if pid not in members:
        raise Refused(f"process {pid} is not in job {view.job_id!r}'s cgroup")
    if not descends_from(pid, view.ranks[rank]):
        raise Refused(f"process {pid} is not rank {rank} of job {view.job_id!r}")


def descends_from(pid: int, ancestor: int, limit: int = 64) -> bool:
    """``pid`` is ``ancestor`` or one of its descendants (/proc ppid chain)."""
    for _ in range(limit):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat_line = f.read()
        except OSError:
            return False
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        pid = int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])
    return False


# ---- descriptors -----------------------------------------------------------------------------
def check_state_fd(fd: int) -> None:
    """The rank's state page: a memfd sealed against shrinking, at least a page long.

    The seals are asked first: that call touches no file system, so a
    descriptor of some slow or hostile file system is refused before any
    ``fstat`` could wait on it.
    """
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise Refused("the state page is not a memfd (it must be sealed)") from None
    if not seals & fcntl.F_SEAL_SHRINK:
        raise Refused("the state page is not sealed against shrinking (F_SEAL_SHRINK)")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size < nicproto.STATE_SIZE:
        raise Refused(f"the state page has {st.st_size} bytes, not {nicproto.STATE_SIZE}")


def mesh_socket(fd: int, view: JobView, rank: int, peer: int) -> tuple[socket.socket, str]:
    """A socket of ``fd``'s own (a duplicate) if ``fd`` is this rank's mesh connection
    to ``peer``; and the peer's address. Refused otherwise; ``fd`` stays the caller's."""
    if not view.peers or view.port <= 0:
        raise Refused(f"job {view.job_id!r} was launched without its ranks' addresses")
    if not 0 <= peer < len(view.peers) or peer == rank:
        raise Refused(f"a socket claims peer rank {peer}, not another rank of this job")
    dup = os.dup(fd)
    try:
        s = socket.socket(fileno=dup)  # asks the socket layer only: ENOTSOCK otherwise
    except OSError:
        os.close(dup)
        raise Refused("a registered socket is not a socket") from None
    try:
        if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
            raise Refused("a registered socket is not a TCP connection")
        try:
            local, remote = s.getsockname(), s.getpeername()
        except OSError:
            raise Refused("a registered socket is not connected") from None
        if remote[0] != view.peers[peer]:
            raise Refused(f"a socket claimed for rank {peer} is connected to {remote[0]}")
        # the lower rank listens (apps/mp/mesh.py): its port is one end of the connection
        if peer < rank:
            want, got = nicproto.mesh_port(view.peers, view.port, peer), remote[1]
        else:
            want, got = nicproto.mesh_port(view.peers, view.port, rank), local[1]
        if got != want:
            raise Refused(f"a socket claimed for rank {peer} is not on the job's port {want}")
    except BaseException:
        s.close()
        raise
    return s, remote[0]


@dataclass
class ErlPage:
    """The node's ERL page: the agent writes through ``mem``; jobs get ``ro_fd``."""

    fd: int
    ro_fd: int
    mem: mmap.mmap

    def close(self) -> None:
        self.mem.close()
        for fd in (self.fd, self.ro_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def erl_page() -> ErlPage:
    """A sealed memfd (no shrinking, growing, new writers or new seals) mapped for the
    agent, and a read-only descriptor of it for the jobs."""
    fd = os.memfd_create("cosched-erl", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nicproto.ERL_PAGE_SIZE)
        mem = mmap.mmap(fd, nicproto.ERL_PAGE_SIZE)
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | _SEAL_FUTURE_WRITE
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | fcntl.F_SEAL_SEAL)
        except OSError:  # a kernel before 5.1: no F_SEAL_FUTURE_WRITE; the read-only fd stays
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except BaseException:
        os.close(fd)
        raise
    return ErlPage(fd, ro, mem)


# ---- claims --------------------------------------------------------------------------------
def bytes_received(sock: socket.socket) -> int:
    """Bytes the kernel delivered on a TCP socket since it was made (tcpi_bytes_received)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    if len(info) < _TCP_INFO_BYTES_RECEIVED + 8:
        return 0
    return int(_U64.unpack_from(info, _TCP_INFO_BYTES_RECEIVED)[0])


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process and its threads (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime


@dataclass
class ClaimCheck:
    """Bounds one registered rank's self-reported unexpected-queue length (module doc)."""

    consumed: int = 0  # the highest consumed count seen
    claim: tuple[int, int] | None = None  # (consumed, unexpected) of the current claim
    claim_cpu_s: float = 0.0
    rejected: int = 0

    def honour(
        self,
        consumed: int,
        unexpected: int,
        socks: Sequence[socket.socket],
        pid: int,
    ) -> bool:
        if unexpected <= 0:
            self.claim = None
            self.consumed = max(self.consumed, consumed)
            return False
        ok = consumed >= self.consumed
        self.consumed = max(self.consumed, consumed)
        if ok:
            delivered = 0
            for s in socks:
                with contextlib.suppress(OSError):
                    delivered += bytes_received(s)
            ok = consumed + unexpected <= delivered // nicproto.FRAME_HEADER_SIZE
        if ok:
            cpu = process_cpu_s(pid)
            if cpu is None:
                ok = False
            elif self.claim != (consumed, unexpected):
                self.claim, self.claim_cpu_s = (consumed, unexpected), cpu
            else:
                ok = cpu - self.claim_cpu_s <= CLAIM_CPU_S
        if not ok:
            self.rejected += 1
        return ok
