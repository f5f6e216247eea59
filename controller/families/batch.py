"""Batch family (Rajaei et al. 2008 §3.1): jobs start thawed on free nodes and run to completion.

A quantum command listing every running job is still sent each period: it is
the heartbeat and it brings back CPU time, so accounting is the same as gang.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller.families.base import Family, Plan
from controller.jobs import FAILED, STANDBY, Job
from controller.policies.base import BatchPolicy

if TYPE_CHECKING:
    from controller.quantum import Scheduler

log = logging.getLogger("controller.quantum")


class BatchFamily(Family):
    def __init__(self, sched: Scheduler, policy: BatchPolicy) -> None:
        super().__init__(sched)
        self.policy = policy
        self.nodes_of: dict[int, list[int]] = {}  # running job -> node indices

    @property
    def queue_length(self) -> int:
        return self.policy.queue_length

    def waiting_for_classes(self, head: Job) -> int:
        # Backfilling needs to see the whole queue; standby waits for idle nodes.
        return self.queue_length if head.job_class == STANDBY else 0

    def plan(self, now: float) -> Plan:
        s = self.s
        for req in self.policy.schedule(now):
            job = s.jobs[req.job_id]
            used = {n for ns in self.nodes_of.values() for n in ns}
            free = [i for i in range(len(s.nodes)) if i not in used]
            if len(free) < job.spec.size:
                # The policy's count and ours disagree: tell it the job is gone.
                s.end(job, FAILED, "no free nodes at start (policy/controller mismatch)")
                continue
            chosen = free[: job.spec.size]
            self.nodes_of[job.job_id] = chosen
            s.launch(job, [s.nodes[i].name for i in chosen], start_frozen=False)
        runnable = {
            j: [s.nodes[i].name for i in ns] for j, ns in self.nodes_of.items() if s.jobs[j].active
        }
        return Plan(runnable=runnable)

    def ended(self, job_id: int) -> None:
        self.nodes_of.pop(job_id, None)

    def rows(self) -> list[list[int | None]]:
        row: list[int | None] = [None] * len(self.s.nodes)
        for j, ns in self.nodes_of.items():
            for n in ns:
                row[n] = j
        return [row] if self.nodes_of else []

    def readopt(self, started: list[Job]) -> None:
        s = self.s
        for job in started:
            s.policy_submit(job)
            self.nodes_of[job.job_id] = [s.node_index[n] for n in job.nodes]
        if started:
            begun = {r.job_id for r in self.policy.schedule(s.mono())}
            for job in started:
                if job.job_id not in begun:
                    log.warning("restore: batch policy did not restart job %d", job.job_id)
