"""Minimal policy and job fakes for the simulator's engine tests (tests/unit/testbed/sim/):
a gang policy that gives every job its own slot, and a one-phase job."""

from __future__ import annotations

from collections.abc import Mapping

from controller.policies.base import GangPolicy, JobRequest, QuantumPlan
from testbed.sim.job import Phase, SimJob


class OneSlotEach(GangPolicy):
    """Every job spans all nodes and has its own slot; optionally pairs slots 0 and 1."""

    name = "one-slot-each"

    def __init__(self, nodes: int, pair: bool = False) -> None:
        super().__init__(nodes)
        self.slots: list[int] = []
        self.turn = 0
        self.pair = pair
        self.seen: list[dict[int, float]] = []

    def submit(self, job: JobRequest, now: float) -> None:
        self.slots.append(job.job_id)

    def finish(self, job_id: int, now: float) -> None:
        self.slots.remove(job_id)

    def next_quantum(self, now: float) -> QuantumPlan:
        if not self.slots:
            return QuantumPlan(None, None, tuple(() for _ in range(self.nodes)))
        if self.pair and len(self.slots) >= 2:
            jobs = (self.slots[0], self.slots[1])
            return QuantumPlan(0, 1, tuple(jobs for _ in range(self.nodes)))
        s = self.turn % len(self.slots)
        self.turn += 1
        return QuantumPlan(s, None, tuple((self.slots[s],) for _ in range(self.nodes)))

    def observe(self, utilization: Mapping[int, float]) -> None:
        self.seen.append(dict(utilization))

    @property
    def queue_length(self) -> int:
        return 0

    @property
    def slot_count(self) -> int:
        return len(self.slots)

    def placement(self, job_id: int) -> tuple[int, tuple[int, ...]] | None:
        return None


def job(i: int, submit: float, size: int, runtime: float, cpu: float = 1.0) -> SimJob:
    return SimJob(i, submit, size, runtime, runtime, phases=(Phase(1.0, cpu),))
