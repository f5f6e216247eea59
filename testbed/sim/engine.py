"""Discrete-event simulator in virtual time, driving the pure policies.

Three loops share one contract with the policies (controller/policies/base.py):

* :func:`_run_batch` -- arrivals and completions from a heap; after every
  event time, the policy says which queued jobs start. Jobs run for their
  true run time (the policy only ever sees the estimate).
* :func:`_run_gang_exact` -- quantum by quantum: ask the policy for a
  :class:`QuantumPlan`, progress the runnable jobs with the execution model
  (testbed/sim/execution.py), sub-stepping at completions and phase changes,
  report the measured utilization back (with ``SimConfig.network``, each job's share
  of the CPU, the disk and the link through ``observe_devices``, and each device's
  use of the machine per quantum in ``SimResult.series_devices``; docs/nplus1.md).
* :func:`_run_gang_fluid` -- Feitelson & Rudolph's appendix assumption: the quantum is
  much shorter than the time between arrivals and departures, so a job's
  rate is constant in between. At every such event the loop plays one round
  of the matrix (``slot_count`` quanta, feeding the predictor as the exact
  loop would) and holds the round's mean rates until the next event.

A job larger than the machine is rejected with a reason and the run goes on.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from collections.abc import Callable, Sequence

from controller.policies.base import BatchPolicy, GangPolicy, SpaceSharePolicy
from controller.policies.devices import CPU, DISK, MEASURED, NET
from testbed.sim.execution import gang_rates
from testbed.sim.job import COMPUTE_BOUND, SimJob
from testbed.sim.results import FULL, MatchingStats, SimConfig, SimResult

Progress = Callable[[int], None]

_EPS = 1e-9


class SimulationError(RuntimeError):
    """The policy stopped making progress (a policy bug, not bad input)."""


def simulate(
    jobs: Sequence[SimJob],
    policy: BatchPolicy | GangPolicy,
    config: SimConfig,
    *,
    progress: Progress | None = None,
    until: float | None = None,
) -> SimResult:
    """Run ``jobs`` (any order) under ``policy``; ``progress(k)`` is told of k more ended jobs.

    ``until`` (exact gang loop only): stop at the first quantum boundary at or after that
    time; jobs still running have no end, and ``SimResult.done`` has how far they got
    (Wiseman & Feitelson 2003 §4.1 measured a mix while all of it ran).
    """
    if policy.nodes != config.nodes:
        raise ValueError(f"policy has {policy.nodes} nodes but config has {config.nodes}")
    if isinstance(policy, SpaceSharePolicy) and policy.mpl > 1:
        # Run to completion at full speed would be wrong: the nodes are time-shared.
        raise ValueError(f"no execution model for space sharing at MPL {policy.mpl} (> 1)")
    ordered = sorted(jobs, key=lambda j: (j.submit, j.job_id))
    n = len(ordered)
    nan = math.nan
    result = SimResult(
        policy=getattr(policy, "name", type(policy).__name__),
        config=config,
        jobs=ordered,
        start=array("d", [nan]) * n,
        end=array("d", [nan]) * n,
        cpu=array("d", [0.0]) * n,
    )
    began = time.perf_counter()
    if isinstance(policy, BatchPolicy):
        _run_batch(ordered, policy, result, progress)
    elif config.mode == "exact":
        _run_gang_exact(ordered, policy, config, result, progress, until)
    elif until is not None:
        raise ValueError("until needs the exact mode")
    else:
        _run_gang_fluid(ordered, policy, config, result, progress)
    result.wall_seconds = time.perf_counter() - began
    return result


def _mean_cpu(job: SimJob) -> float:
    if job.phases is COMPUTE_BOUND:  # most jobs: skip the sum (1.0 * 1.0 is exactly 1.0)
        return 1.0
    return sum(p.fraction * p.cpu for p in job.phases)


def _run_batch(
    jobs: list[SimJob], policy: BatchPolicy, res: SimResult, progress: Progress | None
) -> None:
    n = len(jobs)
    nodes = policy.nodes
    index = {j.job_id: i for i, j in enumerate(jobs)}
    submits = [j.submit for j in jobs]  # read at every event: a list beats attribute lookups
    start, end, cpu = res.start, res.end, res.cpu
    st_append, sn_append = res.series_t.append, res.series_n.append
    heap: list[tuple[float, int]] = []  # (end time, job index)
    push, pop = heapq.heappush, heapq.heappop
    submit, finish, schedule = policy.submit, policy.finish, policy.schedule
    compute_bound = COMPUTE_BOUND
    i = 0
    in_system = 0
    pending_report = 0
    inf = math.inf
    while i < n or heap:
        t_arr = submits[i] if i < n else inf
        t_end = heap[0][0] if heap else inf
        now = t_arr if t_arr < t_end else t_end
        # completions first: a job ending at t frees its nodes for one arriving at t
        while heap and heap[0][0] <= now:
            k = pop(heap)[1]
            finish(jobs[k].job_id, now)
            end[k] = now
            in_system -= 1
            pending_report += 1
        while i < n and submits[i] <= now:
            job = jobs[i]
            if job.size > nodes:
                res.rejected.append((job.job_id, f"size {job.size} > {nodes} nodes of the machine"))
            else:
                submit(job.request(), now)
                in_system += 1
            i += 1
        for req in schedule(now):
            k = index[req.job_id]
            job = jobs[k]
            start[k] = now
            runtime = job.runtime
            # (x * 1.0 is x: compute-bound jobs skip the call)
            mean = 1.0 if job.phases is compute_bound else _mean_cpu(job)
            cpu[k] = job.size * runtime * mean
            push(heap, (now + runtime, k))
        st_append(now)
        sn_append(in_system)
        if progress is not None and pending_report >= 1000:
            progress(pending_report)
            pending_report = 0
    if policy.queue_length:
        raise SimulationError(
            f"{policy.queue_length} jobs still queued with nothing running: the policy stalled"
        )
    if progress is not None and pending_report:
        progress(pending_report)


class _Live:
    """Progress of one admitted job in the gang loops."""

    __slots__ = ("cpu_used", "done", "fixed_cpu", "index", "job", "launch_left")

    def __init__(self, index: int, job: SimJob) -> None:
        self.index = index
        self.job = job
        self.done = 0.0  # seconds of dedicated run time completed
        self.cpu_used = 0.0  # processor-seconds of CPU
        self.launch_left = 0.0  # seconds of scheduled time its start-up still needs
        # one phase: cpu_at() is always this and phase_end() always the run time
        self.fixed_cpu: float | None = job.phases[0].cpu if len(job.phases) == 1 else None


def _demand(state: _Live) -> float:
    """The job's CPU utilization in its current phase."""
    fixed = state.fixed_cpu
    return fixed if fixed is not None else state.job.cpu_at(state.done)


