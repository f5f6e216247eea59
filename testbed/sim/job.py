"""The simulator's job model (issue 2, "Job model").

A simulated job has what a workload model or trace gives (arrival, size, run
time on a dedicated machine, the user's estimate) plus what a time-sharing
study needs: a CPU/I-O profile and a barrier granularity.

The profile is a sequence of :class:`Phase`; each phase covers a fraction of
the job's dedicated run time and has a CPU utilization ``cpu`` in [0, 1]: the
share of wall time the job's processes use the CPU when they run alone, the
rest being I/O or communication wait (Wiseman & Feitelson 2003 §2.2: I/O is "the remaining
time"). An empty profile means a compute-bound job (cpu = 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, cast

from controller.policies.base import JobRequest


@dataclass(frozen=True, slots=True)
class Phase:
    """``fraction`` of the job's dedicated run time spent at utilization ``cpu``.

    ``io``: the share of that time a process occupies its node's I/O device (issue
    25's device term; 0 for jobs whose waiting is communication, not disk).
    ``net``: the share of that time it occupies its node's network link (issue 31's
    N + 1 gangs: a second I/O device; 0 unless a workload sets it).
    """

    fraction: float
    cpu: float
    io: float = 0.0
    net: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"phase fraction must be in (0, 1], got {self.fraction}")
        if not 0.0 <= self.cpu <= 1.0:
            raise ValueError(f"phase cpu must be in [0, 1], got {self.cpu}")
        if not 0.0 <= self.io <= 1.0:
            raise ValueError(f"phase io must be in [0, 1], got {self.io}")
        if not 0.0 <= self.net <= 1.0:
            raise ValueError(f"phase net must be in [0, 1], got {self.net}")


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

    def copy_with(
        self,
        *,
        submit: float | None = None,
        runtime: float | None = None,
        estimate: float | None = None,
        phases: tuple[Phase, ...] | None = None,
        barrier: float | None = None,
    ) -> SimJob:
        """A copy with the given fields changed, without re-running the checks.

        For workload transformations that keep the invariants by construction
        (profiles, load and time scaling): ``dataclasses.replace`` re-runs
        ``__init__`` and ``__post_init__`` and cost most of a 100,000-job
        workload's preparation (issue 11). The caller guarantees submit >= 0,
        runtime >= 0 and phase fractions summing to 1.
        """
        return unchecked_job(
            self.job_id,
            self.submit if submit is None else submit,
            self.size,
            self.runtime if runtime is None else runtime,
            self.estimate if estimate is None else estimate,
            self.phases if phases is None else phases,
            self.barrier if barrier is None else barrier,
            self.user,
            self.exclusive,
        )

    def request(self) -> JobRequest:
        """The view a policy gets: no true run time."""
        if _FAST_REQUEST and self.estimate >= 0:
            # JobRequest's checks are size >= 1 (a SimJob's own) and estimate >= 0
            req: JobRequest = _new(JobRequest)
            _req_id(req, self.job_id)
            _req_size(req, self.size)
            _req_estimate(req, self.estimate)
            _req_submit(req, self.submit)
            _req_exclusive(req, self.exclusive)
            _req_user(req, str(self.user))
            return req
        return JobRequest(  # raises the policy's own error for a bad estimate
            job_id=self.job_id,
            size=self.size,
            estimate=self.estimate,
            submit_time=self.submit,
            exclusive=self.exclusive,
            user=str(self.user),
        )

    def phase_at(self, done: float) -> Phase:
        """The phase the job is in after ``done`` seconds of progress."""
        if len(self.phases) == 1 or self.runtime <= 0:
            return self.phases[-1]
        pos = done / self.runtime
        acc = 0.0
        for p in self.phases:
            acc += p.fraction
            if pos < acc - 1e-12:
                return p
        return self.phases[-1]

    def cpu_at(self, done: float) -> float:
        """CPU utilization of the phase the job is in after ``done`` seconds of progress."""
        return self.phase_at(done).cpu

    def io_at(self, done: float) -> float:
        """Device share of the phase the job is in after ``done`` seconds of progress."""
        return self.phase_at(done).io

    def net_at(self, done: float) -> float:
        """Network share of the phase the job is in after ``done`` seconds of progress."""
        return self.phase_at(done).net

    def phase_end(self, done: float) -> float:
        """Progress (seconds) at which the current phase ends."""
        acc = 0.0
        for p in self.phases:
            acc += p.fraction
            end = acc * self.runtime
            if done < end - 1e-9:
                return end
        return self.runtime


_new = object.__new__
# the slots' own setters: they skip the frozen class's __setattr__, as the
# generated __init__ does with object.__setattr__, but cost less per call
_SETTERS = tuple(
    SimJob.__dict__[name].__set__
    for name in (
        "job_id",
        "submit",
        "size",
        "runtime",
        "estimate",
        "phases",
        "barrier",
        "user",
        "exclusive",
    )
)
_set_id, _set_submit, _set_size, _set_run, _set_est, _set_phases, _set_bar, _set_user, _set_excl = (
    _SETTERS
)


def unchecked_job(
    job_id: int,
    submit: float,
    size: int,
    runtime: float,
    estimate: float,
    phases: tuple[Phase, ...],
    barrier: float,
    user: int,
    exclusive: bool,
) -> SimJob:
    """A :class:`SimJob` built without ``__post_init__``'s checks, about 4x faster.

    Only for callers that have checked the invariants themselves (the SWF
    reader checks every line; :meth:`SimJob.copy_with`): size >= 1, runtime >= 0,
    submit >= 0 and phase fractions summing to 1.
    """
    job: SimJob = _new(SimJob)
    _set_id(job, job_id)
    _set_submit(job, submit)
    _set_size(job, size)
    _set_run(job, runtime)
    _set_est(job, estimate)
    _set_phases(job, phases)
    _set_bar(job, barrier)
    _set_user(job, user)
    _set_excl(job, exclusive)
    return job


def unchecked_phase(fraction: float, cpu: float, io: float = 0.0, net: float = 0.0) -> Phase:
    """A :class:`Phase` without the range checks (0 < fraction <= 1, 0 <= cpu, io, net <= 1
    are the caller's to keep); for profiles drawn per job."""
    phase: Phase = _new(Phase)
    _set_fraction(phase, fraction)
    _set_cpu(phase, cpu)
    _set_io(phase, io)
    _set_net(phase, net)
    return phase


_set_fraction = Phase.__dict__["fraction"].__set__
_set_cpu = Phase.__dict__["cpu"].__set__
_set_io = Phase.__dict__["io"].__set__
_set_net = Phase.__dict__["net"].__set__


# SimJob.request builds JobRequest like unchecked_job (a tenth of a whole
# `cosched simulate` on the KTH trace went into JobRequest.__init__). Only
# while JobRequest has exactly these fields; tests/unit/testbed/sim/test_engine_fastpaths.py
# compares both ways of building it and pins JobRequest.__post_init__'s checks.
_REQUEST_FIELDS = ("job_id", "size", "estimate", "submit_time", "exclusive", "user")
_req_slots = [JobRequest.__dict__.get(name) for name in _REQUEST_FIELDS]
_FAST_REQUEST = tuple(f.name for f in fields(JobRequest)) == _REQUEST_FIELDS and None not in (
    _req_slots
)
_SetSlot = Callable[[JobRequest, Any], None]
_req_id, _req_size, _req_estimate, _req_submit, _req_exclusive, _req_user = (
    cast(_SetSlot, getattr(slot, "__set__", None)) for slot in _req_slots
)
