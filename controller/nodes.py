"""The controller's side of the agent channel: one AgentClient per node.

Wiseman & Feitelson 2003 §3.1 (Fig. 5): at every context switch the master tells every slave
what to run and the slaves answer with the CPU time their processes used. The
pool does exactly that round: :meth:`AgentPool.quantum` *sends* the command to
every agent first and only then collects the acks, so the agents apply it at
nearly the same instant (the skew we measure is the spread of their apply
times, not the sum of round trips). In time-triggered mode the command carries
the instant to apply it at (``at``, agent/plan.py) and is sent ahead of it, so
the agents' thaws no longer depend on when each frame arrives.

Other duties: connect with retry and reconnect in the background (a thread per
attempt: a node cut off the network drops SYNs, and a blocking connect stalled
every quantum for the connect timeout, issue 13's partition test), collect the
unsolicited ``job_event`` frames, and keep every agent's fail-safe quiet with
heartbeats whenever no other frame went out recently (agents thaw everything
after 2 s of silence; that must only happen when the controller is gone).

Whoever needs to set an agent up after every (re)connect -- the scheduler
sends the ``local_policy`` request (docs/cdc.md) -- sets :attr:`on_connect`;
it is called with the node's name and the agent's hello data.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent import wire
from agent.client import AgentClient, AgentError, readable
from common.errors import CoschedError

log = logging.getLogger("controller.nodes")

HEARTBEAT_EVERY = 0.5  # well under the agents' default 2 s fail-safe
RECONNECT_EVERY = 1.0
# Error codes after which an agent closes the connection (agent/server.py
# refuse_and_close: the frame itself was refused, e.g. an agent too old to know
# the message type); any other error reply leaves the connection open.
STREAM_FATAL = frozenset(
    {"malformed", "bad_magic", "bad_version", "too_large", "bad_mac", "replayed"}
)

OnConnect = Callable[[str, Mapping[str, Any]], None]


class AgentsUnreachable(CoschedError, ConnectionError):
    """Agents that did not answer within the start-up deadline (one line, with the fix)."""


# The fields of a node's quantum ack the scheduler reads (folded by controller/acks.py
# ``AckFolder``, at the controller or at a relay).
ACK_FIELDS = frozenset(
    {
        "cpu_ns",
        "io_bytes",  # block I/O bytes per job, from agents that measure them (issue 31)
        "net_bytes",  # TCP bytes per job (agent/netuse.py)
        "errors",
        "applied_monotonic_ns",
        "thawed_realtime_ns",
        "freeze_confirm_s",
        "mode",
        "lateness_s",
        "late",
    }
)


@dataclass(frozen=True)
class NodeInfo:
    """A node as the controller needs it: where its agent listens, its data IP, CPUs."""

    name: str
    address: tuple[str, int]
    data_ip: str
    capacity: float = 1.0  # CPUs the node may use (cpuset size or CFS quota/period)


@dataclass
class QuantumResult:
    """One node's answer to a quantum command: the ack data or why there is none."""

    node: str
    ack: dict[str, Any] | None
    error: str | None = None
    sent_ns: int = 0


class Pool(Protocol):
    """What the scheduler needs from the agents (the real pool or a unit-test fake)."""

    nodes: list[NodeInfo]
    on_connect: OnConnect | None

    def connected(self) -> dict[str, bool]: ...

    def quantum(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        *,
        measure: Sequence[str] | None = None,
    ) -> dict[str, QuantumResult]: ...

    def launch(
        self,
        node: str,
        job_id: str,
        argv: list[str],
        *,
        rank: int,
        size: int,
        env: dict[str, str],
        start_frozen: bool,
        cwd: str | None,
        user: str | None = None,
    ) -> dict[str, Any]: ...

    def kill(self, node: str, job_id: str) -> dict[str, Any]: ...

    def status(self, node: str) -> dict[str, Any] | None: ...

    def local_policy(self, node: str, data: dict[str, Any]) -> dict[str, Any]: ...

    def agent_info(self, node: str) -> dict[str, Any]: ...

    def events(self) -> list[dict[str, Any]]: ...

    def maintain(self) -> None: ...


