"""One rank's communicator: full-mesh TCP over the data network, point to point.

Yu & Byun 2011 §4.1 puts a user-level message layer (GM) between the program and
the NIC; this is ours. Ranks learn everything from the launcher's environment
(docs/cdc.md: COSCHED_RANK, _SIZE, _PEERS, _PORT, COSCHED_JOB) and open one
connection to every other rank at start (apps/mp/mesh.py).

After that all sockets are non-blocking (TCP_NODELAY) and one progress engine
serves every call: it reads whatever the kernel has on any socket into the
connection's preallocated buffer, cuts frames, matches them to posted
receives by (source, tag) in arrival order -- so messages from one sender
with one tag are received in the order they were sent -- and keeps the rest
in an unexpected queue; it writes what sends could not finish. How a caller
waits for an incomplete request is the waiting action (apps/mp/wait.py,
Yu & Byun 2011 Table 1); what it waited is the message delay (apps/mp/stats.py).

Tags: user tags are 0 .. 2**31 - 1; ``ANY_TAG`` matches any of them but
never a collective's (negative) tag, so a wildcard receive cannot steal a
barrier message.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import select
import socket
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent import nicproto
from apps.mp import auth, frame, mesh
from apps.mp.errors import MPError
from apps.mp.linkemu import LinkEmu
from apps.mp.nic import NicClient, StatePage
from apps.mp.stats import Stats
from apps.mp.trace import Tracer
from apps.mp.wait import WaitMode

ANY_SOURCE = -1
ANY_TAG = -(1 << 31)  # user tags are >= 0; collectives use small negative tags
MAX_TAG = (1 << 31) - 1
DEFAULT_CONNECT_TIMEOUT = 60.0
_RBUF = 256 * 1024  # per-connection receive buffer; bigger messages get their own
_COMPACT = 64 * 1024  # move the unparsed tail to the front when less room is left
_POLLIN = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP

Payload = bytes | bytearray | memoryview


class Request:
    """A pending send or receive.

    Once ``done``: a receive's ``data`` is the payload, ``source`` and
    ``recv_tag`` say whom it came from and with which tag (useful after
    ``ANY_SOURCE`` / ``ANY_TAG``).
    """

    __slots__ = ("data", "done", "done_ns", "is_recv", "md", "peer", "recv_tag", "source", "tag")

    def __init__(self, is_recv: bool, peer: int, tag: int) -> None:
        self.is_recv = is_recv
        self.peer = peer
        self.tag = tag
        self.done = False
        self.data: bytes = b""
        self.source = peer
        self.recv_tag = tag
        self.done_ns = 0
        self.md = False  # message delay recorded

    def _complete(self, data: bytes = b"", source: int = -1, tag: int = 0) -> None:
        self.done = True
        self.data = data
        if self.is_recv:
            self.source, self.recv_tag = source, tag
        self.done_ns = time.perf_counter_ns()

    def __repr__(self) -> str:
        kind = "recv" if self.is_recv else "send"
        return f"<Request {kind} peer={self.peer} tag={self.tag} done={self.done}>"


@dataclass
class _Conn:
    """One data connection and its receive and send state."""

    peer: int
    addr: str
    sock: socket.socket
    fd: int
    rbuf: bytearray = field(default_factory=lambda: bytearray(_RBUF))
    rview: memoryview = field(init=False)
    rstart: int = 0  # first unparsed byte
    rend: int = 0  # end of the bytes read
    cur: frame.Header | None = None  # large payload being read straight into ``big``
    big: bytearray | None = None
    got: int = 0
    out: deque[tuple[list[memoryview], Request]] = field(default_factory=deque)
    held: deque[tuple[int, int, bytes]] = field(default_factory=deque)  # (due_ns, tag, data)
    last_due: int = 0
    closed: bool = False
    close_reason: str = ""

    def __post_init__(self) -> None:
        self.rview = memoryview(self.rbuf)


class Comm:
    """One rank of a job. Use as a context manager, or ``open()`` then ``close()``.

    ``peers[r]`` is rank r's data address (default: everyone on 127.0.0.1);
    rank r listens on ``port`` + the number of lower ranks at the same address.
    ``listener`` is an already bound and listening socket for this rank (tests).
    """

    def __init__(
        self,
        rank: int,
        size: int,
        peers: Sequence[str] | None = None,
        port: int = 0,
        job: str = "",
        wait: WaitMode | None = None,
        link: LinkEmu | None = None,
        nic_path: str | None = None,
        nic_job: str = "",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        seed: int | None = None,
        listener: socket.socket | None = None,
        secret: bytes | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        if size < 1:
            raise MPError(f"job size must be at least 1, got {size}")
        if not 0 <= rank < size:
            raise MPError(f"rank {rank} is outside 0..{size - 1}")
        peers = list(peers) if peers else ["127.0.0.1"] * size
        if len(peers) != size:
            raise MPError(f"{len(peers)} peer addresses for {size} ranks (COSCHED_PEERS)")
        if size > 1 and listener is None and port <= 0:
            raise MPError(f"a job of {size} ranks needs a port: set COSCHED_PORT")
        self.rank, self.size, self.peers, self.port = rank, size, peers, port
        self.job = job
        self.mode = wait or WaitMode()
        self.link = link
        self.nic_path = nic_path
        self.nic_job = nic_job or job
        self.connect_timeout = connect_timeout
        # the job's secret: every mesh connection proves it (apps/mp/auth.py)
        self.secret = auth.secret_from_env() if secret is None else secret
        # The link emulation's RNG: reproducible per job and rank unless a seed is given.
        self.rng = random.Random(seed if seed is not None else f"{job}:{rank}")
        self._listener = listener
        self._conns: list[_Conn | None] = [None] * size
        self._by_fd: dict[int, _Conn] = {}
        self._poll = select.poll()
        self._posted: list[Request] = []
        self._unexpected: deque[tuple[int, int, bytes]] = deque()
        self._held = 0
        self._lost = False
        self.page = StatePage()
        self.nic: NicClient | None = None
        self.stats = Stats(page=self.page.mem)
        self._opened = False
        self._in_collective = 0
        self._where = ""  # the collective being run, for error messages
        self._coll_count: dict[str, int] = {}
        self.tracer = tracer  # apps/mp/trace.py: the simulator's message traces

    # ---- construction from the launcher's environment -----------------------------
    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Comm:
        """Rank, size, peers, port, waiting actions, link emulation and NIC from COSCHED_*.

        Without COSCHED_PEERS every rank is at COSCHED_RANK0_ADDR (one host, the
        older launchers), else 127.0.0.1; keyword arguments override.
        """
        env = os.environ if env is None else env

        def num(name: str, default: int) -> int:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise MPError(f"environment {name}={raw!r} is not an integer") from None

        size = num("COSCHED_SIZE", 1)
        rank = num("COSCHED_RANK", 0)
        peers_raw = env.get("COSCHED_PEERS", "")
        if peers_raw:
            peers = [p.strip() for p in peers_raw.split(",")]
        else:
            peers = [env.get("COSCHED_RANK0_ADDR") or "127.0.0.1"] * max(1, size)
        kw: dict[str, Any] = dict(
            rank=rank,
            size=size,
            peers=peers,
            port=num("COSCHED_PORT", 0),
            job=env.get("COSCHED_JOB", ""),
            wait=WaitMode.from_env(env),
            link=LinkEmu.from_env(env),
            nic_path=env.get("COSCHED_NIC_SOCK") or None,
            nic_job=env.get("COSCHED_JOB_ID", ""),
            secret=auth.secret_from_env(env),
            tracer=Tracer.from_env(rank, size, env),
        )
        kw.update(overrides)
        return cls(**kw)

    # ---- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Comm:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def listen(self) -> socket.socket:
        """Bind this rank's listening socket now (before ``open``)."""
        if self._listener is None:
            self._listener = mesh.listen(self.rank, self.peers, self.port, self.size)
        return self._listener

    def open(self) -> Comm:
        """Connect the full mesh (apps/mp/mesh.py), then register with the agent if asked."""
        if self._opened:
            return self
        if self.size > 1:
            # The highest rank accepts nobody: it needs no listening socket.
            lst = self.listen() if self.rank < self.size - 1 else self._listener
            hs = mesh.Handshake(
                self.rank,
                self.size,
                self.peers,
                self.port,
                self.job,
                self.connect_timeout,
                self.secret,
            )
            try:
                links = hs.connect_all(lst)
            finally:
                if lst is not None:
                    lst.close()
                self._listener = None
            for link in links:
                link.sock.setblocking(False)
                c = _Conn(link.peer, link.addr, link.sock, link.sock.fileno())
                self._conns[c.peer] = c
                self._by_fd[c.fd] = c
                self._poll.register(c.fd, _POLLIN)
        self._opened = True
        if self.nic_path and self.size > 1:
            socks = [(c.peer, c.addr, c.sock) for c in self._conns if c is not None]
            self.nic = NicClient.register(self.nic_path, self.nic_job, self.rank, self.page, socks)
        return self

    def close(self) -> None:
        """Close the connections and the NIC registration. Complete your sends first."""
        if self.nic is not None:
            self.nic.close()
            self.nic = None
        self._close_sockets()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._opened = False
        self.stats.page = None
        self.page.close()
        if self.tracer is not None:
            self.tracer.write()

    def _close_sockets(self) -> None:
        for c in self._conns:
            if c is not None and not c.closed:
                with contextlib.suppress(OSError, KeyError):
                    self._poll.unregister(c.fd)
                c.sock.close()
                c.closed = True

    # ---- point to point ----------------------------------------------------------------
    def isend(self, dest: int, data: Payload, tag: int = 0) -> Request:
        """Start sending ``data`` to ``dest``; do not modify the buffer until it completes."""
        self._check_tag(tag, "send")
        return self._isend(dest, data, tag)

    def irecv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Post a receive; it matches the first message from ``source`` with ``tag``."""
        if tag != ANY_TAG:
            self._check_tag(tag, "receive")
        return self._irecv(source, tag)

    def send(self, dest: int, data: Payload, tag: int = 0) -> None:
        """Send and wait until the kernel has taken the whole message."""
        self._check_tag(tag, "send")
        self.wait(self._isend(dest, data, tag))

    def recv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> bytes:
        """Wait for the next message from ``source`` with ``tag``; returns its payload."""
        if tag != ANY_TAG:
            self._check_tag(tag, "receive")
        return self._recv(source, tag)

    def sendrecv(self, dest: int, data: Payload, source: int, tag: int = 0) -> bytes:
        """Send to ``dest`` and receive from ``source`` at once (no deadlock in a ring)."""
        self._check_tag(tag, "send")
        r = self._irecv(source, tag)
        s = self._isend(dest, data, tag)
        self.waitall([s, r])
        return r.data

    def test(self, req: Request) -> bool:
        """Make progress without waiting; True if ``req`` is complete."""
        if not req.done:
            self._progress(0)
        if req.done and req.is_recv and not req.md:
            self._record_md(req, req.done_ns)
        return req.done

    def wait(self, req: Request) -> bytes:
        """Complete ``req`` with this rank's waiting action; a receive returns its payload."""
        self.waitall([req])
        return req.data

    def waitall(self, reqs: Sequence[Request]) -> list[bytes]:
        """Complete every request; returns the payloads (b"" for sends)."""
        start = time.perf_counter_ns()
        if not all(r.done for r in reqs):
            todo = [r for r in reqs if not r.done]
            self._wait_until(todo, sending=all(not r.is_recv for r in todo))
        for r in reqs:
            if r.is_recv and not r.md:
                self._record_md(r, start)
        if self.tracer is not None:
            self.tracer.wait([(r.source, len(r.data)) for r in reqs if r.is_recv])
        return [r.data for r in reqs]

    # internal versions without the user-tag check (collectives use negative tags)
    def _isend(self, dest: int, data: Payload, tag: int) -> Request:
        self._check_peer(dest, "send to")
        req = Request(False, dest, tag)
        payload = data if isinstance(data, bytes) else memoryview(data).cast("B")
        n = len(payload)
        if n > frame.MAX_SIZE:
            raise self._err(f"message of {n} bytes to rank {dest} exceeds {frame.MAX_SIZE}")
        self.stats.on_send(n)
        if self.tracer is not None:
            self.tracer.send(dest, n)
        if dest == self.rank:
            self.stats.on_arrival(n, self.nic.erl_us() if self.nic is not None else 0)
            self._deliver(self.rank, tag, bytes(payload))
            req._complete()
            return req
        c = self._conns[dest]
        assert c is not None
        if c.closed:
            raise self._err(self._lost_msg(c))
        erl = self.nic.erl_us() if self.nic is not None else 0
        head = frame.pack(frame.DATA, self.rank, tag, n, time.time_ns(), erl)
        if c.out:  # earlier sends are still queued: keep the order
            parts = [memoryview(head), memoryview(payload)] if n else [memoryview(head)]
        elif n <= 1024:  # small: one copy and one send is cheaper than a gather
            parts = self._write(c, [memoryview(head + payload)])
        else:
            parts = self._write(c, [memoryview(head), memoryview(payload)])
        if parts:
            c.out.append((parts, req))
            self._poll.modify(c.fd, _POLLIN | select.POLLOUT)
        else:
            req._complete()
        return req

    def _irecv(self, source: int, tag: int) -> Request:
        if source != ANY_SOURCE:
            self._check_peer(source, "receive from")
        req = Request(True, source, tag)
        if self._unexpected:
            for i, (src, t, data) in enumerate(self._unexpected):
                if (source == ANY_SOURCE or src == source) and (
                    t == tag or (tag == ANY_TAG and t >= 0)
                ):
                    del self._unexpected[i]
                    self.page.set_unexpected(len(self._unexpected))
                    req._complete(data, src, t)
                    return req
        self._posted.append(req)
        return req

    def _send(self, dest: int, data: Payload, tag: int) -> None:
        self.wait(self._isend(dest, data, tag))

    def _recv(self, source: int, tag: int) -> bytes:
        start = time.perf_counter_ns()  # a message already there counts its matching time
        req = self._irecv(source, tag)
        if not req.done:
            self._wait_until([req], sending=False)
        self._record_md(req, start)
        if self.tracer is not None:
            self.tracer.wait([(req.source, len(req.data))])
        return req.data

    # ---- collectives (apps/mp/collectives.py) -------------------------------------------
    @contextlib.contextmanager
    def collective(self, name: str = "collective") -> Iterator[None]:
        """Mark a collective phase for the agent (HYBRID boosts during it, Yu & Byun 2011 §2.3.2).

        Nested collectives (allreduce = reduce + bcast) count as the outermost
        one; errors inside say which, e.g. "rank 0: barrier 12: lost rank 1: ...".
        """
        self._in_collective += 1
        if self._in_collective == 1:
            n = self._coll_count.get(name, 0)
            self._coll_count[name] = n + 1
            self._where = f"{name} {n}"
            self.page.set_collective(True)
            if self.nic is not None:
                self.nic.collective(True)
            if self.tracer is not None:
                self.tracer.coll(True)
        try:
            yield
        finally:
            self._in_collective -= 1
            if self._in_collective == 0:
                self._where = ""
                self.page.set_collective(False)
                if self.nic is not None:
                    self.nic.collective(False)
                if self.tracer is not None:
                    self.tracer.coll(False)

    def barrier(self, stop: bool = False) -> bool:
        """All ranks wait for each other; returns rank 0's ``stop`` on every rank."""
        from apps.mp import collectives

        return collectives.barrier(self, stop)

    def bcast(self, data: Payload, root: int = 0) -> bytes:
        """``root``'s data on every rank (the others' ``data`` is ignored)."""
        from apps.mp import collectives

        return collectives.bcast(self, data, root)

    def reduce(self, values: Sequence[float], op: str = "sum", root: int = 0) -> list[float] | None:
        """Element-wise ``op`` (sum, max, min, prod) of every rank's values, at ``root``."""
        from apps.mp import collectives

        return collectives.reduce(self, values, op, root)

    def allreduce(self, values: Sequence[float], op: str = "sum") -> list[float]:
        """``reduce`` whose result every rank gets."""
        from apps.mp import collectives

        return collectives.allreduce(self, values, op)

    def alltoall(self, blocks: Sequence[Payload]) -> list[bytes]:
        """Send ``blocks[j]`` to rank j (one size for all); returns the block from each rank."""
        from apps.mp import collectives

        return collectives.alltoall(self, blocks)

    def alltoallv(self, blocks: Sequence[Payload]) -> list[bytes]:
        """``alltoall`` with a size per destination."""
        from apps.mp import collectives

        return collectives.alltoallv(self, blocks)

    # ---- the progress engine -----------------------------------------------------------
    def _wait_until(self, reqs: Sequence[Request], sending: bool) -> None:
        """Make progress until every request in ``reqs`` is done, spinning then blocking."""
        spin_ns = self.mode.spin_ns(sending)
        t0 = time.perf_counter_ns()
        blocked = spin_ns <= 0
        page, stats = self.page, self.stats
        page.set_wait(nicproto.WAIT_BLOCKED if blocked else nicproto.WAIT_SPINNING)
        if blocked:
            stats.blocks += 1

        def done() -> bool:
            return all(r.done for r in reqs)

        try:
            self._progress(0)
            while not done():
                if self._lost:
                    self._check_lost(reqs)
                if blocked:
                    self._progress(self._block_timeout_ms())
                    continue
                stats.spin_polls += 1
                self._progress(0)
                if time.perf_counter_ns() - t0 >= spin_ns:
                    blocked = True
                    stats.blocks += 1
                    page.set_wait(nicproto.WAIT_BLOCKED)
        finally:
            page.set_wait(nicproto.WAIT_COMPUTING)

    def _block_timeout_ms(self) -> int:
        """How long a blocked wait may sleep in poll(): until the next held message is due."""
        if not self._held:
            return -1
        left_ns = min(c.held[0][0] for c in self._conns if c is not None and c.held)
        left_ns -= time.time_ns()
        if left_ns >= 1_000_000:
            return left_ns // 1_000_000  # poll() counts whole ms; the rest is slept below
        if left_ns > 0:
            time.sleep(left_ns / 1e9)
        return 0

    def _progress(self, timeout_ms: int) -> None:
        for fd, ev in self._poll.poll(timeout_ms):
            c = self._by_fd.get(fd)
            if c is None or c.closed:
                continue
            if ev & select.POLLOUT:
                self._flush(c)
            if ev & _POLLIN:
                self._read(c)
        if self._held:
            self._release_due()

    def _write(self, c: _Conn, parts: list[memoryview]) -> list[memoryview]:
        """Write what the socket takes; return what is left."""
        while parts:
            try:
                n = c.sock.sendmsg(parts) if len(parts) > 1 else c.sock.send(parts[0])
            except (BlockingIOError, InterruptedError):
                return parts
            except OSError as e:
                self._mark_lost(c, _why(e, "send"))
                raise self._err(self._lost_msg(c)) from None
            while n and parts:
                if n >= len(parts[0]):
                    n -= len(parts[0])
                    parts.pop(0)
                else:
                    parts[0] = parts[0][n:]
                    n = 0
        return parts

    def _flush(self, c: _Conn) -> None:
        while c.out:
            parts, req = c.out[0]
            left = self._write(c, parts)
            if left:
                c.out[0] = (left, req)
                return
            c.out.popleft()
            req._complete()
        self._poll.modify(c.fd, _POLLIN)

    def _read(self, c: _Conn) -> None:
        """Read everything the socket has now; parse whole frames as they complete."""
        while True:
            if c.big is not None:  # the rest of a large payload, straight into its buffer
                n = self._recv_into(c, memoryview(c.big)[c.got :], "in the middle of a message")
                if n is None:
                    return
                c.got += n
                if c.got < len(c.big):
                    continue
                assert c.cur is not None
                self._arrived(c, c.cur, bytes(c.big))
                c.big, c.cur, c.got = None, None, 0
                continue
            if c.rstart == c.rend:
                c.rstart = c.rend = 0
            elif _RBUF - c.rend < _COMPACT:
                left = c.rend - c.rstart
                c.rbuf[:left] = c.rbuf[c.rstart : c.rend]  # a copy: the ranges may overlap
                c.rstart, c.rend = 0, left
            room = _RBUF - c.rend
            n = self._recv_into(c, c.rview[c.rend :], "(did it exit or crash?)")
            if n is None:
                return
            c.rend += n
            self._parse(c)
            if n < room:
                return  # the socket had less than we could take: it is drained

    def _recv_into(self, c: _Conn, into: memoryview, eof_note: str) -> int | None:
        """Bytes read into ``into``; None when the socket is drained or the peer is gone."""
        try:
            n = c.sock.recv_into(into)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            self._mark_lost(c, _why(e, "receive"))
            return None
        if n == 0:
            self._mark_lost(c, f"connection closed {eof_note}")
            return None
        return n

    def _parse(self, c: _Conn) -> None:
        buf, view = c.rbuf, c.rview
        while c.rend - c.rstart >= frame.HEADER_SIZE:
            try:
                h = frame.unpack(buf, c.rstart, f"rank {c.peer}")
            except MPError as e:
                self._mark_lost(c, str(e))
                raise self._err(str(e)) from None
            if h.kind != frame.DATA or h.src != c.peer:
                why = (
                    f"bad frame from rank {c.peer}: kind {h.kind}, expected DATA ({frame.DATA})"
                    if h.kind != frame.DATA
                    else f"bad frame from rank {c.peer}: src {h.src} on rank {c.peer}'s connection"
                )
                self._mark_lost(c, why)
                raise self._err(why)
            body = c.rstart + frame.HEADER_SIZE
            avail = c.rend - body
            if avail >= h.size:
                c.rstart = body + h.size
                self._arrived(c, h, bytes(view[body : c.rstart]))
                continue
            big = bytearray(h.size)
            big[:avail] = view[body : c.rend]
            c.big, c.cur, c.got = big, h, avail
            c.rstart = c.rend = 0
            return

    def _arrived(self, c: _Conn, h: frame.Header, payload: bytes) -> None:
        self.stats.on_arrival(h.size, h.erl_us)
        if self.link is not None:
            now = time.time_ns()
            due = self.link.due_ns(h.size, h.send_ns, now, c.last_due, self.rng)
            c.last_due = due
            if due > now or c.held:
                c.held.append((due, h.tag, payload))
                self._held += 1
                return
        self._deliver(c.peer, h.tag, payload)

    def _release_due(self) -> None:
        now = time.time_ns()
        for c in self._conns:
            if c is None:
                continue
            while c.held and c.held[0][0] <= now:
                _due, tag, payload = c.held.popleft()
                self._held -= 1
                self._deliver(c.peer, tag, payload)

    def _deliver(self, src: int, tag: int, payload: bytes) -> None:
        for i, r in enumerate(self._posted):
            if (r.peer == ANY_SOURCE or r.peer == src) and (
                r.tag == tag or (r.tag == ANY_TAG and tag >= 0)
            ):
                del self._posted[i]
                r._complete(payload, src, tag)
                return
        self._unexpected.append((src, tag, payload))
        self.page.set_unexpected(len(self._unexpected))

    def _record_md(self, req: Request, wait_start_ns: int) -> None:
        req.md = True
        self.stats.on_receive(req.done_ns - wait_start_ns)

    # ---- errors --------------------------------------------------------------------------
    def _err(self, msg: str) -> MPError:
        """One line: this rank, the collective it is in (if any), what went wrong."""
        where = f"{self._where}: " if self._where else ""
        return MPError(f"rank {self.rank}: {where}{msg}")

    def _check_peer(self, peer: int, what: str) -> None:
        if not isinstance(peer, int) or not 0 <= peer < self.size:
            raise self._err(f"cannot {what} rank {peer}: the job has ranks 0..{self.size - 1}")
        if self.size > 1 and not self._opened:
            raise self._err("the communicator is not open (use `with comm:` or comm.open())")

    def _check_tag(self, tag: int, what: str) -> None:
        if not isinstance(tag, int) or not 0 <= tag <= MAX_TAG:
            raise self._err(
                f"cannot {what} with tag {tag}: user tags are 0..{MAX_TAG} "
                "(negative tags belong to the collectives)"
            )

    def _mark_lost(self, c: _Conn, why: str) -> None:
        if c.closed:
            return
        c.closed, c.close_reason = True, why
        self._lost = True
        with contextlib.suppress(OSError, KeyError):
            self._poll.unregister(c.fd)
        c.sock.close()

    def _lost_msg(self, c: _Conn) -> str:
        return f"lost rank {c.peer}: {c.close_reason or 'connection closed'}"

    def _check_lost(self, reqs: Sequence[Request]) -> None:
        """Fail a wait that can never complete because its peer has gone."""
        for r in reqs:
            if r.done:
                continue
            if r.peer == ANY_SOURCE:
                live = [c for c in self._conns if c is not None and not c.closed]
                if self.size > 1 and not live and not self._held:
                    gone = ", ".join(str(c.peer) for c in self._conns if c is not None)
                    raise self._err(f"every other rank has gone (ranks {gone})")
                continue
            c = self._conns[r.peer]
            if c is not None and c.closed and not c.held:
                raise self._err(self._lost_msg(c))

    # ---- report ----------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """Message counts, bytes, MD count/mean/p50/p99 (µs), header ERLs seen, settings."""
        out = self.stats.summary()
        out.update(
            {
                "wait": {
                    "recv": self.mode.recv,
                    "send": self.mode.send,
                    "spin_us": self.mode.spin_us,
                },
                "link_emulation": self.link.describe() if self.link is not None else None,
                "nic": self.nic is not None,
            }
        )
        return out


def _why(e: OSError, what: str) -> str:
    if e.errno in (errno.ECONNRESET, errno.EPIPE):
        return "connection reset (did it exit or crash?)"
    return f"{what} failed ({e.strerror or e})"
