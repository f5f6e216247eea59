"""Randomized properties of the batch policies (Rajaei et al. 2008 §3.1).

Each example is a small workload run through an event loop shaped like the
simulator's: arrivals and completions at the same instant are handled
together, then the policy is asked what starts. The checks are the promises
each policy makes: EASY and lookahead never start the head after the shadow
time it got when it became head, conservative never starts a job after the
reservation it got at submission (both with exact or over-estimates), nodes
are never over-committed, and every job eventually runs. Two naive reference
implementations (EASY re-derived from scratch at every call, lookahead by
brute-force subset enumeration) pin down the optimized code exactly.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.availability import Availability
from controller.policies.base import BatchPolicy, JobRequest
from controller.policies.batch import EASY, FCFS
from controller.policies.conservative import ZERO_ESTIMATE_PLAN, Conservative
from controller.policies.lookahead import Lookahead


@dataclass(frozen=True)
class Job:
    job_id: int
    submit: float
    size: int
    runtime: float
    estimate: float


@dataclass
class Trace:
    starts: dict[int, float] = field(default_factory=dict)
    # job id -> shadow time when it first held the head reservation
    first_shadow: dict[int, float] = field(default_factory=dict)
    # job id -> planned start right after submission (conservative)
    first_reservation: dict[int, float] = field(default_factory=dict)


def simulate(policy: BatchPolicy, jobs: list[Job]) -> Trace:
    """Drive ``policy`` like the simulator does; check invariants on the way."""
    trace = Trace()
    by_id = {j.job_id: j for j in jobs}
    events: list[tuple[float, int, int]] = [(j.submit, 1, j.job_id) for j in jobs]
    heapq.heapify(events)
    busy = 0
    waiting = 0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, jid = heapq.heappop(events)
            job = by_id[jid]
            if kind == 1:
                policy.submit(JobRequest(jid, job.size, job.estimate, job.submit), now)
                waiting += 1
                if isinstance(policy, Conservative):
                    planned = policy.reservation(jid)
                    assert planned is not None and planned >= now
                    trace.first_reservation[jid] = planned
            else:
                policy.finish(jid, now)
                busy -= job.size
        for req in policy.schedule(now):
            assert req.job_id not in trace.starts, "started twice"
            trace.starts[req.job_id] = now
            busy += req.size
            waiting -= 1
            heapq.heappush(events, (now + by_id[req.job_id].runtime, 0, req.job_id))
        assert busy <= policy.nodes
        assert policy.free_nodes == policy.nodes - busy
        assert 0 <= policy.free_nodes <= policy.nodes
        assert policy.queue_length == waiting
        if isinstance(policy, EASY):
            head = policy.head_reservation
            if head is not None and head.job_id not in trace.starts:
                trace.first_shadow.setdefault(head.job_id, head.shadow)
    assert waiting == 0
    assert set(trace.starts) == set(by_id), "some job never started"
    return trace


@st.composite
def workloads(
    draw: st.DrawFn, factors: tuple[float, ...] = (1.0,), min_runtime: int = 0
) -> tuple[int, list[Job]]:
    nodes = draw(st.integers(1, 12))
    n = draw(st.integers(1, 25))
    jobs: list[Job] = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 1, 2, 5, 10]))
        runtime = float(draw(st.integers(min_runtime, 30)))
        factor = draw(st.sampled_from(factors))
        jobs.append(Job(i, t, draw(st.integers(1, nodes)), runtime, runtime * factor))
    return nodes, jobs


EXACT_OR_OVER = (1.0, 1.0, 1.5, 3.0)
ANY_ESTIMATE = (0.0, 0.5, 1.0, 2.0)

POLICIES: tuple[Callable[[int], BatchPolicy], ...] = (
    FCFS,
    EASY,
    Conservative,
    Lookahead,
    lambda n: Lookahead(n, depth=2),
)


@settings(max_examples=150, deadline=None)
@given(workloads(ANY_ESTIMATE))
def test_every_job_starts_and_nodes_never_overcommitted(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    for make in POLICIES:
        simulate(make(nodes), jobs)


@settings(max_examples=150, deadline=None)
@given(workloads(EXACT_OR_OVER))
def test_easy_head_never_starts_after_its_shadow(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    for make in (EASY, Lookahead):
        trace = simulate(make(nodes), jobs)
        for jid, shadow in trace.first_shadow.items():
            assert trace.starts[jid] <= shadow, (jid, trace.starts[jid], shadow)


@settings(max_examples=150, deadline=None)
@given(workloads(EXACT_OR_OVER))
def test_conservative_never_starts_after_first_reservation(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    trace = simulate(Conservative(nodes), jobs)
    for jid, planned in trace.first_reservation.items():
        assert trace.starts[jid] <= planned, (jid, trace.starts[jid], planned)


@settings(max_examples=100, deadline=None)
@given(workloads((1.0,), min_runtime=1))
def test_exact_estimates_conservative_starts_exactly_on_reservation(
    case: tuple[int, list[Job]],
) -> None:
    # With exact (positive) estimates nothing ever ends early, so nothing is
    # compressed: the first reservation is the start. (A zero estimate is
    # planned as a millisecond, i.e. as an over-estimate.)
    nodes, jobs = case
    trace = simulate(Conservative(nodes), jobs)
    assert trace.starts == trace.first_reservation


@settings(max_examples=100, deadline=None)
@given(workloads((1.0,)))
def test_fcfs_starts_in_arrival_order(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    trace = simulate(FCFS(nodes), jobs)
    order = sorted(trace.starts, key=lambda j: (trace.starts[j], j))
    assert order == sorted(trace.starts)


# --- naive references -------------------------------------------------------


class NaiveEASY(BatchPolicy):
    """EASY re-derived from scratch at every call (no caching, no sorting tricks)."""

    name = "naive-easy"

    def __init__(self, nodes: int, chooser: str = "first-fit", depth: int = 0) -> None:
        super().__init__(nodes)
        self.queue: list[JobRequest] = []
        self.run: dict[int, tuple[float, int]] = {}
        self.chooser = chooser
        self.depth = depth

    def submit(self, job: JobRequest, now: float) -> None:
        self.queue.append(job)

    def finish(self, job_id: int, now: float) -> None:
        del self.run[job_id]

    @property
    def queue_length(self) -> int:
        return len(self.queue)

    @property
    def free_nodes(self) -> int:
        return self.nodes - sum(s for _, s in self.run.values())

    def schedule(self, now: float) -> list[JobRequest]:
        out: list[JobRequest] = []
        while self.queue and self.queue[0].size <= self.free_nodes:
            job = self.queue.pop(0)
            self.run[job.job_id] = (now + job.estimate, job.size)
            out.append(job)
        if not self.queue:
            return out
        head = self.queue[0]
        free = self.free_nodes
        avail = free
        shadow = now
        for end, size in sorted(self.run.values()):
            if avail >= head.size:
                break
            avail += size
            shadow = max(end, now)
        extra = free + sum(s for e, s in self.run.values() if max(e, now) <= shadow) - head.size
        rest = self.queue[1:] if self.depth == 0 else self.queue[1 : 1 + self.depth]
        if self.chooser == "first-fit":
            chosen = []
            for job in rest:
                long = now + job.estimate > shadow
                if job.size <= free and (not long or job.size <= extra):
                    chosen.append(job)
                    free -= job.size
                    if long:
                        extra -= job.size
        else:
            chosen = brute_force_best(rest, free, extra, shadow - now)
        for job in chosen:
            self.queue.remove(job)
            self.run[job.job_id] = (now + job.estimate, job.size)
            out.append(job)
        return out


def brute_force_best(
    jobs: list[JobRequest], free: int, extra: int, horizon: float
) -> list[JobRequest]:
    """Lexicographically first subset (queue order) using the most nodes."""
    best: tuple[int, tuple[int, ...]] = (-1, ())
    best_set: list[JobRequest] = []
    for picks in itertools.product((1, 0), repeat=len(jobs)):
        chosen = [j for j, p in zip(jobs, picks, strict=True) if p]
        used = sum(j.size for j in chosen)
        used_long = sum(j.size for j in chosen if j.estimate > horizon)
        if used <= free and used_long <= extra and used > best[0]:
            # product() enumerates inclusion vectors from lexicographically
            # largest to smallest, so the first set of a given size wins.
            best = (used, picks)
            best_set = chosen
    return best_set


@settings(max_examples=150, deadline=None)
@given(workloads(ANY_ESTIMATE))
def test_easy_matches_naive_reference(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    assert simulate(EASY(nodes), jobs).starts == simulate(NaiveEASY(nodes), jobs).starts


@st.composite
def small_queues(draw: st.DrawFn) -> tuple[int, list[Job]]:
    nodes, jobs = draw(workloads(ANY_ESTIMATE))
    return nodes, jobs[:9]  # brute force stays cheap


@settings(max_examples=100, deadline=None)
@given(small_queues(), st.sampled_from([0, 1, 3]))
def test_lookahead_matches_brute_force_reference(case: tuple[int, list[Job]], depth: int) -> None:
    nodes, jobs = case
    fast = simulate(Lookahead(nodes, depth=depth), jobs).starts
    slow = simulate(NaiveEASY(nodes, chooser="brute", depth=depth), jobs).starts
    assert fast == slow


class NaiveConservative(BatchPolicy):
    """Conservative backfilling without any pruning: the profile is rebuilt
    from scratch whenever needed and compression tries every job in every pass.
    Exact or over-estimates only (no overrun handling)."""

    name = "naive-conservative"

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self.run: dict[int, tuple[float, int]] = {}  # id -> (planned end, size)
        self.res: dict[int, tuple[JobRequest, float]] = {}  # queue order
        self.dirty = False

    @staticmethod
    def plan(job: JobRequest) -> float:
        return job.estimate if job.estimate > 0 else ZERO_ESTIMATE_PLAN

    def profile(self, now: float, skip: int | None = None) -> Availability:
        prof = Availability(self.nodes, now)
        for end, size in self.run.values():
            prof.reserve(now, end - now, size)
        for jid, (job, start) in self.res.items():
            if jid != skip:
                prof.reserve(start, self.plan(job), job.size)
        return prof

    def submit(self, job: JobRequest, now: float) -> None:
        start = self.profile(now).earliest(job.size, self.plan(job))
        assert start is not None
        self.res[job.job_id] = (job, start)

    def finish(self, job_id: int, now: float) -> None:
        end, _ = self.run.pop(job_id)
        self.dirty = self.dirty or end > now

    @property
    def queue_length(self) -> int:
        return len(self.res)

    @property
    def free_nodes(self) -> int:
        return self.nodes - sum(s for _, s in self.run.values())

    def schedule(self, now: float) -> list[JobRequest]:
        moved = self.dirty
        self.dirty = False
        while moved:
            moved = False
            for jid, (job, old) in list(self.res.items()):
                new = self.profile(now, skip=jid).earliest(job.size, self.plan(job), old)
                if new is not None and new < old:
                    self.res[jid] = (job, new)
                    moved = True
        out = []
        for jid, (job, start) in sorted(self.res.items(), key=lambda kv: kv[1][1]):
            if start <= now and job.size <= self.free_nodes:
                del self.res[jid]
                self.run[jid] = (now + self.plan(job), job.size)
                out.append(job)
        return out


@settings(max_examples=150, deadline=None)
@given(workloads(EXACT_OR_OVER))
def test_conservative_matches_naive_reference(case: tuple[int, list[Job]]) -> None:
    nodes, jobs = case
    fast = simulate(Conservative(nodes), jobs).starts
    slow = simulate(NaiveConservative(nodes), jobs).starts
    assert fast == slow
