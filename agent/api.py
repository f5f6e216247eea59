"""What each agent request does: validation, the answer, and the call into the agent's state.

The sockets are agent/server.py; the job state machine is agent/daemon.py,
which the handlers see only through :class:`Node`. A request that is well
formed and authenticated but cannot be carried out is :class:`Refused` (an
error frame with a code; the connection stays open).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent import wire
from agent.failsafe import FailSafe
from agent.jobs import Job, JobError, check_job_id
from agent.local import LocalConfig, LocalPolicyError
from agent.plan import Plan, PlanSlot, TooFar
from agent.server import AgentConn
from common.cgroups import DEFAULT_WEIGHT

log = logging.getLogger("agent")

# (job id, request data, ranks, extra environment, weight, start frozen) -> the reply data
Launch = Callable[[str, dict[str, Any], list[int], dict[str, str], int, bool], dict[str, Any]]
# None: the request is answered later (a plan with an instant: agent/plan.py).
Handler = Callable[[AgentConn, wire.Message], tuple[str, dict[str, Any]] | None]


class Refused(Exception):
    """A well-formed, authenticated request the agent will not carry out."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Replies(Protocol):
    """The agent's server as the handlers use it (agent/server.py)."""

    def send(
        self, conn: AgentConn, mtype: str, data: dict[str, Any], re: int | None = None
    ) -> None: ...

    def send_backlog(self, conn: AgentConn) -> None: ...


class LocalControl(Protocol):
    """The local scheduler as the handlers use it (agent/local.py)."""

    def status(self) -> dict[str, Any]: ...

    def configure(self, cfg: LocalConfig) -> dict[str, Any]: ...

    @property
    def default_tick_ms(self) -> float: ...