def _admit(
    jobs: list[SimJob],
    i: int,
    now: float,
    policy: GangPolicy,
    live: dict[int, _Live],
    res: SimResult,
) -> int:
    """Submit every job that has arrived by ``now``; returns the next index."""
    n = len(jobs)
    while i < n and jobs[i].submit <= now + _EPS:
        job = jobs[i]
        if job.size > policy.nodes:
            res.rejected.append(
                (job.job_id, f"size {job.size} > {policy.nodes} nodes of the machine")
            )
        else:
            policy.submit(job.request(), job.submit)
            live[job.job_id] = _Live(i, job)
        i += 1
    return i


def _zero_length(jobs: list[SimJob], first: int, last: int, live: dict[int, _Live]) -> list[int]:
    """Admitted jobs of ``jobs[first:last]`` with no work, in admission order.

    Only the jobs just admitted can qualify: earlier ones were retired when
    they were admitted.
    """
    return [j.job_id for j in jobs[first:last] if j.runtime <= 0 and j.job_id in live]


def _retire(j: int, now: float, live: dict[int, _Live], policy: GangPolicy, res: SimResult) -> None:
    state = live.pop(j)
    res.end[state.index] = now
    res.cpu[state.index] = state.cpu_used
    if math.isnan(res.start[state.index]):
        res.start[state.index] = now
    policy.finish(j, now)


