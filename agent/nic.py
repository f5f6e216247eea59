"""NIC emulation: which local processes have arrived-but-unconsumed messages.

A real coscheduling NIC learns of a message before the receiving process runs
and posts it in a receive completion queue the scheduler can read (Yu & Byun 2011
§4.1-4.2, Figs. 3-4: the RCQ mapped into the kernel at ``register_to_CSM``).
Here the rank registers with its agent over a unix SOCK_SEQPACKET socket and
hands it duplicates of its data sockets and a shared state page
(SCM_RIGHTS); the agent keeps the sockets in an epoll set armed one-shot, so
the *kernel* wakes the agent when bytes arrive for a rank that is not
running, and reads the unread byte count (SIOCINQ) at each decision point.
No receiver CPU is needed, and no per-message work is done by the agent once
a rank is known to have pending data (the socket is re-armed only after it
drained). Protocol and page layout: docs/cdc.md "NIC socket".

The receiver-side userspace delay of the message library (apps/mp/linkemu.py)
is mirrored: a socket counts as pending only ``delay`` after its bytes were
first seen, so agent and program agree on when a message arrived.

The socket is open to every local user: what a registration may claim, and
which descriptors it may hand over, is checked by agent/nicguard.py before
anything is believed (issue 28).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import mmap
import os
import select
import socket
import stat
import struct
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent import nicguard, nicproto
from agent.cdc.erl import PendingMsg
from agent.cdc.schemes import Event, ProcView
from common.guard import Acceptor

log = logging.getLogger("agent.nic")

MAX_DATAGRAM = 64 * 1024
MAX_FDS = 256
MAX_REGISTERED = 1024
_EPOLL_FLAGS = select.EPOLLIN | select.EPOLLONESHOT
_INQ = struct.Struct("i")


def _consumed(page: mmap.mmap) -> int:
    return int(struct.unpack_from("<Q", page, nicproto.OFF_CONSUMED)[0])


def unread_bytes(fd: int) -> int:
    """Bytes in a socket's receive queue not yet read by its owner (SIOCINQ == FIONREAD)."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int(_INQ.unpack(buf)[0])


@dataclass
class _Sock:
    sock: socket.socket
    peer_rank: int
    peer_node: str | None
    owner: str  # registered process key
    seen_s: float | None = None  # when the agent first saw unread bytes
    erl_us: float = 0.0  # the sender node's ERL at that moment
    armed: bool = True


@dataclass
class Registered:
    key: str  # "<job>/<rank>"
    job_id: str
    rank: int
    pid: int
    conn: socket.socket
    page: mmap.mmap
    socks: list[_Sock] = field(default_factory=list)
    delay_s: float = 0.0
    unexpected_seen_s: float | None = None
    last_erl_us: float = 0.0
    claims: nicguard.ClaimCheck = field(default_factory=nicguard.ClaimCheck)

    def state(self) -> nicproto.State:
        return nicproto.read_state(self.page)


@dataclass
class MdTotals:
    count: int = 0
    sum_ns: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(nicproto.MD_BUCKETS_S))

    def add(self, count: int, sum_ns: int, buckets: list[int]) -> None:
        self.count += count
        self.sum_ns += sum_ns
        for i, b in enumerate(buckets):
            self.buckets[i] += b


# job id -> what the agent knows of it here, or why it will not take registrations for it
Authorize = Callable[[str], "nicguard.JobView | str"]


