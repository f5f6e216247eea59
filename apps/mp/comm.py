"""One rank's communicator: full-mesh TCP over the data network, point to point.

Seed 002 §4.1 puts a user-level library between the program and the NIC; this
is ours. Ranks learn everything from the launcher's environment (docs/cdc.md:
COSCHED_RANK, _SIZE, _PEERS, _PORT, COSCHED_JOB) and open one connection to
every other rank at start: rank *r* listens on its own data address, connects
to every lower rank and accepts every higher one, each side sending a HELLO
frame (rank, job size, job id) that the other checks.

After that all sockets are non-blocking and one progress engine serves every
call: it reads whatever the kernel has on any socket, cuts frames, matches
them to posted receives by (source, tag) in arrival order -- so messages from
one sender with one tag are received in the order they were sent -- and keeps
the rest in an unexpected queue; it writes what sends could not finish. How a
caller waits for an incomplete request is the waiting action (apps/mp/wait.py).

Message delay (MD, seed 002 §5.3): for every completed receive, the time from
the start of the wait that needed it to the moment it was complete (0 when it
was complete before anyone waited), recorded in the state page the agent
exports (docs/cdc.md).
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent import nicproto
from apps.mp import frame
from apps.mp.errors import MPError
from apps.mp.linkemu import LinkEmu
from apps.mp.nic import NicClient, StatePage
from apps.mp.wait import WaitMode

ANY_SOURCE = -1
ANY_TAG = -(1 << 31)  # user tags are >= 0; collectives use small negative tags
DEFAULT_CONNECT_TIMEOUT = 60.0
_RBUF = 256 * 1024
_POLLIN = select.POLLIN | select.POLLPRI
_POLLERR = select.POLLERR | select.POLLHUP | select.POLLNVAL
_RETRY = 0.05
_HELLO_SIZE_LIMIT = 256


class Request:
    """A pending send or receive; ``data`` is the received payload once done."""

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


@dataclass
class _Conn:
    peer: int
    addr: str
    sock: socket.socket
    fd: int
    rbuf: bytearray = field(default_factory=lambda: bytearray(_RBUF))
    rstart: int = 0
    rend: int = 0
    cur: frame.Header | None = None  # large payload being read straight into ``big``
    big: bytearray | None = None
    got: int = 0
    out: deque[tuple[list[memoryview], Request]] = field(default_factory=deque)
    held: deque[tuple[int, frame.Header, bytes]] = field(default_factory=deque)
    last_due: int = 0
    closed: bool = False
    close_reason: str = ""


@dataclass
class Stats:
    sent: int = 0
    sent_bytes: int = 0
    received: int = 0
    received_bytes: int = 0
    md_ns: list[int] = field(default_factory=list)
    erl_count: int = 0
    erl_sum_us: int = 0
    erl_max_us: int = 0

    MAX_SAMPLES = 200_000


def _port_of(peers: Sequence[str], port: int, rank: int) -> int:
    """Ranks sharing an address (one host) listen on consecutive ports."""
    return port + sum(1 for j in range(rank) if peers[j] == peers[rank])


class Comm:
    """One rank of a job. Use as a context manager, or ``open()`` then ``close()``."""

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
        self.rng = random.Random(seed if seed is not None else (rank * 7919 + os.getpid()))
        self._listener = listener
        self._conns: list[_Conn | None] = [None] * size
        self._by_fd: dict[int, _Conn] = {}
        self._poll = select.poll()
        self._posted: list[Request] = []
        self._unexpected: deque[tuple[int, int, bytes]] = deque()
        self._held = 0
        self.page = StatePage()
        self.nic: NicClient | None = None
        self.stats = Stats()
        self._opened = False
        self._in_collective = 0

    # ---- construction from the launcher's environment -----------------------------
    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Comm:
        """Rank, size, peers, port, waiting actions, link emulation and NIC from COSCHED_*."""
        env = os.environ if env is None else env

        def num(name: str, default: int | None = None) -> int | None:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise MPError(f"environment {name}={raw!r} is not an integer") from None

        size = num("COSCHED_SIZE", 1) or 1
        rank = num("COSCHED_RANK", 0) or 0
        peers_raw = env.get("COSCHED_PEERS", "")
        if peers_raw:
            peers = [p.strip() for p in peers_raw.split(",")]
        else:
            peers = [env.get("COSCHED_RANK0_ADDR", "127.0.0.1")] * size
        kw: dict[str, Any] = dict(
            rank=rank,
            size=size,
            peers=peers,
            port=num("COSCHED_PORT", 0) or 0,
            job=env.get("COSCHED_JOB", ""),
            wait=WaitMode.from_env(env),
            link=LinkEmu.from_env(env),
            nic_path=env.get("COSCHED_NIC_SOCK") or None,
            nic_job=env.get("COSCHED_JOB_ID", ""),
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
        """Bind this rank's listening socket now (tests read the port from it)."""
        if self._listener is None:
            lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            addr, port = self.peers[self.rank], _port_of(self.peers, self.port, self.rank)
            try:
                lst.bind((addr, port))
            except OSError as e:
                lst.close()
                raise MPError(f"rank {self.rank}: cannot listen on {addr}:{port} ({e})") from None
            lst.listen(max(8, self.size))
            self._listener = lst
        return self._listener

    def open(self) -> Comm:
        if self._opened:
            return self
        if self.size > 1:
            deadline = time.monotonic() + self.connect_timeout
            lst = self.listen()
            try:
                for j in range(self.rank):
                    self._connect(j, deadline)
                self._accept_all(lst, deadline)
            except BaseException:
                self._close_sockets()
                raise
            finally:
                lst.close()
                self._listener = None
            for c in self._conns:
                if c is not None:
                    c.sock.setblocking(False)
                    self._poll.register(c.fd, _POLLIN)
        self._opened = True
        if self.nic_path and self.size > 1:
            socks = [(c.peer, c.addr, c.sock) for c in self._conns if c is not None]
            self.nic = NicClient.register(self.nic_path, self.nic_job, self.rank, self.page, socks)
        return self

    def close(self) -> None:
        if self.nic is not None:
            self.nic.close()
            self.nic = None
        self._close_sockets()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._opened = False

    def _close_sockets(self) -> None:
        for c in self._conns:
            if c is not None and not c.closed:
                with contextlib.suppress(OSError, KeyError):
                    self._poll.unregister(c.fd)
                c.sock.close()
                c.closed = True

    def _hello(self) -> bytes:
        job = self.job.encode()[:_HELLO_SIZE_LIMIT]
        return frame.pack(frame.HELLO, self.rank, self.size, len(job), time.time_ns(), 0) + job

    def _read_hello(self, sock: socket.socket, who: str) -> tuple[int, int, str]:
        head = _recv_exact(sock, frame.HEADER_SIZE, who)
        h = frame.unpack(head, 0, who)
        if h.kind != frame.HELLO or h.size > _HELLO_SIZE_LIMIT:
            raise MPError(f"{who}: protocol error, expected HELLO")
        job = _recv_exact(sock, h.size, who).decode(errors="replace")
        return h.src, h.tag, job

    def _check_hello(self, src: int, size: int, job: str, who: str) -> None:
        if size != self.size:
            raise MPError(f"{who}: job size mismatch (it has {size}, this rank {self.size})")
        if job != self.job:
            raise MPError(f"{who}: belongs to job {job!r}, not {self.job!r}")

    def _connect(self, j: int, deadline: float) -> None:
        addr, port = self.peers[j], _port_of(self.peers, self.port, j)
        who = f"rank {j} at {addr}:{port}"
        last: OSError | None = None
        while True:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                s.connect((addr, port))
                break
            except OSError as e:
                s.close()
                last = e
                if time.monotonic() + _RETRY > deadline:
                    raise MPError(
                        f"rank {self.rank}: cannot reach {who} within "
                        f"{self.connect_timeout:g} s ({last}); is rank {j} running?"
                    ) from None
                time.sleep(_RETRY)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(self._hello())
            src, size, job = self._read_hello(s, who)
            if src != j:
                raise MPError(f"{who}: answered as rank {src}")
            self._check_hello(src, size, job, who)
        except (OSError, MPError) as e:
            s.close()
            if isinstance(e, MPError):
                raise
            raise MPError(f"rank {self.rank}: handshake with {who} failed ({e})") from None
        self._add_conn(j, addr, s)

    def _accept_all(self, lst: socket.socket, deadline: float) -> None:
        missing = set(range(self.rank + 1, self.size))
        while missing:
            left = deadline - time.monotonic()
            if left <= 0:
                raise MPError(
                    f"rank {self.rank}: ranks {sorted(missing)} did not connect within "
                    f"{self.connect_timeout:g} s"
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
                self._check_hello(src, size, job, who)
            except MPError as e:
                s.close()
                if "mismatch" in str(e) or "belongs to" in str(e):
                    raise
                continue  # a stray or broken connection: keep waiting for the real one
            except OSError:
                s.close()
                continue
            missing.discard(src)
            self._add_conn(src, addr, s)

    def _add_conn(self, peer: int, addr: str, s: socket.socket) -> None:
        c = _Conn(peer, addr, s, s.fileno())
        self._conns[peer] = c
        self._by_fd[c.fd] = c

    # ---- point to point ----------------------------------------------------------------
    def isend(self, dest: int, data: bytes | bytearray | memoryview, tag: int = 0) -> Request:
        self._check_peer(dest, "send to")
        req = Request(False, dest, tag)
        payload = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        n = len(payload)
        if n > frame.MAX_SIZE:
            raise MPError(f"rank {self.rank}: message of {n} bytes exceeds {frame.MAX_SIZE}")
        self.stats.sent += 1
        self.stats.sent_bytes += n
        if dest == self.rank:
            self._deliver(self.rank, tag, bytes(payload))
            req._complete()
            return req
        c = self._conns[dest]
        assert c is not None
        if c.closed:
            raise MPError(self._lost_msg(c))
        erl = self.nic.erl_us() if self.nic is not None else 0
        head = frame.pack(frame.DATA, self.rank, tag, n, time.time_ns(), erl)
        parts = [memoryview(head), memoryview(payload)] if n else [memoryview(head)]
        if not c.out:
            parts = self._write(c, parts)
        if parts:
            c.out.append((parts, req))
            self._poll.modify(c.fd, _POLLIN | select.POLLOUT)
        else:
            req._complete()
        return req

    def irecv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        if source != ANY_SOURCE:
            self._check_peer(source, "receive from")
        req = Request(True, source, tag)
        for i, (src, t, data) in enumerate(self._unexpected):
            if (source == ANY_SOURCE or src == source) and (tag == ANY_TAG or t == tag):
                del self._unexpected[i]
                self.page.set_unexpected(len(self._unexpected))
                req._complete(data, src, t)
                return req
        self._posted.append(req)
        return req

    def test(self, req: Request) -> bool:
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
        start = time.perf_counter_ns()
        todo = [r for r in reqs if not r.done]
        if todo:
            sending = all(not r.is_recv for r in todo)
            self._wait_until(lambda: all(r.done for r in todo), todo, sending)
        for r in reqs:
            if r.is_recv and not r.md:
                self._record_md(r, start)
        return [r.data for r in reqs]

    def send(self, dest: int, data: bytes | bytearray | memoryview, tag: int = 0) -> None:
        self.wait(self.isend(dest, data, tag))

    def recv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> bytes:
        return self.wait(self.irecv(source, tag))

    def sendrecv(self, dest: int, data: bytes, source: int, tag: int = 0) -> bytes:
        r = self.irecv(source, tag)
        s = self.isend(dest, data, tag)
        self.waitall([s, r])
        return r.data

    # ---- collectives (apps/mp/collectives.py) -------------------------------------------
    @contextlib.contextmanager
    def collective(self) -> Iterator[None]:
        """Mark a collective phase for the agent (HYBRID boosts during it, seed 002 §2.3.2)."""
        self._in_collective += 1
        if self._in_collective == 1:
            self.page.set_collective(True)
            if self.nic is not None:
                self.nic.collective(True)
        try:
            yield
        finally:
            self._in_collective -= 1
            if self._in_collective == 0:
                self.page.set_collective(False)
                if self.nic is not None:
                    self.nic.collective(False)

    def barrier(self, stop: bool = False) -> bool:
        from apps.mp import collectives

        return collectives.barrier(self, stop)

    def bcast(self, data: bytes, root: int = 0) -> bytes:
        from apps.mp import collectives

        return collectives.bcast(self, data, root)

    def reduce(self, values: Sequence[float], op: str = "sum", root: int = 0) -> list[float] | None:
        from apps.mp import collectives

        return collectives.reduce(self, values, op, root)

    def allreduce(self, values: Sequence[float], op: str = "sum") -> list[float]:
        from apps.mp import collectives

        return collectives.allreduce(self, values, op)

    def alltoall(self, blocks: Sequence[bytes]) -> list[bytes]:
        from apps.mp import collectives

        return collectives.alltoall(self, blocks)

    def alltoallv(self, blocks: Sequence[bytes]) -> list[bytes]:
        from apps.mp import collectives

        return collectives.alltoallv(self, blocks)

    # ---- the progress engine -----------------------------------------------------------
    def _wait_until(self, done: Callable[[], bool], reqs: Sequence[Request], sending: bool) -> None:
        spin_ns = self.mode.spin_ns(sending)
        t0 = time.perf_counter_ns()
        blocked = spin_ns <= 0
        self.page.set_wait(nicproto.WAIT_BLOCKED if blocked else nicproto.WAIT_SPINNING)
        try:
            self._progress(0)
            while not done():
                self._check_lost(reqs)
                if not blocked and time.perf_counter_ns() - t0 >= spin_ns:
                    blocked = True
                    self.page.set_wait(nicproto.WAIT_BLOCKED)
                if blocked:
                    self._progress(self._block_timeout_ms())
                else:
                    self._progress(0)
        finally:
            self.page.set_wait(nicproto.WAIT_COMPUTING)

    def _block_timeout_ms(self) -> int:
        if not self._held:
            return -1
        now = time.time_ns()
        due = min(c.held[0][0] for c in self._conns if c is not None and c.held)
        # poll() counts in ms: a message due sooner is waited for by spinning.
        return max(0, (due - now) // 1_000_000)

    def _progress(self, timeout_ms: int) -> None:
        for fd, ev in self._poll.poll(timeout_ms):
            c = self._by_fd.get(fd)
            if c is None or c.closed:
                continue
            if ev & select.POLLOUT:
                self._flush(c)
            if ev & (_POLLIN | _POLLERR):
                self._read(c)
        if self._held:
            self._release_due()

    def _write(self, c: _Conn, parts: list[memoryview]) -> list[memoryview]:
        """Write what the socket takes; return what is left."""
        while parts:
            try:
                n = c.sock.sendmsg(parts)
            except (BlockingIOError, InterruptedError):
                return parts
            except OSError as e:
                self._mark_lost(c, f"send failed ({e})")
                raise MPError(self._lost_msg(c)) from None
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
        sock = c.sock
        while True:
            if c.big is not None:
                try:
                    n = sock.recv_into(memoryview(c.big)[c.got :])
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as e:
                    self._mark_lost(c, f"receive failed ({e})")
                    return
                if n == 0:
                    self._mark_lost(c, "connection closed in the middle of a message")
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
            elif len(c.rbuf) - c.rend < 65536:
                left = c.rend - c.rstart
                c.rbuf[:left] = c.rbuf[c.rstart : c.rend]
                c.rstart, c.rend = 0, left
            room = len(c.rbuf) - c.rend
            try:
                n = sock.recv_into(memoryview(c.rbuf)[c.rend :], room)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._mark_lost(c, f"receive failed ({e})")
                return
            if n == 0:
                self._mark_lost(c, "connection closed (did the rank exit or crash?)")
                return
            c.rend += n
            self._parse(c)
            if n < room:
                return  # the socket had less than we could take: it is drained

    def _parse(self, c: _Conn) -> None:
        buf = c.rbuf
        who = f"rank {c.peer}"
        while c.rend - c.rstart >= frame.HEADER_SIZE:
            h = frame.unpack(buf, c.rstart, who)
            if h.kind != frame.DATA or h.src != c.peer:
                raise MPError(
                    f"bad frame from {who}: kind {h.kind}, src {h.src} on rank {c.peer}'s "
                    "connection"
                )
            body = c.rstart + frame.HEADER_SIZE
            avail = c.rend - body
            if avail >= h.size:
                payload = bytes(buf[body : body + h.size])
                c.rstart = body + h.size
                self._arrived(c, h, payload)
                continue
            big = bytearray(h.size)
            big[:avail] = buf[body : c.rend]
            c.big, c.cur, c.got = big, h, avail
            c.rstart = c.rend = 0
            return

    def _arrived(self, c: _Conn, h: frame.Header, payload: bytes) -> None:
        st = self.stats
        st.erl_count += 1
        st.erl_sum_us += h.erl_us
        st.erl_max_us = max(st.erl_max_us, h.erl_us)
        if self.link is not None:
            now = time.time_ns()
            due = self.link.due_ns(h.size, h.send_ns, now, c.last_due, self.rng)
            c.last_due = due
            if due > now or c.held:
                c.held.append((due, h, payload))
                self._held += 1
                return
        self._deliver(c.peer, h.tag, payload)

    def _release_due(self) -> None:
        now = time.time_ns()
        for c in self._conns:
            if c is None:
                continue
            while c.held and c.held[0][0] <= now:
                _due, h, payload = c.held.popleft()
                self._held -= 1
                self._deliver(c.peer, h.tag, payload)

    def _deliver(self, src: int, tag: int, payload: bytes) -> None:
        self.stats.received += 1
        self.stats.received_bytes += len(payload)
        for i, r in enumerate(self._posted):
            if (r.peer == ANY_SOURCE or r.peer == src) and (r.tag == ANY_TAG or r.tag == tag):
                del self._posted[i]
                r._complete(payload, src, tag)
                return
        self._unexpected.append((src, tag, payload))
        self.page.set_unexpected(len(self._unexpected))

    def _record_md(self, req: Request, wait_start_ns: int) -> None:
        req.md = True
        md = max(0, req.done_ns - wait_start_ns)
        self.page.add_receive(md)
        if len(self.stats.md_ns) < Stats.MAX_SAMPLES:
            self.stats.md_ns.append(md)

    # ---- errors --------------------------------------------------------------------------
    def _check_peer(self, peer: int, what: str) -> None:
        if not isinstance(peer, int) or not 0 <= peer < self.size:
            raise MPError(
                f"rank {self.rank}: cannot {what} rank {peer}: the job has ranks 0..{self.size - 1}"
            )
        if self.size > 1 and not self._opened:
            raise MPError(f"rank {self.rank}: the communicator is not open")

    def _mark_lost(self, c: _Conn, why: str) -> None:
        if c.closed:
            return
        c.closed, c.close_reason = True, why
        with contextlib.suppress(OSError, KeyError):
            self._poll.unregister(c.fd)
        c.sock.close()

    def _lost_msg(self, c: _Conn) -> str:
        return f"rank {self.rank}: lost rank {c.peer}: {c.close_reason or 'connection closed'}"

    def _check_lost(self, reqs: Sequence[Request]) -> None:
        for r in reqs:
            if r.done:
                continue
            if r.peer == ANY_SOURCE:
                live = [c for c in self._conns if c is not None and not c.closed]
                if self.size > 1 and not live and not self._held:
                    raise MPError(f"rank {self.rank}: every other rank has gone")
                continue
            c = self._conns[r.peer]
            if c is not None and c.closed and not c.held:
                raise MPError(self._lost_msg(c))

    # ---- report ----------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        st = self.stats
        md = sorted(st.md_ns)

        def pct(p: float) -> float:
            return md[min(len(md) - 1, round(p / 100 * (len(md) - 1)))] / 1e3 if md else 0.0

        return {
            "messages_sent": st.sent,
            "bytes_sent": st.sent_bytes,
            "messages_received": st.received,
            "bytes_received": st.received_bytes,
            "md_count": self.page.md_count,
            "md_mean_us": round(self.page.md_sum_ns / self.page.md_count / 1e3, 3)
            if self.page.md_count
            else 0.0,
            "md_p50_us": round(pct(50), 3),
            "md_p99_us": round(pct(99), 3),
            "header_erl_mean_us": round(st.erl_sum_us / st.erl_count, 1) if st.erl_count else 0.0,
            "header_erl_max_us": st.erl_max_us,
            "wait": {"recv": self.mode.recv, "send": self.mode.send, "spin_us": self.mode.spin_us},
            "link_emulation": bool(self.link),
            "nic": self.nic is not None,
        }


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