def _run_gang_exact(
    jobs: list[SimJob],
    policy: GangPolicy,
    cfg: SimConfig,
    res: SimResult,
    progress: Progress | None,
    until: float | None = None,
) -> None:
    n = len(jobs)
    q_len, cs, interf = cfg.quantum, cfg.context_switch, cfg.interference
    launch, launch_cpu, teardown = cfg.launch, cfg.launch_cpu, cfg.teardown
    stop = math.inf if until is None else until
    full = cfg.occupancy == FULL
    device = cfg.device or cfg.network
    network = cfg.network
    resident = cfg.resident_cost
    dev_series: tuple[array[float], array[float], array[float]] | None = None
    if network:
        dev_series = (array("d"), array("d"), array("d"))
        res.series_devices = dict(zip(MEASURED, dev_series, strict=True))
    live: dict[int, _Live] = {}
    # job -> when its teardown ends: its work is done, it still holds its cells
    leaving: dict[int, float] = {}
    stats = MatchingStats()
    res.matching = stats
    prev_running: frozenset[int] = frozenset()
    i = 0
    t = 0.0
    idle_quanta = 0
    backlog = 0.0  # node-seconds of run time admitted and not yet done
    while (i < n or live) and t < stop:
        first = i
        i = _admit(jobs, i, t, policy, live, res)
        for job in jobs[first:i]:
            state = live.get(job.job_id)
            if state is not None:
                backlog += job.size * job.runtime
                state.launch_left = launch
        if leaving:
            for j in [j for j, until in leaving.items() if until <= t + _EPS]:
                _retire(j, leaving.pop(j), live, policy, res)
        if not live:
            if i < n:
                t = max(t, jobs[i].submit)
            continue
        # zero-length jobs end the moment they are admitted
        for j in _zero_length(jobs, first, i, live):
            if launch or teardown:
                continue  # they start and end like any other job
            _retire(j, t, live, policy, res)
        if not live:
            continue
        plan = policy.next_quantum(t)
        running = [j for j in plan.running if j in live]
        stats.record(plan.slot, plan.partner)
        if not running:
            idle_quanta += 1
            if idle_quanta > 1000 and i >= n:
                raise SimulationError(
                    f"{len(live)} jobs in the system but none runnable for 1000 quanta"
                )
            t = min(t + q_len, jobs[i].submit) if i < n and jobs[i].submit > t else t + q_len
            continue
        idle_quanta = 0
        for j in running:
            k = live[j].index
            if math.isnan(res.start[k]):
                res.start[k] = t
        # context switch: a job switched in this quantum loses ``cs`` seconds, then
        # whatever its launch still needs
        quantum_cpu = dict.fromkeys(running, 0.0)
        # with the network term: each job's disk and link seconds in this quantum
        quantum_disk = dict.fromkeys(running, 0.0) if network else None
        quantum_net = dict.fromkeys(running, 0.0) if network else None
        sizes = {j: live[j].job.size for j in running} if network else {}
        node_jobs = [[j for j in jobs_on if j in live] for jobs_on in plan.node_jobs]
        factor = _resident_factors(policy, live, node_jobs, resident) if resident else None
        remaining = q_len
        delay = {j: (cs if j not in prev_running else 0.0) + live[j].launch_left for j in running}
        elapsed = 0.0
        active = {j for j in running if j not in leaving}
        while remaining > _EPS and active:
            states = {j: live[j] for j in active}

            def demand(j: int, states: dict[int, _Live] = states) -> float:
                s = states[j]
                return s.job.cpu_at(s.done)

            def io(j: int, states: dict[int, _Live] = states) -> float:
                s = states[j]
                return s.job.io_at(s.done)

            # while switching in, a job neither progresses nor competes for the CPU
            ready = [[j for j in nj if j in active and delay[j] <= _EPS] for nj in node_jobs]

            def net(j: int, states: dict[int, _Live] = states) -> float:
                s = states[j]
                return s.job.net_at(s.done)

            rates = gang_rates(
                ready, demand, interf, io if device else None, net if network else None, factor
            )
            step = remaining
            for j in active:
                if delay[j] > _EPS:
                    step = min(step, delay[j])
                    continue
                r = rates.get(j, 0.0)
                if r <= 0:
                    continue
                s = states[j]
                boundary = s.job.phase_end(s.done)
                step = min(step, (boundary - s.done) / r)
            step = max(step, 0.0)
            ended: list[int] = []
            for j in active:
                s = states[j]
                if delay[j] > _EPS:
                    delay[j] -= step
                    if s.launch_left > 0:  # the launch is the tail of the delay
                        left = min(s.launch_left, max(0.0, delay[j]))
                        used = (s.launch_left - left) * launch_cpu
                        s.launch_left = left
                        s.cpu_used += used * s.job.size
                        quantum_cpu[j] += used
                    continue
                r = rates.get(j, 0.0)
                u = s.job.cpu_at(s.done)
                s.done += r * step
                backlog -= s.job.size * r * step
                if quantum_disk is not None and quantum_net is not None:
                    # the phase's shares before the progress just made (done moved)
                    back = s.done - r * step
                    quantum_disk[j] += r * s.job.io_at(back) * step
                    quantum_net[j] += r * s.job.net_at(back) * step
                used = r * u * step
                s.cpu_used += used * s.job.size
                quantum_cpu[j] += used
                if s.done >= s.job.runtime - _EPS:
                    ended.append(j)
            remaining -= step
            elapsed += step
            for j in ended:
                active.discard(j)
                backlog -= live[j].job.size * (live[j].job.runtime - live[j].done)
                if teardown:
                    leaving[j] = t + elapsed + teardown
                else:
                    _retire(j, t + elapsed, live, policy, res)
            if ended and progress is not None:
                progress(len(ended))
        # the quantum ends early when every runnable job has ended (nodes would idle),
        # unless slots last the whole quantum (ParPar) or a job in teardown holds them
        if full or active:
            length = q_len
        else:
            length = elapsed
            for j in running:
                until = leaving.get(j)
                if until is not None:
                    length = max(length, min(q_len, until - t))
        t += length
        span = max(elapsed if not full else q_len, _EPS)
        if quantum_disk is not None and quantum_net is not None and dev_series is not None:
            # eq. (1)'s input per device: the share of each device the job used
            policy.observe_devices(
                {
                    j: {
                        CPU: quantum_cpu[j] / span,
                        DISK: quantum_disk[j] / span,
                        NET: quantum_net[j] / span,
                    }
                    for j in running
                }
            )
            cap = cfg.nodes * max(length, _EPS)
            for series, used_by in zip(
                dev_series, (quantum_cpu, quantum_disk, quantum_net), strict=True
            ):
                busy = sum(used_by[j] * sizes[j] for j in running)
                series.append(min(1.0, busy / cap))
        else:
            policy.observe({j: quantum_cpu[j] / span for j in running})
        prev_running = frozenset(active)
        res.series_t.append(t)
        res.series_n.append(len(live))
        res.series_w.append(max(0.0, backlog))
    if until is not None:
        res.done = array("d", [j.runtime for j in jobs])
        for state in live.values():
            res.done[state.index] = state.done
        for k in range(i, n):
            res.done[k] = 0.0


