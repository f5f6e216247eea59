"""The simulator's job model (issue 2, "Job model").

A simulated job has what a workload model or trace gives (arrival, size, run
time on a dedicated machine, the user's estimate) plus what a time-sharing
study needs: a CPU/I-O profile and a barrier granularity.

The profile is a sequence of :class:`Phase`; each phase covers a fraction of
the job's dedicated run time and has a CPU utilization ``cpu`` in [0, 1]: the
share of wall time the job's processes use the CPU when they run alone, the
rest being I/O or communication wait (seed 000 §2.2: I/O is "the remaining
time"). An empty profile means a compute-bound job (cpu = 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.policies.base import JobRequest


@dataclass(frozen=True, slots=True)
class Phase:
    """``fraction`` of the job's dedicated run time spent at utilization ``cpu``."""

    fraction: float
    cpu: float

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"phase fraction must be in (0, 1], got {self.fraction}")
        if not 0.0 <= self.cpu <= 1.0:
            raise ValueError(f"phase cpu must be in [0, 1], got {self.cpu}")


COMPUTE_BOUND: tuple[Phase, ...] = (Phase(1.0, 1.0),)


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job of a simulated workload.

    ``runtime`` is seconds on a dedicated machine; ``estimate`` the user's
    estimate (>= runtime is not required: backfilling kills nothing, an
    underestimate only misleads reservations). ``barrier`` is the time between
    barriers in seconds of dedicated execution (0: none), used by the
    interference model. ``phases`` fractions must sum to 1.
    """

    job_id: int
    submit: float
    size: int
    runtime: float
    estimate: float
    phases: tuple[Phase, ...] = field(default=COMPUTE_BOUND)
    barrier: float = 0.0
    user: int = -1
    exclusive: bool = False

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"job {self.job_id}: size must be >= 1, got {self.size}")
        if self.runtime < 0:
            raise ValueError(f"job {self.job_id}: runtime must be >= 0, got {self.runtime}")
        if self.submit < 0:
            raise ValueError(f"job {self.job_id}: submit time must be >= 0, got {self.submit}")
        if self.phases:
            total = sum(p.fraction for p in self.phases)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"job {self.job_id}: phase fractions sum to {total}, not 1")

    def request(self) -> JobRequest:
        """The view a policy gets: no true run time."""
        return JobRequest(
            job_id=self.job_id,
            size=self.size,
            estimate=self.estimate,
            submit_time=self.submit,
            exclusive=self.exclusive,
            user=str(self.user),
        )

    def cpu_at(self, done: float) -> float:
        """CPU utilization of the phase the job is in after ``done`` seconds of progress."""
        if self.runtime <= 0:
            return self.phases[-1].cpu
        pos = done / self.runtime
        acc = 0.0
        for p in self.phases:
            acc += p.fraction
            if pos < acc - 1e-12:
                return p.cpu
        return self.phases[-1].cpu

    def phase_end(self, done: float) -> float:
        """Progress (seconds) at which the current phase ends."""
        acc = 0.0
        for p in self.phases:
            acc += p.fraction
            end = acc * self.runtime
            if done < end - 1e-9:
                return end
        return self.runtime