class Node(Protocol):
    """The agent as its handlers see it (agent/daemon.py ``Agent``): what they read, and
    the changes they may ask for; nothing else of the daemon."""

    @property
    def node(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def weights_enforced(self) -> bool: ...

    @property
    def tt_wait(self) -> str: ...

    @property
    def realtime(self) -> bool: ...  # SCHED_FIFO granted: orders a time-triggered switch

    @property
    def wakeup(self) -> str: ...  # the loop's wake-up mechanism (agent/realtime.py)

    @property
    def failsafe(self) -> FailSafe: ...  # read only

    @property
    def plans(self) -> PlanSlot: ...  # read only: the pending plan and its counters

    @property
    def last_q(self) -> int | None: ...

    @property
    def jobs(self) -> Mapping[str, Job]: ...

    @property
    def local(self) -> LocalControl: ...

    @property
    def server(self) -> Replies: ...

    def wall(self) -> float: ...

    @property
    def launch(self) -> Launch: ...

    def kill(self, job: Job) -> None: ...

    def apply_now(
        self, q: int, runnable: dict[str, int], measure: frozenset[str] | None = None
    ) -> dict[str, Any]: ...

    def submit_plan(self, plan: Plan) -> dict[str, Any] | None: ...


class AgentAPI:
    """Message type -> handler; replies go out through the agent's server."""

    def __init__(self, agent: Node) -> None:
        self.agent = agent
        self._table = self._handlers()

    def dispatch(self, conn: AgentConn, msg: wire.Message) -> None:
        received_ns = time.monotonic_ns()
        try:
            wire.validate(msg)
            handler = self._table.get(msg.type)
            if handler is None:
                raise Refused("bad_request", f"{msg.type!r} is not a request")
            answer = handler(conn, msg)
        except wire.BadRequest as e:
            log.warning("bad request from %s: %s", conn.peer, e)
            self.agent.server.send(conn, wire.ERROR, {"code": e.code, "reason": str(e)}, msg.seq)
            return
        except Refused as e:
            log.warning("refused %s from %s: %s", msg.type, conn.peer, e.reason)
            self.agent.server.send(conn, wire.ERROR, {"code": e.code, "reason": e.reason}, msg.seq)
            return
        if answer is None:
            return  # the loop answers when it applies the plan
        rtype, data = answer
        if rtype == wire.ACK:
            data["received_monotonic_ns"] = received_ns
        self.agent.server.send(conn, rtype, data, msg.seq)
        if msg.type == wire.HELLO:
            self.agent.server.send_backlog(conn)

    def _handlers(self) -> dict[str, Handler]:
        return {
            wire.HELLO: self._on_hello,
            wire.HEARTBEAT: self._on_heartbeat,
            wire.LAUNCH: self._on_launch,
            wire.QUANTUM: self._on_quantum,
            wire.KILL: self._on_kill,
            wire.STATUS: self._on_status,
            wire.LOCAL_POLICY: self._on_local_policy,
        }

    def _check_node(self, msg: wire.Message) -> None:
        node = msg.data.get("node")
        if node != self.agent.node:
            raise Refused(
                "wrong_node",
                f"{msg.type} addressed to node {node!r}, this is {self.agent.node!r}",
            )

    def _on_hello(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        if conn.established:
            raise Refused("bad_request", "hello on an established connection")
        conn.session.conn = secrets.token_hex(16)
        conn.established = True
        conn.peer_sender = msg.sender
        log.info("session from %s (%s) established", conn.peer, msg.sender)
        return wire.HELLO, {
            "node": self.agent.node,
            "nonce": msg.data["nonce"],
            "conn": conn.session.conn,
            "protocol": wire.VERSION,
            "backend": self.agent.backend,
            "weights_enforced": self.agent.weights_enforced,
            "failsafe_timeout": self.agent.failsafe.timeout,
            "failsafe_active": self.agent.failsafe.active,
            "pid": os.getpid(),
        }

    def _on_heartbeat(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        return wire.HEARTBEAT, {
            "node": self.agent.node,
            "failsafe_active": self.agent.failsafe.active,
        }

    def _on_status(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        if "node" in msg.data:
            self._check_node(msg)
        return wire.OK, {
            "node": self.agent.node,
            "backend": self.agent.backend,
            "weights_enforced": self.agent.weights_enforced,
            "failsafe_active": self.agent.failsafe.active,
            "failsafe_activations": self.agent.failsafe.activations,
            "heartbeat_age_s": self.agent.failsafe.age(),
            "last_q": self.agent.last_q,
            "plans": self._plans_status(),
            "jobs": [j.summary() for j in self.agent.jobs.values()],
            "cdc": self.agent.local.status(),
        }

    def _on_local_policy(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        self._check_node(msg)
        try:
            cfg = LocalConfig.from_request(msg.data, self.agent.local.default_tick_ms)
            return wire.OK, self.agent.local.configure(cfg)
        except LocalPolicyError as e:
            raise Refused("bad_request", str(e)) from None
        except OSError as e:
            raise Refused("local_policy_failed", f"cannot start the local scheduler: {e}") from None

    def _on_kill(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        self._check_node(msg)
        jid = msg.data["job_id"]
        job = self.agent.jobs.get(jid)
        if job is None:
            raise Refused("unknown_job", f"no job {jid!r} on node {self.agent.node}")
        if not job.ended:
            self.agent.kill(job)
        return wire.OK, {"job_id": jid, "ended": job.ended}

    def _on_launch(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]]:
        self._check_node(msg)
        d = msg.data
        try:
            jid = check_job_id(d["job_id"])
        except JobError as e:
            raise Refused("bad_request", str(e)) from None
        old = self.agent.jobs.get(jid)
        if old is not None and not old.ended:
            raise Refused("job_exists", f"job {jid!r} is already running on {self.agent.node}")
        ranks = d.get("ranks", [0])
        env_extra = d.get("env", {})
        weight = d.get("weight", DEFAULT_WEIGHT)
        frozen = d.get("start_frozen", True)
        if (
            not isinstance(ranks, list)
            or not ranks
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks)
            or len(set(ranks)) != len(ranks)
            or not isinstance(env_extra, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_extra.items())
            or not isinstance(weight, int)
            or not isinstance(frozen, bool)
        ):
            raise Refused("bad_request", "launch: bad ranks/env/weight/start_frozen")
        return wire.OK, self.agent.launch(jid, d, ranks, env_extra, weight, frozen)

    def _plans_status(self) -> dict[str, Any]:
        slot = self.agent.plans
        c = slot.counters
        return {
            "pending_q": slot.pending.q if slot.pending else None,
            "pending_at": slot.pending.at if slot.pending else None,
            "accepted": c.accepted,
            "late": c.late,
            "replaced": c.replaced,
            "refused": c.refused,
            "dropped": c.dropped,
            "max_ahead_s": slot.max_ahead,
            "wait": self.agent.tt_wait,
            "realtime": self.agent.realtime,
            "wakeup": self.agent.wakeup,
        }

    def _on_quantum(self, conn: AgentConn, msg: wire.Message) -> tuple[str, dict[str, Any]] | None:
        """Apply now (no ``at``), or keep the plan for its instant (``at``: agent/plan.py)."""
        self._check_node(msg)
        q: int = msg.data["q"]
        runnable: dict[str, int] = msg.data["jobs"]
        unknown = sorted(j for j in runnable if j not in self.agent.jobs)
        if unknown:
            raise Refused("unknown_job", f"quantum {q}: unknown job(s) {unknown}")
        measure = _measure(msg.data.get("measure"), q)
        at = msg.data.get("at")
        if at is None:
            return wire.ACK, self.agent.apply_now(q, runnable, measure)
        plan = Plan(
            q=q,
            at=float(at),
            runnable=dict(runnable),
            conn=conn,
            seq=msg.seq,
            received_wall=self.agent.wall(),
            received_monotonic_ns=time.monotonic_ns(),
            measure=measure,
        )
        try:
            late_ack = self.agent.submit_plan(plan)
        except TooFar as e:
            raise Refused("too_far", str(e)) from None
        return None if late_ack is None else (wire.ACK, late_ack)


def _measure(raw: Any, q: int) -> frozenset[str] | None:
    """The quantum's ``measure``: the I/O devices whose bytes its ack should carry (a
    controller that sends none, an older one, gets them all; docs/controller.md)."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(d, str) for d in raw):
        raise Refused("bad_request", f"quantum {q}: measure must be a list of device names")
    return frozenset(raw)
