"""The controller's side of a relay tree: the scheduler's pool, over relays (issue 15).

:class:`RelayPool` offers what :class:`controller.nodes.Pool` promises -- a
quantum round over every node, launch, kill, status, local policy, job events,
heartbeats -- but talks to a few relays (controller/relay.py) instead of every
agent. A quantum is one ``quantum_batch`` frame per relay carrying its nodes'
commands, sent to every relay before any ack is read (Wiseman & Feitelson 2003 Fig. 5's
send-all-then-collect, one level up); each relay answers with its nodes' acks in
one frame. The connection to each relay is an ordinary :class:`AgentPool`
client (HMAC session, reconnect, heartbeats).

A node counts as connected while its relay is; a node whose agent the relay
cannot reach gets that error in the quantum's results, as a lost agent does
without relays.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent import wire
from agent.client import AgentClient, AgentError
from controller.acks import AckSummary
from controller.nodes import AgentPool, NodeInfo, OnConnect, QuantumResult, launch_data

log = logging.getLogger("controller.relaypool")


@dataclass(frozen=True)
class RelayInfo:
    """A relay: its name, where it listens, the names of the nodes behind it."""

    name: str
    address: tuple[str, int]
    nodes: tuple[str, ...]


class RelayPool:
    """The scheduler's pool over relays; a drop-in for :class:`AgentPool`."""

    def __init__(
        self,
        nodes: list[NodeInfo],
        relays: list[RelayInfo],
        key: bytes,
        *,
        timeout: float = 2.0,
    ) -> None:
        self.nodes = nodes
        self.relays = relays
        self.timeout = timeout
        self.relay_of: dict[str, str] = {}
        for r in relays:
            for n in r.nodes:
                if n in self.relay_of:
                    twice = f"{self.relay_of[n]}, {r.name}"
                    raise ValueError(f"node {n} is behind two relays ({twice})")
                self.relay_of[n] = r.name
        missing = [n.name for n in nodes if n.name not in self.relay_of]
        if missing:
            raise ValueError(f"nodes behind no relay: {', '.join(missing[:5])}")
        # The relays are reached as agents are: same client, reconnect and heartbeats.
        self.up = AgentPool(
            [NodeInfo(r.name, r.address, r.address[0], 0.0) for r in relays], key, timeout=timeout
        )
        self.up.on_connect = self._relay_connected
        self.on_connect: OnConnect | None = None
        self._hellos: dict[str, dict[str, Any]] = {}
        self.last_fanout_s = 0.0
        self.last_fanout_cpu_s = 0.0

    # ---- connections ----------------------------------------------------------
    def connect_all(self, deadline_s: float = 10.0, require_all: bool = True) -> list[str]:
        """Connect to every relay; returns the nodes behind relays still missing."""
        gone = set(self.up.connect_all(deadline_s, require_all))
        return [n.name for n in self.nodes if self.relay_of[n.name] in gone]

    def unreachable_line(self, missing: list[str]) -> str:
        relays = sorted({self.relay_of[n] for n in missing})
        return f"{len(missing)} node(s) behind unreachable relay(s) {', '.join(relays)}"

    def _relay_connected(self, relay: str, hello: Mapping[str, Any]) -> None:
        for node, h in dict(hello.get("agents") or {}).items():
            self._agent_connected(str(node), h)

    def _agent_connected(self, node: str, hello: Mapping[str, Any]) -> None:
        self._hellos[node] = dict(hello)
        if self.on_connect is not None:
            self.on_connect(node, hello)

    def connected(self) -> dict[str, bool]:
        up = self.up.connected()
        return {n.name: up.get(self.relay_of[n.name], False) for n in self.nodes}

    def agent_info(self, node: str) -> dict[str, Any]:
        if not self.up.connected().get(self.relay_of.get(node, ""), False):
            return {}
        return dict(self._hellos.get(node, {}))

    def close(self) -> None:
        self.up.close()

    def sockets(self) -> list[tuple[Any, str]]:
        return self.up.sockets()

    # ---- the quantum round ----------------------------------------------------
    def quantum(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        *,
        measure: Sequence[str] | None = None,
    ) -> dict[str, QuantumResult]:
        """Every node's outcome: an empty ack for a node its relay reports applied (a relay
        sends a summary, not the acks: :meth:`quantum_summary`), else why not."""
        _, failed = self.quantum_summary(q, commands, at, measure=measure)
        return {
            n: QuantumResult(n, None, failed[n]) if n in failed else QuantumResult(n, {})
            for n in commands
        }

    def quantum_summary(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        measure: Sequence[str] | None = None,
    ) -> tuple[AckSummary, dict[str, str]]:
        """Every relay its nodes' commands in one frame, then every relay's summary of its
        nodes' acks (controller/acks.py), merged; and the nodes without an ack, with why."""
        start, c0 = time.time(), time.thread_time()
        by_relay: dict[str, dict[str, dict[str, int]]] = {}
        failed: dict[str, str] = {}
        for node, jobs in commands.items():
            r = self.relay_of.get(node)
            if r is None:
                failed[node] = "behind no relay"
                continue
            by_relay.setdefault(r, {})[node] = jobs
        sent: dict[str, tuple[AgentClient, int]] = {}
        for r, cmds in by_relay.items():
            c = self.up.clients.get(r)
            if c is None:
                failed.update(dict.fromkeys(cmds, f"relay {r} not connected"))
                continue
            data: dict[str, Any] = {"q": q, "start": start, "commands": cmds}
            if at is not None:
                data["at"] = at
            if measure is not None:
                data["measure"] = sorted(measure)  # passed on to the agents (agent/client.py)
            try:
                sent[r] = (c, c.send(wire.QUANTUM_BATCH, data))
            except OSError as e:
                self.up._drop(r, e)
                failed.update(dict.fromkeys(cmds, f"relay {r}: send failed: {e}"))
                continue
            self.up._last_sent[r] = self.up.clock()
        self.last_fanout_s = time.time() - start
        self.last_fanout_cpu_s = time.thread_time() - c0
        total = AckSummary()
        for r, (c, seq) in sent.items():
            # the relay waits up to its own timeout per agent, and ``at`` first
            wait = 2 * self.timeout + (max(0.0, at - time.time()) if at is not None else 0.0)
            cmds = by_relay[r]
            try:
                reply = c.wait_reply(seq, wait).data
                part = AckSummary.from_wire(reply["summary"])
                errors = dict(reply.get("errors") or {})
            except AgentError as e:
                failed.update(dict.fromkeys(cmds, f"{e.code}: {e.reason}"))
                continue
            except (OSError, TimeoutError, wire.WireError) as e:
                self.up._drop(r, e)
                failed.update(dict.fromkeys(cmds, f"relay {r}: no ack: {e}"))
                continue
            except (KeyError, ValueError, TypeError) as e:
                failed.update(dict.fromkeys(cmds, f"relay {r}: malformed summary: {e!r}"))
                continue
            total.add(part)
            for n, why in errors.items():
                if n in cmds:
                    failed[n] = str(why)
        return total, failed

    # ---- plain requests, forwarded by the node's relay -------------------------
    def request(self, node: str, mtype: str, data: dict[str, Any]) -> dict[str, Any]:
        r = self.relay_of.get(node)
        if r is None:
            raise ConnectionError(f"node {node} is behind no relay")
        try:
            return self.up.request(r, mtype, data)
        except AgentError as e:
            if e.code == "unreachable":
                raise ConnectionError(f"agent {node} (via relay {r}): {e.reason}") from None
            raise

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
        return self.request(node, wire.LAUNCH, data)

    def kill(self, node: str, job_id: str) -> dict[str, Any]:
        return self.request(node, wire.KILL, {"node": node, "job_id": job_id})

    def local_policy(self, node: str, data: dict[str, Any]) -> dict[str, Any]:
        return self.request(node, wire.LOCAL_POLICY, data)

    def status(self, node: str) -> dict[str, Any] | None:
        try:
            return self.request(node, wire.STATUS, {"node": node})
        except (ConnectionError, AgentError) as e:
            log.warning("status of %s: %s", node, e)
            return None

    # ---- background duties ------------------------------------------------------
    def events(self) -> list[dict[str, Any]]:
        out = []
        for ev in self.up.events():
            if ev.get("event") == "agent_connected":  # an agent behind a relay (re)connected
                self._agent_connected(str(ev.get("node")), ev.get("hello") or {})
            else:
                out.append(ev)
        return out

    def maintain(self) -> None:
        self.up.maintain()
