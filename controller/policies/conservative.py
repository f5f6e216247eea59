"""Conservative backfilling (Rajaei et al. 2008 §3.1): every waiting job holds a reservation.

Reservations live in an availability profile (:mod:`controller.policies.availability`);
when a job ends early the freed capacity is handed out by compression. How wrong
estimates and zero estimates are handled: docs/policies.md ("Batch").
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

from controller.policies.availability import Availability
from controller.policies.base import JobRequest
from controller.policies.batch import QueuedBatch
from controller.policies.params import ParamSpec

__all__ = ["ZERO_ESTIMATE_PLAN", "Conservative"]

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


class Conservative(QueuedBatch):
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