class NicServer:
    """The agent's side of the NIC socket, the duplicated sockets and the state pages."""

    def __init__(
        self,
        path: Path,
        node: str,
        authorize: Authorize,
        peer_erl: Callable[[str | None], float],
        node_of_addr: Callable[[str], str | None],
        on_event: Callable[[str, Event], None],
        delay_of_job: Callable[[str], float] = lambda job: 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.node = node
        self.authorize = authorize
        self.peer_erl = peer_erl
        self.node_of_addr = node_of_addr
        self.on_event = on_event
        self.delay_of_job = delay_of_job
        self.clock = clock
        self.procs: dict[str, Registered] = {}
        self.conns: dict[int, socket.socket] = {}  # fd -> unregistered or registered conn
        self.by_conn: dict[int, str] = {}  # conn fd -> key
        self.by_fd: dict[int, _Sock] = {}  # dup'd data socket fd -> entry
        self.retired = MdTotals()
        self.refused = 0
        self.bad_messages = 0
        self.arrival_events = 0
        self.listener: socket.socket | None = None
        self.epoll = select.epoll()
        self.scheme = ""
        self.erl: nicguard.ErlPage | None = None
        self.claims_rejected_gone = 0  # of processes that left
        self._acceptor: Acceptor | None = None
        self._pending: dict[int, tuple[int, float]] = {}  # unregistered conn fd -> uid, since
        # Called before a connection is closed, so the agent loop can stop watching it.
        self.unwatch: Callable[[socket.socket], None] = lambda conn: None

    @property
    def erl_fd(self) -> int:
        """The descriptor of the ERL page jobs get (read-only), -1 when closed."""
        return self.erl.ro_fd if self.erl is not None else -1

    @property
    def claims_rejected(self) -> int:
        """Decision points at which a rank's unexpected-queue claim was not believed."""
        return self.claims_rejected_gone + sum(p.claims.rejected for p in self.procs.values())

    # ---- lifecycle -------------------------------------------------------------
    def open(self) -> None:
        self.erl = nicguard.erl_page()  # sealed; jobs get it read-only
        self.set_erl(0.0)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(self.path)
            if not stat.S_ISSOCK(st.st_mode):
                raise OSError(f"{self.path} exists and is not a socket: remove it")
            os.unlink(self.path)
        lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        lst.bind(str(self.path))
        # Jobs may run as other users (they are authenticated by cgroup, below).
        os.chmod(self.path, 0o666)
        lst.listen(256)
        lst.setblocking(False)
        self.listener = lst
        self._acceptor = Acceptor(lst)

    def close(self) -> None:
        for key in list(self.procs):
            self._unregister(key, "agent closing")
        for conn in list(self.conns.values()):
            self.unwatch(conn)
            conn.close()
        self.conns.clear()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.epoll.close()
        if self.erl is not None:
            self.erl.close()
            self.erl = None
        if self._acceptor is not None:
            self._acceptor.close()
            self._acceptor = None

    def set_erl(self, erl_us: float) -> None:
        if self.erl is not None:
            nicproto.write_erl(self.erl.mem, int(erl_us))

    # ---- I/O readiness (called by the agent loop) ------------------------------
    def accept(self) -> socket.socket | None:
        """The next connection to watch; None when there is none (or it was refused)."""
        assert self._acceptor is not None
        self.expire_unregistered()
        got = self._acceptor.accept()  # EMFILE sheds the connection, never raises
        if got is None:
            return None
        conn = got[0]
        conn.setblocking(False)
        try:
            _pid, uid, _gid = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )
        except OSError:
            conn.close()
            return None
        if len(self.conns) >= MAX_REGISTERED:
            self._refuse(conn, "too many registered processes on this node")
            return None
        mine = sum(1 for u, _ in self._pending.values() if u == uid)
        if uid != 0 and mine >= nicguard.PENDING_PER_UID:
            self._refuse(conn, f"uid {uid} holds {mine} unregistered connections already")
            return None
        self.conns[conn.fileno()] = conn
        self._pending[conn.fileno()] = (uid, self.clock())
        return conn

    def expire_unregistered(self) -> None:
        """Close connections that did not register within REGISTER_S."""
        if not self._pending:
            return
        cutoff = self.clock() - nicguard.REGISTER_S
        for fd, (_uid, since) in list(self._pending.items()):
            conn = self.conns.get(fd)
            if since < cutoff and conn is not None:
                self._drop_conn(conn, "no registration in time")

    def readable(self, conn: socket.socket) -> bool:
        """Handle one datagram (or EOF). False when the connection is gone."""
        fd = conn.fileno()
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, MAX_DATAGRAM, MAX_FDS)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as e:
            self._drop_conn(conn, f"receive failed: {e}")
            return False
        if not data:
            for f in fds:
                os.close(f)
            self._drop_conn(conn, "closed")
            return False
        key = self.by_conn.get(fd)
        if key is None:
            return self._register(conn, data, fds)
        for f in fds:  # fds are only accepted with the registration
            os.close(f)
        self._event(key, data)
        return True

    def epoll_ready(self) -> list[str]:
        """Arrivals the kernel reported; returns the keys that newly have unread bytes."""
        out: list[str] = []
        now = self.clock()
        for fd, _ev in self.epoll.poll(0):
            s = self.by_fd.get(fd)
            if s is None:
                continue
            s.armed = False
            self.arrival_events += 1
            if s.seen_s is None:
                s.seen_s = now
                s.erl_us = self.peer_erl(s.peer_node)
                out.append(s.owner)
        for key in out:
            self.on_event(key, Event.ARRIVAL)
        return out

    # ---- the view at a decision point ------------------------------------------
    def views(self, rearm: bool = True) -> dict[str, ProcView]:
        """Every registered process: pending messages (ERL, when seen), blocked, in collective.

        ``rearm``: watch drained sockets again. The agent re-arms only at its
        ticks, so a socket raises at most one arrival event per tick however
        many messages it carries: the agent's wake-ups, not the messages,
        are what costs (benchmarks/nic_cost.py).
        """
        self.expire_unregistered()
        now = self.clock()
        out: dict[str, ProcView] = {}
        for key, p in self.procs.items():
            msgs: list[PendingMsg] = []
            for s in p.socks:
                try:
                    unread = unread_bytes(s.sock.fileno())
                except OSError:
                    unread = 0
                if unread > 0:
                    if s.seen_s is None:
                        s.seen_s = now
                        s.erl_us = self.peer_erl(s.peer_node)
                    p.last_erl_us = s.erl_us
                    if now >= s.seen_s + p.delay_s:
                        msgs.append(PendingMsg(s.erl_us, s.seen_s))
                else:
                    s.seen_s = None
                    if rearm and not s.armed:
                        self._arm(s)
            wait, coll, unexpected = nicproto.read_flags(p.page)
            # the rank's own count: believed within what its sockets delivered (nicguard)
            if unexpected > 0 and p.claims.honour(
                _consumed(p.page), unexpected, [s.sock for s in p.socks], p.pid
            ):
                if p.unexpected_seen_s is None:
                    p.unexpected_seen_s = now
                msgs.append(PendingMsg(p.last_erl_us, p.unexpected_seen_s))
            else:
                p.unexpected_seen_s = None
            out[key] = ProcView(
                key,
                tuple(msgs),
                blocked=wait == nicproto.WAIT_BLOCKED,
                in_collective=bool(coll),
            )
        return out

    def drained(self) -> bool:
        """No unread bytes seen on any socket, none believed in an unexpected queue, and
        every socket armed: the kernel wakes the agent at the next arrival (as of the
        last :meth:`views` with ``rearm``)."""
        return all(s.seen_s is None and s.armed for s in self.by_fd.values()) and all(
            p.unexpected_seen_s is None for p in self.procs.values()
        )

    def pids(self) -> dict[str, int]:
        return {k: p.pid for k, p in self.procs.items()}

    def job_of(self, key: str) -> str:
        return self.procs[key].job_id

    def md_totals(self) -> MdTotals:
        tot = MdTotals()
        tot.add(self.retired.count, self.retired.sum_ns, self.retired.buckets)
        for p in self.procs.values():
            st = p.state()
            tot.add(st.md_count, st.md_sum_ns, list(st.md_buckets))
        return tot

    # ---- internals ------------------------------------------------------------------
    def _arm(self, s: _Sock) -> None:
        try:
            self.epoll.modify(s.sock.fileno(), _EPOLL_FLAGS)
            s.armed = True
        except OSError:
            pass

    def _refuse(self, conn: socket.socket, why: str) -> None:
        self.refused += 1
        log.warning("NIC registration refused: %s", why)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"ok": False, "error": why}).encode())
        self.unwatch(conn)
        conn.close()

    def _drop_conn(self, conn: socket.socket, why: str) -> None:
        fd = conn.fileno()
        key = self.by_conn.pop(fd, None)
        self.conns.pop(fd, None)
        self._pending.pop(fd, None)
        if key is not None:
            self._unregister(key, why)
        self.unwatch(conn)
        conn.close()

    def _register(self, conn: socket.socket, data: bytes, fds: list[int]) -> bool:
        fd = conn.fileno()
        self._pending.pop(fd, None)
        socks: list[tuple[socket.socket, str, int]] = []  # duplicates, checked (nicguard)
        page: mmap.mmap | None = None
        try:
            job, rank, peers = nicguard.parse_register(data)
            if len(fds) != 1 + len(peers):
                raise nicguard.Refused(
                    f"register: {len(fds)} fds for {len(peers)} sockets (+1 page)"
                )
            if len(set(peers)) != len(peers):
                raise nicguard.Refused("register: two sockets claim the same peer rank")
            pid, _uid, _gid = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )
            view = self.authorize(job)
            if isinstance(view, str):
                raise nicguard.Refused(view)
            nicguard.check_rank(view, rank, pid)
            key = f"{job}/{rank}"
            if key in self.procs:
                raise nicguard.Refused(f"rank {rank} of job {job!r} is registered already")
            nicguard.check_state_fd(fds[0])
            for peer, sfd in zip(peers, fds[1:], strict=True):
                s, addr = nicguard.mesh_socket(sfd, view, rank, peer)
                socks.append((s, addr, peer))
            page = mmap.mmap(fds[0], nicproto.STATE_SIZE, prot=mmap.PROT_READ)
            nicproto.read_state(page)  # checks magic and version
        except (ValueError, KeyError, TypeError, OSError) as e:
            for s, _, _ in socks:
                s.close()
            if page is not None:
                page.close()
            self.conns.pop(fd, None)
            self._refuse(conn, str(e) or type(e).__name__)
            return False
        finally:
            for f in fds:  # what we keep are the checked duplicates and the mapping
                os.close(f)
        reg = Registered(key, job, rank, pid, conn, page, delay_s=self.delay_of_job(job))
        for s, addr, peer in socks:
            entry = _Sock(s, peer, self.node_of_addr(addr), key)
            try:
                self.epoll.register(s.fileno(), _EPOLL_FLAGS)
            except OSError as e:
                log.warning("NIC: cannot watch a socket of %s: %s", key, e)
                s.close()
                continue
            self.by_fd[s.fileno()] = entry
            reg.socks.append(entry)
        self.procs[key] = reg
        self.by_conn[fd] = key
        reply = json.dumps({"ok": True, "scheme": self.scheme, "node": self.node}).encode()
        try:
            socket.send_fds(conn, [reply], [self.erl_fd])
        except OSError as e:
            self._drop_conn(conn, f"cannot answer: {e}")
            return False
        log.info("NIC: %s registered (pid %d, %d sockets)", key, pid, len(reg.socks))
        return True

    def _event(self, key: str, data: bytes) -> None:
        """A collective entry or exit: ``{"op": "coll", "on": true|false}``, nothing else."""
        on = nicguard.parse_event(data)
        if on is None:
            self.bad_messages += 1
        else:
            self.on_event(key, Event.COLL_ON if on else Event.COLL_OFF)

    def _unregister(self, key: str, why: str) -> None:
        p = self.procs.pop(key, None)
        if p is None:
            return
        self.claims_rejected_gone += p.claims.rejected
        with contextlib.suppress(ValueError, OSError):
            st = p.state()
            self.retired.add(st.md_count, st.md_sum_ns, list(st.md_buckets))
        for s in p.socks:
            fd = s.sock.fileno()
            self.by_fd.pop(fd, None)
            with contextlib.suppress(OSError):
                self.epoll.unregister(fd)
            s.sock.close()
        p.page.close()
        log.info("NIC: %s unregistered (%s)", key, why)
