"""Gang family (Wiseman & Feitelson 2003 §2, Rajaei et al. 2008 §3.2): a matrix row per quantum,
jobs launched frozen."""

from __future__ import annotations

from collections.abc import Mapping

from controller import classes
from controller.families.base import Core, Family, Plan
from controller.families.localscheme import LocalSchemes
from controller.jobs import QUEUED, Job, RequestError
from controller.policies.base import GangPolicy, PolicyError, QuantumPlan


class GangFamily(Family):
    # Every quantum thaws one row's gangs and freezes another's: worth synchronising.
    switches_gangs = True

    def __init__(self, core: Core, policy: GangPolicy, schemes: LocalSchemes | None = None) -> None:
        super().__init__(core, schemes)
        self.policy = policy

    @property
    def queue_length(self) -> int:
        return self.policy.queue_length

    def withdraw_outranked(self) -> None:
        """Take back jobs waiting inside the policy that a held job outranks."""
        c, t = self.core, self.core.table
        if not t.held:
            return
        best = min(classes.RANK[t.jobs[j].job_class] for j in t.held)
        for jid in sorted(t.in_policy):
            job = t.jobs[jid]
            if job.state == QUEUED and classes.RANK[job.job_class] > best:
                # finish() of a queued job only drops it from the policy's queue.
                self.policy.finish(jid, c.mono())
                t.withdraw(jid)

    def after_hand_over(self) -> None:
        """Start (frozen) every job the policy has placed but we have not launched."""
        c = self.core
        for jid in sorted(c.table.in_policy):
            job = c.table.jobs[jid]
            if job.state != QUEUED:
                continue
            where = self.policy.placement(jid)
            if where is None:
                continue
            c.launch(job, [c.nodes[i].name for i in where[1]], start_frozen=True)

    def _placed(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        t = self.core.table
        for jid in t.in_policy:
            where = self.policy.placement(jid)
            if where is not None and t.jobs[jid].active:
                out[jid] = where[1]
        return out

    def plan(self, now: float) -> Plan:
        c = self.core
        plan: QuantumPlan | None = None
        node_jobs: tuple[tuple[int, ...], ...] = ()
        # A row whose jobs the class rules hold back would run nothing: skip it
        # (at most one pass over the rows).
        for _ in range(max(1, self.policy.slot_count)):
            plan = self.policy.next_quantum(now)
            self.after_hand_over()
            placed = self._placed()
            cls = {j: c.table.jobs[j].job_class for j in placed}
            # Only jobs we really launched can be listed to the agents.
            raw = plan.node_jobs
            if not placed.keys() >= set().union(*raw):
                raw = tuple(tuple(j for j in js if j in placed) for js in raw)
            node_jobs, _removed = classes.filter_plan(raw, cls, placed)
            if not classes.plan_is_empty(node_jobs) or classes.plan_is_empty(raw):
                break
        out = Plan(policy_plan=plan)
        for n, js in enumerate(node_jobs):
            for j in js:
                out.runnable.setdefault(j, []).append(c.nodes[n].name)
        out.weights = dict(plan.weights) if plan is not None else {}
        return out

    def observe(self, utilization: Mapping[int, float]) -> None:
        mine = self.core.table.in_policy
        self.policy.observe({j: u for j, u in utilization.items() if j in mine})

    def observe_devices(self, demand: Mapping[int, Mapping[str, float]]) -> None:
        mine = self.core.table.in_policy
        self.policy.observe_devices({j: d for j, d in demand.items() if j in mine})

    def rows(self) -> list[list[int | None]]:
        return self.policy.matrix_view()

    def set_max_slots(self, max_slots: int | None) -> None:
        self.policy.set_max_slots(max_slots)

    def snapshot(self) -> dict[int, tuple[float, ...]]:
        return self.policy.snapshot()

    def readopt(self, started: list[Job]) -> None:
        c = self.core
        # They all ran before: room must be found whatever max_slots says now.
        self.policy.set_max_slots(None)
        try:
            for job in started:
                c.submit(job)
                nodes = tuple(sorted(c.node_index[n] for n in job.nodes))
                try:
                    self.policy.pin(job.job_id, nodes)
                except PolicyError as e:
                    raise RequestError(f"restore: cannot pin job {job.job_id}: {e}") from e
        finally:
            self.policy.set_max_slots(c.max_slots())

    def restore(self, history: Mapping[int, tuple[float, ...]]) -> None:
        self.policy.restore(history)
