"""Batch family (Rajaei et al. 2008 §3.1): jobs start thawed on free nodes and run to completion.

A quantum command listing every running job is still sent each period: it is
the heartbeat and it brings back CPU time, so accounting is the same as gang.
"""

from __future__ import annotations

import logging

from controller.families.base import Core, Family, Plan
from controller.families.localscheme import LocalSchemes
from controller.jobs import FAILED, STANDBY, Job
from controller.policies.base import BatchPolicy

log = logging.getLogger("controller.quantum")  # the scheduler's parts log as one


class BatchFamily(Family):
    def __init__(
        self, core: Core, policy: BatchPolicy, schemes: LocalSchemes | None = None
    ) -> None:
        super().__init__(core, schemes)
        self.policy = policy
        self.nodes_of: dict[int, list[int]] = {}  # running job -> node indices

    @property
    def queue_length(self) -> int:
        return self.policy.queue_length

    def waiting_for_classes(self, head: Job) -> int:
        # Backfilling needs to see the whole queue; standby waits for idle nodes.
        return self.queue_length if head.job_class == STANDBY else 0

    def plan(self, now: float) -> Plan:
        c = self.core
        jobs = c.table.jobs
        for req in self.policy.schedule(now):
            job = jobs[req.job_id]
            used = {n for ns in self.nodes_of.values() for n in ns}
            free = [i for i in range(len(c.nodes)) if i not in used]
            if len(free) < job.spec.size:
                # The policy's count and ours disagree: tell it the job is gone.
                c.end(job, FAILED, "no free nodes at start (policy/controller mismatch)")
                continue
            chosen = free[: job.spec.size]
            self.nodes_of[job.job_id] = chosen
            c.launch(job, [c.nodes[i].name for i in chosen], start_frozen=False)
        runnable = {
            j: [c.nodes[i].name for i in ns] for j, ns in self.nodes_of.items() if jobs[j].active
        }
        return Plan(runnable=runnable)

    def ended(self, job_id: int) -> None:
        self.nodes_of.pop(job_id, None)

    def rows(self) -> list[list[int | None]]:
        row: list[int | None] = [None] * len(self.core.nodes)
        for j, ns in self.nodes_of.items():
            for n in ns:
                row[n] = j
        return [row] if self.nodes_of else []

    def readopt(self, started: list[Job]) -> None:
        c = self.core
        for job in started:
            c.submit(job)
            self.nodes_of[job.job_id] = [c.node_index[n] for n in job.nodes]
        if started:
            begun = {r.job_id for r in self.policy.schedule(c.mono())}
            for job in started:
                if job.job_id not in begun:
                    log.warning("restore: batch policy did not restart job %d", job.job_id)
