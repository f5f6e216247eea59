"""CDC family (Yu & Byun 2011): space sharing up to an MPL, each node time-shared by its agent.

The policy (controller/policies/spaceshare.py) says which queued job starts
and on which nodes; the job is launched thawed there and runs to completion.
Every quantum lists every running job as runnable with the default weight:
the quantum command stays the heartbeat and brings back CPU time, while the
agents, told the scheme by the ``local_policy`` request (docs/cdc.md;
controller/families/localscheme.py), own the weights and make the boost
decisions themselves. The request goes to every agent when the family starts
and again whenever one (re)connects; an agent that refuses it is logged once
and left to its own scheduling (the jobs there then see LOCAL behaviour).

``rows()`` shows MPL rows: row *k* holds the *k*-th job started on each node
still running there, so ``cosched matrix`` shows what shares each node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.cgroups import DEFAULT_WEIGHT
from controller.families.base import Core, Family, Plan
from controller.families.localscheme import LocalSchemes
from controller.jobs import STANDBY, Job, RequestError
from controller.policies.base import PolicyError, SpaceSharePolicy


class CdcFamily(Family):
    def __init__(
        self, core: Core, policy: SpaceSharePolicy, schemes: LocalSchemes | None = None
    ) -> None:
        super().__init__(core, schemes)
        self.policy = policy
        for node, up in core.agents.connected().items():
            if up:
                self._configure(node, core.agents.agent_info(node), again=False)

    # ---- the agents' local scheme ------------------------------------------------
    def _request(self, node: str) -> dict[str, Any]:
        return self.schemes.request(node, self.policy.scheme, self.policy.mpl)

    def _configure(self, node: str, hello: Mapping[str, Any], *, again: bool) -> None:
        data = self._request(node)
        if not again and self.schemes.sent.get(node) == data:
            return  # a new family on the same connection (restore): already told
        self.schemes.tell(node, data, hello)

    def agent_connected(self, node: str, hello: Mapping[str, Any]) -> None:
        self._configure(node, hello, again=True)

    def describe(self) -> dict[str, Any]:
        sch = self.policy.scheme
        return {
            "mpl": self.policy.mpl,
            "scheme": sch.name,
            "tick_ms": sch.tick_ms,
            "spin_us": sch.spin_us,
            "boost": sch.boost,
            "local_policy": {n.name: self.schemes.state.get(n.name, "-") for n in self.core.nodes},
        }

    # ---- scheduling ----------------------------------------------------------------
    @property
    def queue_length(self) -> int:
        return self.policy.queue_length

    def waiting_for_classes(self, head: Job) -> int:
        # As batch: standby waits for an empty queue; the others queue in FIFO order.
        return self.queue_length if head.job_class == STANDBY else 0

    def _running(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        t = self.core.table
        for jid in t.in_policy:
            where = self.policy.placement(jid)
            if where is not None and t.jobs[jid].active:
                out[jid] = where
        return out

    def plan(self, now: float) -> Plan:
        c = self.core
        for req in self.policy.schedule(now):
            where = self.policy.placement(req.job_id)
            assert where is not None  # schedule() placed it
            job = c.table.jobs[req.job_id]
            c.launch(job, [c.nodes[i].name for i in where], start_frozen=False)
        running = self._running()
        return Plan(
            runnable={j: [c.nodes[i].name for i in ns] for j, ns in sorted(running.items())},
            weights=dict.fromkeys(running, DEFAULT_WEIGHT),
        )

    def rows(self) -> list[list[int | None]]:
        per = self.policy.node_jobs()
        depth = max((len(js) for js in per), default=0)
        return [[js[k] if k < len(js) else None for js in per] for k in range(depth)]

    def readopt(self, started: list[Job]) -> None:
        c = self.core
        for job in started:
            c.submit(job)
            nodes = tuple(c.node_index[n] for n in job.nodes)  # rank order
            try:
                self.policy.pin(job.job_id, nodes)
            except PolicyError as e:
                raise RequestError(f"restore: cannot pin job {job.job_id}: {e}") from e