def _resident_factors(
    policy: GangPolicy, live: dict[int, _Live], node_jobs: list[list[int]], cost: float
) -> list[float]:
    """Each node's share of its speed left by the jobs placed on it and frozen in this
    quantum: ``max(0, 1 - cost * frozen)`` (SimConfig.resident_cost). A job placed on a
    node counts there from its placement to its end (teardown included), whether it has
    run yet or not: it is in the matrix, as on ParPar."""
    frozen = [0] * policy.nodes
    for j in live:
        where = policy.placement(j)
        if where is None:
            continue
        for n in where[1]:
            frozen[n] += 1
    for n, jobs in enumerate(node_jobs):
        frozen[n] -= len(jobs)  # the ones runnable here are not frozen
    return [max(0.0, 1.0 - cost * max(0, f)) for f in frozen]


def _run_gang_fluid(
    jobs: list[SimJob],
    policy: GangPolicy,
    cfg: SimConfig,
    res: SimResult,
    progress: Progress | None,
) -> None:
    n = len(jobs)
    q_len, cs, interf = cfg.quantum, cfg.context_switch, cfg.interference
    switched_in = 1.0 - cs / q_len  # share of a quantum left after a context switch
    share_factor = 1.0 - interf
    live: dict[int, _Live] = {}
    stats = MatchingStats()
    res.matching = stats
    record = stats.record
    i = 0
    t = 0.0
    inf = math.inf
    stalls = 0
    next_quantum, observe = policy.next_quantum, policy.observe
    # node_jobs -> (node_jobs, its jobs in order of first appearance, its cells with
    # more than one job), by identity: what gang_rates works out from a plan, done
    # once per distinct plan (policies hand out the same node_jobs object for an
    # unchanged row, pair or alternates) instead of at every quantum
    shapes: dict[
        int, tuple[tuple[tuple[int, ...], ...], tuple[int, ...], tuple[tuple[int, ...], ...]]
    ]
    shapes = {}
    backlog = 0.0  # node-seconds of run time admitted and not yet done
    while i < n or live:
        first = i
        i = _admit(jobs, i, t, policy, live, res)
        for job in jobs[first:i]:
            if job.job_id in live:
                backlog += job.size * job.runtime
        if not live:
            if i < n:
                t = max(t, jobs[i].submit)
            continue
        # zero-length jobs end the moment they are admitted
        for j in _zero_length(jobs, first, i, live):
            _retire(j, t, live, policy, res)
        if not live:
            continue

        # a job's demand is constant within the round (progress is applied after it)
        demands: dict[int, float] = {}

        # one round of the matrix gives each job its share of the coming interval
        rounds = max(1, policy.slot_count)
        mean_rate: dict[int, float] = {}
        mean_util: dict[int, float] = {}
        plans = []
        prev: frozenset[int] = frozenset()
        for _ in range(rounds):
            plan = next_quantum(t)
            plans.append(plan)
            node_jobs = plan.node_jobs
            shape = shapes.get(id(node_jobs))
            if shape is None or shape[0] is not node_jobs:
                if len(shapes) >= 4096:
                    shapes.clear()
                cells = tuple(c for c in dict.fromkeys(node_jobs) if c)
                shape = shapes[id(node_jobs)] = (
                    node_jobs,
                    tuple(dict.fromkeys(j for c in cells for j in c)),
                    tuple(c for c in cells if len(c) > 1),
                )
            # gang_rates (execution.py), on the plan's shape: alone on its nodes a
            # job runs at 1; sharing, at the slowest rate of the nodes it shares
            order, shared = shape[1], shape[2]
            rates = dict.fromkeys(order, 1.0)
            for cell in shared:
                total = 0.0
                for j in cell:
                    d = demands.get(j)
                    if d is None:
                        d = demands[j] = _demand(live[j])
                    total += d
                r = share_factor if total <= 1.0 else share_factor / total
                for j in cell:
                    if r < rates[j]:
                        rates[j] = r
            util: dict[int, float] = {}
            for j, r in rates.items():
                state = live.get(j)
                if state is None:
                    continue
                d = demands.get(j)
                if d is None:
                    d = demands[j] = _demand(state)
                # a job switched in loses the context-switch time of its quantum
                eff = r * switched_in if (cs and j not in prev) else r
                mean_rate[j] = mean_rate.get(j, 0.0) + eff / rounds
                u = util[j] = eff * d
                mean_util[j] = mean_util.get(j, 0.0) + u / rounds
            observe(util)
            if cs:
                prev = frozenset(rates)
        start = res.start
        for j in mean_rate:
            k = live[j].index
            if math.isnan(start[k]):
                start[k] = t
        # the interval lasts until the next arrival, completion or phase change
        dt = jobs[i].submit - t if i < n else inf
        for j, r in mean_rate.items():
            if r <= 0:
                continue
            s = live[j]
            end = s.job.runtime if s.fixed_cpu is not None else s.job.phase_end(s.done)
            dt = min(dt, (end - s.done) / r)
        if dt == inf:
            stalls += 1
            if stalls > 1000:
                raise SimulationError(f"{len(live)} jobs in the system but none runnable")
            dt = q_len * rounds
        else:
            stalls = 0
        dt = max(dt, 0.0)
        weight = dt / (q_len * rounds) if rounds else 0.0
        for plan in plans:
            record(plan.slot, plan.partner, weight)
        ended: list[int] = []
        for j, r in mean_rate.items():
            s = live[j]
            s.done += r * dt
            backlog -= s.job.size * r * dt
            s.cpu_used += mean_util[j] * dt * s.job.size
            if s.done >= s.job.runtime - _EPS * max(1.0, s.job.runtime):
                ended.append(j)
        t += dt
        for j in ended:
            _retire(j, t, live, policy, res)
        if ended and progress is not None:
            progress(len(ended))
        res.series_t.append(t)
        res.series_n.append(len(live))
        res.series_w.append(max(0.0, backlog))
