"""Space-sharing batch policies: FCFS, EASY and conservative backfilling.

Rajaei et al. 2008 §3.1 frames the family: jobs run to completion on dedicated nodes in
arrival order, and backfilling lets later, smaller jobs jump ahead when that
cannot hurt the job(s) holding reservations. The variants differ in who holds
a reservation:

* :class:`FCFS` -- nobody jumps the queue; the head blocks everyone.
* :class:`EASY` -- aggressive backfilling: only the head of the queue holds a
  reservation (the *shadow time*, Rajaei et al. 2008 §3.1).
* :class:`Conservative` -- every waiting job holds one, kept in an
  availability profile (:mod:`controller.policies.availability`).

Estimates and what happens when they are wrong
-----------------------------------------------
A policy learns of an end only through :meth:`BatchPolicy.finish`. It plans
with ``start + estimate`` for every running job. Real traces contain jobs that
run past their estimate; while such a job is still running at ``now`` its end
is taken to be ``now`` (EASY/lookahead: its nodes are expected back at any
moment, so the shadow time is ``max(estimated end, now)``) or, in the
conservative profile, the instant just after ``now`` (``math.nextafter``), so
that no reservation is placed on nodes that are still busy. Conservative
then rebuilds every reservation in queue order; that is the only case in
which a reservation can move later.

Choices the papers leave open
-----------------------------
* A job "ends by the shadow time" when ``now + estimate <= shadow`` (equality
  allowed); jobs ending at the same instant as the one that makes room for
  the head all count towards the extra nodes.
* EASY backfills in queue order, first fit, and stops scanning as soon as no
  node is free.
* Conservative compression (after an early end) takes the waiting jobs in
  queue order, each to the earliest slot that fits with its own slot taken
  out, and repeats until nothing moves. A single pass can leave a reservation
  at an instant where nothing ends; since a policy only runs at events, that
  job would then start late. At the fixed point every reservation begins now
  or where a running job or an earlier reservation is planned to end.
* Conservative plans a zero estimate as ``ZERO_ESTIMATE_PLAN`` seconds.
* A conservative reservation that comes due while the nodes are still held by
  a job whose end has not been reported yet (same instant) waits for that
  report; if the caller next calls at a later time, everything is replanned.

Performance notes (the simulator drives these objects millions of times):
running jobs are kept in a list sorted by estimated end (``bisect.insort``)
instead of being sorted per call; EASY remembers how much of the queue it
has already proved unstartable so that an arrival costs O(1) when no job has
ended since the last decision; conservative compression only looks at jobs
that could reach capacity freed since the last decision.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from dataclasses import dataclass
from itertools import accumulate

from controller.policies.availability import Availability
from controller.policies.base import BatchPolicy, JobRequest, PolicyError
from controller.policies.params import ParamSpec

__all__ = ["EASY", "FCFS", "ZERO_ESTIMATE_PLAN", "Conservative", "HeadReservation", "RunningSet"]


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


class _Queued(BatchPolicy):
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


class FCFS(_Queued):
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


class EASY(_Queued):
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


# Conservative plans a job with a zero estimate as lasting this long (seconds):
# a zero-length slot would hold nothing, so another job could be planned on the
# same nodes at the same instant and then fail to start. Planning a little
# longer is just an over-estimate, which compression already handles.
ZERO_ESTIMATE_PLAN = 1e-3


def _plan(job: JobRequest) -> float:
    """Duration conservative plans for ``job``."""
    est = job.estimate
    return est if est > 0 else ZERO_ESTIMATE_PLAN


@dataclass(slots=True)
class _Reservation:
    """A waiting job's slot in the conservative profile."""

    job: JobRequest
    start: float
    order: int
    size: int
    dur: float  # planned duration (see ZERO_ESTIMATE_PLAN)


