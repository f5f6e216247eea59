"""Space-sharing batch policies: FCFS, EASY and conservative backfilling.

Rajaei et al. 2008 §3.1 frames the family: jobs run to completion on dedicated nodes in
arrival order, and backfilling lets later, smaller jobs jump ahead when that
cannot hurt the job(s) holding reservations. The variants differ in who holds
a reservation:

* :class:`FCFS` -- nobody jumps the queue; the head blocks everyone.
* :class:`EASY` -- aggressive backfilling: only the head of the queue holds a
  reservation (the *shadow time*, Rajaei et al. 2008 §3.1).
* :class:`~controller.policies.conservative.Conservative` -- every waiting job
  holds one (conservative.py).

How wrong estimates are handled, our choices where the papers are silent, and
the performance notes: docs/policies.md ("Batch").
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

from controller.policies.base import BatchPolicy, JobRequest, PolicyError
from controller.policies.params import ParamSpec

__all__ = ["EASY", "FCFS", "HeadReservation", "QueuedBatch", "RunningSet"]


class RunningSet:
    """Running jobs with their estimated ends, kept sorted by end.

    Shared by every batch policy here. ``ends`` holds ``(estimated_end,
    job_id, size)`` tuples in ascending order; ``info`` maps a job id to its
    ``(estimated_end, size)``.
    """

    __slots__ = ("ends", "free", "info", "nodes")

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.free = nodes
        self.ends: list[tuple[float, int, int]] = []
        self.info: dict[int, tuple[float, int]] = {}

    def start(self, job: JobRequest, now: float) -> None:
        """Record that ``job`` started at ``now``."""
        end = now + job.estimate
        self.free -= job.size
        self.info[job.job_id] = (end, job.size)
        insort(self.ends, (end, job.job_id, job.size))

    def finish(self, job_id: int) -> tuple[float, int]:
        """Forget a running job; returns its ``(estimated_end, size)``."""
        try:
            end, size = self.info.pop(job_id)
        except KeyError:
            raise PolicyError(f"job {job_id} is not running") from None
        ends = self.ends
        del ends[bisect_left(ends, (end, job_id, size))]
        self.free += size
        return end, size

    def overrun(self, now: float) -> bool:
        """Is some running job still running after its estimated end?"""
        return bool(self.ends) and self.ends[0][0] < now

    def shadow(self, need: int, now: float) -> tuple[float, int]:
        """Shadow time and extra nodes for a head job of ``need`` nodes.

        The shadow time (Rajaei et al. 2008 §3.1) is the earliest estimated time at
        which ``need`` nodes are free, taking ends in the past (overruns) as
        ``now``. The extra nodes are those free at the shadow time beyond what
        the head needs; a job that would still run at the shadow time may use
        only those. Requires ``need <= nodes``.
        """
        avail = self.free
        ends = self.ends
        n = len(ends)
        k = 0
        shadow = now
        while avail < need:
            # Cannot run off the end: all running jobs ending frees every node.
            end, _, size = ends[k]
            avail += size
            k += 1
            shadow = end
        shadow = max(shadow, now)
        # Jobs ending at the same instant (or overdue) also free their nodes
        # by the shadow time.
        while k < n and ends[k][0] <= shadow:
            avail += ends[k][2]
            k += 1
        return shadow, avail - need


class QueuedBatch(BatchPolicy):
    """Common bookkeeping: validation, a FCFS queue, the running set."""

    name = "batch"
    PARAMS: tuple[ParamSpec, ...] = ()

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self._run = RunningSet(nodes)
        self._queue: list[JobRequest] = []
        self._queued_ids: set[int] = set()

    def _check_new(self, job: JobRequest) -> None:
        if job.size > self.nodes:
            raise PolicyError(
                f"job {job.job_id} asks for {job.size} nodes but the machine has {self.nodes}"
            )
        if job.job_id in self._queued_ids or job.job_id in self._run.info:
            raise PolicyError(f"job {job.job_id} was already submitted")

    def submit(self, job: JobRequest, now: float) -> None:
        self._check_new(job)
        self._queue.append(job)
        self._queued_ids.add(job.job_id)

    def finish(self, job_id: int, now: float) -> None:
        self._run.finish(job_id)

    def _start(self, job: JobRequest, now: float, out: list[JobRequest]) -> None:
        self._run.start(job, now)
        self._queued_ids.discard(job.job_id)
        out.append(job)

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    @property
    def free_nodes(self) -> int:
        return self._run.free

    @property
    def running(self) -> dict[int, tuple[float, int]]:
        """Running job id -> (estimated end, size); a copy."""
        return dict(self._run.info)


class FCFS(QueuedBatch):
    """First come, first served: start jobs in arrival order while the head fits.

    The head blocks everybody behind it (Rajaei et al. 2008 §3.1, the waste that
    backfilling removes).
    """

    name = "fcfs"
    PARAMS: tuple[ParamSpec, ...] = ()

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)

    def schedule(self, now: float) -> list[JobRequest]:
        out: list[JobRequest] = []
        q = self._queue
        run = self._run
        k = 0
        while k < len(q) and q[k].size <= run.free:
            self._start(q[k], now, out)
            k += 1
        if k:
            del q[:k]
        return out


@dataclass(frozen=True, slots=True)
class HeadReservation:
    """The reservation EASY (and lookahead) hold for the head of the queue."""

    job_id: int
    shadow: float
    extra: int


class EASY(QueuedBatch):
    """Aggressive (EASY) backfilling.

    The head starts if it fits. Otherwise it gets a reservation at the shadow
    time; then, in queue order, any other job that fits in the free nodes
    starts now if it is expected to end by the shadow time, or if it uses no
    more than the extra nodes (which it then consumes). With correct or
    over-estimates the head therefore never starts after its shadow time.
    """

    name = "easy"
    PARAMS: tuple[ParamSpec, ...] = ()

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        # Leading queue entries already shown unable to start under the
        # current (free, shadow, extra); 0 forces a full decision.
        self._verified = 0
        self._shadow = 0.0
        self._extra = 0
        self._head: int | None = None  # job holding the reservation

    @property
    def head_reservation(self) -> HeadReservation | None:
        """The head's current reservation (None when no job is blocked).

        ``extra`` is what is left of the extra nodes after the backfilled jobs
        that will still run at the shadow time took theirs.
        """
        if self._head is None:
            return None
        return HeadReservation(self._head, self._shadow, self._extra)

    def finish(self, job_id: int, now: float) -> None:
        self._run.finish(job_id)
        self._verified = 0

    def schedule(self, now: float) -> list[JobRequest]:
        out: list[JobRequest] = []
        q = self._queue
        if not q:
            return out
        run = self._run
        first = self._verified
        if first == 0 or run.overrun(now):
            # Something changed (a job ended, the head changed, an estimate
            # was exceeded): start heads, then recompute the reservation.
            k = 0
            while k < len(q) and q[k].size <= run.free:
                self._start(q[k], now, out)
                k += 1
            if k:
                del q[:k]
            if not q:
                self._verified = 0
                self._head = None
                return out
            head = q[0]
            self._shadow, self._extra = run.shadow(head.size, now)
            self._head = head.job_id
            if run.free == 0:
                # Nothing can start until a job ends (finish resets us).
                self._verified = len(q)
                return out
            first = 1
        elif run.free == 0:
            self._verified = len(q)
            return out
        # Only jobs from ``first`` on can possibly start: earlier ones were
        # rejected with at least as many free/extra nodes and an earlier now.
        self._backfill(first, now, out)
        self._verified = len(q)
        return out

    def _backfill(self, first: int, now: float, out: list[JobRequest]) -> None:
        q = self._queue
        run = self._run
        free = run.free
        extra = self._extra
        horizon = self._shadow - now  # longest estimate that ends by the shadow
        picked: list[int] = []
        for i in range(first, len(q)):
            job = q[i]
            size = job.size
            if size > free:
                continue
            if job.estimate <= horizon:
                pass
            elif size <= extra:
                extra -= size
            else:
                continue
            free -= size
            picked.append(i)
            self._start(job, now, out)
            if free == 0:
                break
        self._extra = extra
        for i in reversed(picked):
            del q[i]