def launch_data(
    node: str,
    job_id: str,
    argv: list[str],
    rank: int,
    size: int,
    env: dict[str, str],
    start_frozen: bool,
    cwd: str | None,
    user: str | None = None,
) -> dict[str, Any]:
    """The launch request's data (agent/wire.py SCHEMAS); ``user``: who the ranks run as."""
    data: dict[str, Any] = {
        "node": node,
        "job_id": job_id,
        "argv": argv,
        "ranks": [rank],
        "env": env,
        "start_frozen": start_frozen,
        "size": size,
    }
    if cwd is not None:
        data["cwd"] = cwd
    if user is not None:
        data["user"] = user
    return data


class AgentPool:
    """Real agents over TCP (agent/wire.py, HMAC-authenticated)."""

    def __init__(
        self,
        nodes: list[NodeInfo],
        key: bytes,
        *,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes = nodes
        self.key = key
        self.timeout = timeout
        self.clock = clock
        # A quantum's acks are awaited at most this long (one deadline for all nodes):
        # half the request timeout, so that one silent node never keeps the others
        # waiting for their next frame as long as their 2 s fail-safe.
        self.ack_timeout = timeout / 2
        self.clients: dict[str, AgentClient | None] = {n.name: None for n in nodes}
        self._connecting: set[str] = set()
        self._connected_q: queue.SimpleQueue[tuple[str, AgentClient, dict[str, Any] | None, str]]
        self._connected_q = queue.SimpleQueue()
        self._closed = False
        self._last_sent: dict[str, float] = {n.name: 0.0 for n in nodes}
        self._next_try: dict[str, float] = {n.name: 0.0 for n in nodes}
        self._by_name = {n.name: n for n in nodes}
        self._events: list[dict[str, Any]] = []
        self._last_error: dict[str, str] = {}
        self.on_connect: OnConnect | None = None
        self.last_fanout_s = 0.0  # how long the last quantum's sends took
        self.last_fanout_cpu_s = 0.0  # and the CPU they cost this thread

    # ---- connections -------------------------------------------------------
    def connect_all(self, deadline_s: float = 10.0, require_all: bool = True) -> list[str]:
        """Connect to every agent, retrying until ``deadline_s``.

        Returns the nodes still missing then (the background reconnect keeps trying
        them). Raises :class:`AgentsUnreachable` when none answered, or when one is
        missing and ``require_all``.
        """
        end = self.clock() + deadline_s
        while True:
            for n in self.nodes:
                if self.clients[n.name] is None:
                    self._try_connect(n)
            missing = [n for n, c in self.clients.items() if c is None]
            if not missing:
                return []
            if self.clock() > end:
                if require_all or len(missing) == len(self.nodes):
                    raise self._unreachable(missing, deadline_s)
                return missing
            time.sleep(0.1)

    def unreachable_line(self, missing: list[str]) -> str:
        """One line naming the missing agents and why (for a warning)."""
        return str(self._unreachable(missing, 0).args[0]).replace(" after 0 s", "")

    def _unreachable(self, missing: list[str], waited_s: float) -> AgentsUnreachable:
        name = missing[0]
        host, port = self._by_name[name].address
        why = self._last_error.get(name)
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if missing[1:] else ""
        return AgentsUnreachable(
            f"agent {name} at {host}:{port} unreachable after {waited_s:g} s"
            + (f": {why}" if why else "")
            + more,
            fix="is the cluster up? check `cosched cluster status` (or `cosched cluster up`)",
        )

    def _try_connect(self, n: NodeInfo) -> bool:
        """Connect to ``n`` now, blocking (start-up)."""
        c, hello, err = self._connect(n)
        return self._install(n, c, hello, err)

    def _connect(self, n: NodeInfo) -> tuple[AgentClient, dict[str, Any] | None, str]:
        c = AgentClient(n.address, self.key, sender="controller", timeout=self.timeout)
        try:
            return c, c.connect(), ""
        except (OSError, wire.WireError, AgentError, TimeoutError) as e:
            c.close()
            return c, None, getattr(e, "strerror", None) or str(e) or type(e).__name__

    def _connect_in_background(self, n: NodeInfo) -> None:
        """One attempt in a thread; :meth:`_collect_connections` installs the result."""

        def attempt() -> None:
            c, hello, err = self._connect(n)
            if self._closed:
                c.close()
                return
            self._connected_q.put((n.name, c, hello, err))

        self._connecting.add(n.name)
        threading.Thread(target=attempt, name=f"connect-{n.name}", daemon=True).start()

    def _collect_connections(self) -> None:
        while True:
            try:
                name, c, hello, err = self._connected_q.get_nowait()
            except queue.Empty:
                return
            self._connecting.discard(name)
            self._install(self._by_name[name], c, hello, err)

    def _install(self, n: NodeInfo, c: AgentClient, hello: dict[str, Any] | None, err: str) -> bool:
        if hello is None:
            self._next_try[n.name] = self.clock() + RECONNECT_EVERY
            self._last_error[n.name] = err
            log.debug("agent %s at %s:%d not reachable: %s", n.name, *n.address, err)
            return False
        if self._closed or self.clients[n.name] is not None:
            c.close()
            return False
        if hello.get("node") not in (None, n.name):
            c.close()
            log.error("agent at %s:%d says it is %r, not %r", *n.address, hello["node"], n.name)
            self._last_error[n.name] = f"the agent there is {hello['node']!r}"
            self._next_try[n.name] = self.clock() + RECONNECT_EVERY
            return False
        self.clients[n.name] = c
        self._last_sent[n.name] = self.clock()
        log.info("connected to agent %s at %s:%d", n.name, *n.address)
        if self.on_connect is not None:
            self.on_connect(n.name, hello)
        return self.clients[n.name] is not None

    def _drop(self, node: str, why: object, level: int = logging.WARNING) -> None:
        c = self.clients.get(node)
        if c is not None:
            # Keep events that arrived before the break.
            self._events.extend(m.data for m in c.events)
            # Discard what is still unsent: on a link that heals, the kernel would
            # otherwise deliver the stale quantum frames, and the agent would apply
            # plans seconds old (freezing jobs nobody schedules) before it saw the FIN.
            sock = getattr(c, "sock", None)
            with contextlib.suppress(OSError):
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        self.clients[node] = None
        self._next_try[node] = self.clock() + RECONNECT_EVERY
        log.log(level, "lost agent %s: %s", node, why)

    def connected(self) -> dict[str, bool]:
        return {n: c is not None for n, c in self.clients.items()}

    def agent_info(self, node: str) -> dict[str, Any]:
        """The connected agent's hello data (node, pid, backend, ...); {} if not connected."""
        c = self.clients.get(node)
        return dict(c.hello) if c is not None else {}

    def close(self) -> None:
        self._closed = True
        for n in list(self.clients):
            c = self.clients[n]
            if c is not None:
                c.close()
            self.clients[n] = None
        while True:  # attempts that finished meanwhile
            try:
                self._connected_q.get_nowait()[1].close()
            except queue.Empty:
                break

    def sockets(self) -> list[tuple[socket.socket, str]]:
        """Sockets to watch in the main selector (events arrive unsolicited)."""
        return [(c.sock, n) for n, c in self.clients.items() if c is not None and c.sock]

    # ---- the quantum round ----------------------------------------------
    def quantum(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        start: float | None = None,
        measure: Sequence[str] | None = None,
    ) -> dict[str, QuantumResult]:
        """Send every node its command, then collect every ack (Wiseman & Feitelson 2003 Fig. 5).

        With ``at`` (CLOCK_REALTIME seconds) the command is a time-triggered
        plan: every agent applies it at that instant and acks afterwards, so
        the acks are awaited until ``at`` plus the usual timeout. ``start`` is
        the round's start as the agents see it (a relay passes the controller's).
        """
        t0, c0 = time.time(), time.thread_time()
        start = t0 if start is None else start
        sent: dict[str, tuple[AgentClient, int, int]] = {}
        out: dict[str, QuantumResult] = {}
        for node, jobs in commands.items():
            c = self.clients.get(node)
            if c is None:
                out[node] = QuantumResult(node, None, "not connected")
                continue
            try:
                seq = c.send(wire.QUANTUM, c.quantum_message(node, q, jobs, start, at, measure))
            except OSError as e:
                self._drop(node, e)
                out[node] = QuantumResult(node, None, f"send failed: {e}")
                continue
            sent[node] = (c, seq, time.monotonic_ns())
            self._last_sent[node] = self.clock()
        # the fan-out alone: every command written (benchmarks/control_scale.py)
        self.last_fanout_s = time.time() - t0
        self.last_fanout_cpu_s = time.thread_time() - c0
        # one deadline for every ack: n silent nodes must not stall the round n times
        deadline = time.time() + self.ack_timeout + (max(0.0, at - t0) if at is not None else 0.0)
        for node, (c, seq, sent_ns) in sent.items():
            wait = max(0.0, deadline - time.time())
            try:
                reply = c.wait_reply(seq, wait)
                out[node] = QuantumResult(node, reply.data, None, sent_ns)
            except AgentError as e:
                out[node] = QuantumResult(node, None, f"{e.code}: {e.reason}", sent_ns)
            except (OSError, TimeoutError, wire.WireError) as e:
                self._drop(node, e)
                out[node] = QuantumResult(node, None, f"no ack: {e}", sent_ns)
        return out

    # ---- plain requests ---------------------------------------------------
    def request(self, node: str, mtype: str, data: dict[str, Any]) -> dict[str, Any]:
        """One request to one agent; AgentError if it refuses, ConnectionError if it is gone."""
        return self._request(node, mtype, data)

    def _request(self, node: str, mtype: str, data: dict[str, Any]) -> dict[str, Any]:
        c = self.clients.get(node)
        if c is None:
            raise ConnectionError(f"agent {node} is not connected")
        try:
            reply = c.request(mtype, data, self.timeout)
        except (OSError, TimeoutError, wire.WireError) as e:
            self._drop(node, e)
            raise ConnectionError(f"agent {node}: {e}") from None
        self._last_sent[node] = self.clock()
        return reply.data

    def launch(
        self,
        node: str,
        job_id: str,
        argv: list[str],
        *,
        rank: int,
        size: int,
        env: dict[str, str],
        start_frozen: bool,
        cwd: str | None,
        user: str | None = None,
    ) -> dict[str, Any]:
        data = launch_data(node, job_id, argv, rank, size, env, start_frozen, cwd, user)
        return self._request(node, wire.LAUNCH, data)

    def kill(self, node: str, job_id: str) -> dict[str, Any]:
        return self._request(node, wire.KILL, {"node": node, "job_id": job_id})

    def local_policy(self, node: str, data: dict[str, Any]) -> dict[str, Any]:
        """Send the node's local scheme (docs/cdc.md); AgentError if the agent refuses.

        An agent that refuses the frame itself (one older than the request)
        closes the connection: it is dropped here and reconnected at once.
        """
        try:
            return self._request(node, wire.LOCAL_POLICY, data)
        except AgentError as e:
            if e.code in STREAM_FATAL:
                self._drop(node, f"it refused the local_policy frame ({e.code})", logging.INFO)
                self._next_try[node] = self.clock()
            raise

    def status(self, node: str) -> dict[str, Any] | None:
        try:
            return self._request(node, wire.STATUS, {"node": node})
        except (ConnectionError, AgentError) as e:
            log.warning("status of %s: %s", node, e)
            return None

    # ---- background duties --------------------------------------------------
    def events(self) -> list[dict[str, Any]]:
        """job_event data received so far (reads what is waiting, never blocks)."""
        for node, c in list(self.clients.items()):
            if c is None or c.sock is None:
                continue
            try:
                if readable(c.sock, 0):
                    c.poll(0)
            except (OSError, wire.WireError, AgentError) as e:
                self._drop(node, e)
                continue
            while c.events:
                self._events.append(c.events.popleft().data)
        out, self._events = self._events, []
        return out

    def maintain(self, every: float = HEARTBEAT_EVERY) -> None:
        """Reconnect lost agents; heartbeat the ones nothing was sent to for ``every`` s."""
        now = self.clock()
        self._collect_connections()
        for n in self.nodes:
            if (
                self.clients[n.name] is None
                and n.name not in self._connecting
                and now >= self._next_try[n.name]
            ):
                self._connect_in_background(n)
        due = [
            (name, c)
            for name, c in self.clients.items()
            if c is not None and now - self._last_sent[name] >= every
        ]
        pending: list[tuple[str, AgentClient, int]] = []
        for name, c in due:
            try:
                pending.append((name, c, c.send(wire.HEARTBEAT, {})))
                self._last_sent[name] = now
            except OSError as e:
                self._drop(name, e)
        deadline = time.monotonic() + self.ack_timeout
        for name, c, seq in pending:
            try:
                c.wait_reply(seq, max(0.0, deadline - time.monotonic()))
            except (OSError, TimeoutError, wire.WireError, AgentError) as e:
                self._drop(name, e)

    def node(self, name: str) -> NodeInfo:
        return self._by_name[name]