class Conservative(_Queued):
    """Conservative backfilling.

    Every waiting job gets, on submission, the earliest slot in the
    availability profile where it fits for its estimate without touching any
    reservation made before it. A job starts when its slot comes. When a job
    ends before its estimate the freed capacity is handed out by compression:
    in queue order each reservation is taken out and put back at the earliest
    slot that fits, which is never later than where it was (its old slot is
    still free). With correct or over-estimates no job therefore starts later
    than the reservation it got at submission.
    """

    name = "conservative"
    PARAMS: tuple[ParamSpec, ...] = ()

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self._profile = Availability(nodes)
        self._res: dict[int, _Reservation] = {}
        # (start, submission order, job id); stale entries are skipped.
        self._heap: list[tuple[float, int, int]] = []
        # Running job -> end as written in the profile (differs from the
        # estimate only after an overrun).
        self._planned: dict[int, float] = {}
        # The running jobs' requests, needed to rebuild the profile.
        self._run_jobs: dict[int, JobRequest] = {}
        self._order = 0
        self._compress = False
        # End of the latest capacity freed since the last compression.
        self._reach = -math.inf

    def reservation(self, job_id: int) -> float | None:
        """Planned start of a waiting job (None if it is not waiting)."""
        r = self._res.get(job_id)
        return None if r is None else r.start

    @property
    def profile(self) -> Availability:
        """The availability profile (read it, do not change it)."""
        return self._profile

    @property
    def queue_length(self) -> int:
        return len(self._res)

    def submit(self, job: JobRequest, now: float) -> None:
        self._check_new(job)
        prof = self._profile
        prof.advance(now)
        dur = _plan(job)
        start = prof.earliest(job.size, dur)
        assert start is not None  # the profile always ends with every node free
        prof.reserve(start, dur, job.size)
        self._order += 1
        self._res[job.job_id] = _Reservation(job, start, self._order, job.size, dur)
        self._queued_ids.add(job.job_id)
        heapq.heappush(self._heap, (start, self._order, job.job_id))

    def finish(self, job_id: int, now: float) -> None:
        self._run.finish(job_id)
        job = self._run_jobs.pop(job_id)
        planned = self._planned.pop(job_id)
        if planned > now:
            prof = self._profile
            prof.advance(now)
            prof.add(now, planned, job.size)
            self._compress = True
            self._reach = max(self._reach, planned)

    def schedule(self, now: float) -> list[JobRequest]:
        out: list[JobRequest] = []
        prof = self._profile
        prof.advance(now)
        if self._run.overrun(now) or self._late(now):
            self._rebuild(now)
        elif self._compress:
            self._compact(now)
        self._compress = False
        self._reach = -math.inf
        heap = self._heap
        res = self._res
        waiting: list[tuple[float, int, int]] = []
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            r = res.get(entry[2])
            if r is None or r.start != entry[0]:
                continue  # stale: started already, or moved
            job = r.job
            if job.size > self._run.free:
                # A job ending exactly now has not been reported yet; its
                # finish (same instant) will let this one start.
                waiting.append(entry)
                continue
            del res[job.job_id]
            self._planned[job.job_id] = now + _plan(job)
            self._run_jobs[job.job_id] = job
            self._start(job, now, out)
        for entry in waiting:
            heapq.heappush(heap, entry)
        return out

    def _late(self, now: float) -> bool:
        """Is a reservation in the past still waiting (it could not start)?"""
        heap = self._heap
        res = self._res
        while heap:
            start, _, jid = heap[0]
            r = res.get(jid)
            if r is None or r.start != start:
                heapq.heappop(heap)
                continue
            return start < now
        return False

    def _compact(self, now: float) -> None:
        """Move reservations earlier, in queue order, until none can move.

        One pass is not enough: a later job that moves can vacate room an
        earlier job could use, and a reservation left at a time where nothing
        ends would never be woken up (the policy only runs at events). At the
        fixed point every reservation starts now or where some running job or
        earlier reservation is planned to end, which is an event.
        """
        prof = self._profile
        heap = self._heap
        jobs = list(self._res.values())
        stable_after = len(jobs)  # jobs past this index need no re-check
        # Before this call no reservation could move (every change keeps that
        # true: submission takes the earliest slot, compression runs to a
        # fixed point, starting or advancing time opens no slot). So a job can
        # only move into a slot that overlaps capacity freed since: the early
        # end of a job (up to its planned end) or the old slot of a job moved
        # here. Any such slot starts before ``reach``.
        reach = self._reach
        free_at = prof.free_at
        while True:
            last_moved = -1
            # The most free nodes on any segment up to each breakpoint, as a
            # function of time. A job that finds no room anywhere before its
            # start cannot move: an O(log P) test. Only a move changes the
            # free-node function, so the table is rebuilt only then.
            times = prof.times[:]
            peak = list(accumulate(prof.free, max))
            for k, r in enumerate(jobs):
                if last_moved < 0 and k > stable_after:
                    break
                old = r.start
                limit = old if old < reach else reach
                if limit <= now:
                    continue
                size = r.size
                if peak[bisect_left(times, limit) - 1] < size:
                    continue
                dur = r.dur
                # Nothing changed from ``reach`` on: a slot running past it
                # needs room there already (counting the job's own nodes if
                # its current slot covers ``reach``).
                if now + dur > reach:
                    room = free_at(reach)
                    if old <= reach < old + dur:
                        room += size
                    if room < size:
                        continue
                # A slot straddling ``old`` needs room just before it; without
                # that, the job's own reservation cannot matter and the search
                # can run without taking it out first.
                if prof.free[bisect_left(prof.times, old) - 1] >= size:
                    found = prof.earliest_moving(size, dur, old, limit)
                else:
                    found = prof.earliest(size, dur, limit)
                if found is None or found >= old:
                    continue
                prof.release(old, dur, size)
                prof.reserve(found, dur, size)
                r.start = found
                heapq.heappush(heap, (found, r.order, r.job.job_id))
                last_moved = k
                reach = max(reach, old + dur)
                times = prof.times[:]
                peak = list(accumulate(prof.free, max))
            if last_moved < 0:
                return
            # Next pass: until something moves again, jobs after the last
            # mover were already checked against the current profile.
            stable_after = last_moved

    def _rebuild(self, now: float) -> None:
        """Plan everything again from the running jobs (after an overrun)."""
        prof = Availability(self.nodes, now)
        after_now = math.nextafter(now, math.inf)
        for jid, job in self._run_jobs.items():
            end = self._planned[jid]
            if end < now:
                end = after_now  # still busy: assume it ends any moment
            self._planned[jid] = end
            prof.reserve(now, end - now, job.size)
        heap: list[tuple[float, int, int]] = []
        for r in self._res.values():
            dur = _plan(r.job)
            start = prof.earliest(r.job.size, dur)
            assert start is not None
            prof.reserve(start, dur, r.job.size)
            r.start = start
            heap.append((start, r.order, r.job.job_id))
        heapq.heapify(heap)
        self._profile = prof
        self._heap = heap
