"""The CDC simulator: processes of space-shared jobs, time-shared on each node by a local scheme.

Discrete events in virtual time (docs/simulator.md, "Communication-driven
coscheduling"). What is modelled:

* **Jobs** arrive, wait in the FIFO queue of the same space-sharing policy
  the controller runs (controller/policies/spaceshare.py: ``size`` distinct
  nodes, at most MPL jobs per node) and run one process per node.
* **A process** executes its program (testbed/sim/cdc/program.py): compute
  on its node's CPU at the node's speed, send (non-blocking), wait for the
  messages it needs by the scheme's waiting action -- spin (keeps the CPU),
  block (yields it), spin-block (spins ``spin_us`` then blocks) -- Yu & Byun
  2011 Table 1.
* **Messages** leave through the sender node's link and enter through the
  receiver's (each serialises at the link bandwidth) and arrive
  ``latency_us`` after leaving; between two processes they arrive in order.
* **Each node's local scheduler** shares the CPU by least weighted CPU time
  received (CFS's virtual runtime; time slices of ``slice_ms``; a woken
  process preempts one that ran ``wakeup_granularity_ms`` more; a context
  switch costs ``context_switch_us``). The boost is the agents' CPU weight:
  the holder's time counts ``boost_weight`` times less, and a process made
  holder is placed first and preempts at once.
* **The boost** is decided by the scheme code the agents run, through the same
  driver (agent/cdc/node.py: counters, ERL of eq. 1): at each tick of the
  decision interval, at each arrival for the schemes that act on arrivals
  (DCS, IB, SB, CC-B; at most one per connection per tick, as the agents'
  one-shot re-armed sockets), and at collective entry and exit (HYBRID).
* **ERL** (eq. 1) with ED measured here as the agents measure it (CPU time
  per time slice of the registered processes over 0.5 s windows); the ERL a
  pending message carries is the sender node's (the header's, or the last
  one the sender's agent published, as our agents gossip it).
* **BCR and MD** exactly as the agents count them: conflicts (two or more
  processes with pending messages) per decision point; MD from the start of
  a wait to the completion of each receive, 0 for a message already there.

Ticks at which nothing the scheme looks at has changed are not evaluated but
counted (``tick_stable_until``; ``exact_ticks`` evaluates every one, and the
tests check both give the same run).

**Fluid mode** (``fluid=Fluid(...)``, for jobs of a minute and more): after
each change of the running set (a job starts or ends) the processes are
simulated in detail for ``settle_s``, then each job's progress (iterations
of its program per second) and every counter's rate are measured over
``measure_s``; the run then jumps ahead to just before the next arrival or
the earliest predicted completion (leaving ``tail_s`` of each job to run in
detail): every job loses from the end of its program the iterations it would
have run meanwhile, the counters gain their rates times the jump, and the
clock of arrivals and job times moves on by the jump. Between changes of the
running set, rates are what they were in the window (the assumption of
Feitelson & Rudolph's appendix the gang simulator's fluid mode makes too,
docs/simulator.md); the tests compare fluid runs with exact ones. A jump
takes body iterations only, so the prologue and epilogue of every later
repetition of an NPB job still run in detail at its end; ``whole_reps``
lets it take those too (cheaper, less accurate per job: docs/simulator.md,
"Why the cost grows faster than the job count"; off by default); ``past_queued``
lets it reach past arrivals that can start no job (off by default).
"""

from __future__ import annotations

import heapq
import math
import random
import time as _time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.cdc.erl import W_R_MAX, PendingMsg, unclamped_w_r
from agent.cdc.node import NodeCdc
from agent.cdc.schemes import CCB, CCS, PB, Event, Hybrid, ProcView, make_scheme
from agent.cdc.schemes import _ArrivalOrder as ArrivalOrder
from controller.policies.base import JobRequest
from controller.policies.spaceshare import SpaceShare
from testbed.sim.cdc.platform import Platform
from testbed.sim.cdc.program import COLL_OFF, COLL_ON, JobProgram

INF = math.inf
_EPS = 1e-12
ED_WINDOW_S = 0.5  # as agent/local.py
GOSSIP_CHANGE = 0.05  # agent/gossip.py: publish when the ERL moved by more than 5 % ...
GOSSIP_PERIOD_S = 0.1  # ... or every 100 ms

# process states
COMPUTE, SPIN, BLOCK, DONE, NEW = 0, 1, 2, 3, 4
# event kinds
(EV_CPU, EV_WAIT, EV_WAKE, EV_ONSET, EV_ARRIVAL, EV_TICK, EV_COLL, EV_SUBMIT, EV_START,
 EV_FLUID) = range(10)  # fmt: skip
# at one instant: arrivals become pending first, then processes run, then the schemes decide
_PRIORITY = (1, 1, 1, 0, 2, 2, 2, 1, 1, 3)
_P_CPU = _PRIORITY[EV_CPU]
heappush = heapq.heappush


@dataclass(frozen=True)
class Fluid:
    """Fluid mode's windows (module docstring), seconds of simulated time."""

    settle_s: float = 0.5
    measure_s: float = 1.0
    tail_s: float = 1.0
    min_jump_s: float = 2.0
    # a jump may also take the prologues and epilogues of repetitions no rank has begun
    # (counted by their compute against one iteration's), not only body iterations
    whole_reps: bool = False
    # a jump may also reach past arrivals that can start no job (the FIFO queue holds one,
    # or the job needs more nodes with a free slot than there are): not just before the next
    # arrival but before the next that starts a job (the running set, and so the rates
    # measured, stay as they are until then)
    past_queued: bool = False

    def __post_init__(self) -> None:
        if min(self.settle_s, self.measure_s, self.tail_s, self.min_jump_s) < 0 or not (
            self.measure_s > 0
        ):
            raise ValueError("fluid windows must be >= 0 s and measure_s > 0")


class SimError(RuntimeError):
    """The simulation cannot go on (a deadlocked program, a policy that never places)."""


@dataclass(frozen=True)
class SimJobSpec:
    """One job of a stream: when it arrives and what it runs."""

    job_id: int
    submit: float
    program: JobProgram
    name: str = ""


@dataclass
class ProcRecord:
    """One process's share of its node, recorded for analyses (no summary reads it): CPU
    received (``cpu_s``), of it spent spinning in a wait (``spin_s``) and held as the
    boost holder (``held_s``); time in message waits (``msg_wait_s``, from the start of a
    wait to its end) and with a pending message (``pending_s``). In fluid mode a jump adds
    each at its rate over the measuring window, as it adds CPU time. With
    ``CdcSim(record=True)``, the evaluated decisions at which two or more of the node's
    processes were pending (``contested``), how many of those made this one the holder
    (``won``), and, for CC, the sum over them of its unclamped W_r (eq. 4) and of its
    pending messages, and at how many of those its W_r was at eq. (4)'s top, 100 (``w_r_top``:
    every correspondent rescheduled, ERL' <= 0, where weights tie)."""

    node: int
    speed: float
    cpu_s: float = 0.0
    spin_s: float = 0.0
    held_s: float = 0.0
    msg_wait_s: float = 0.0
    pending_s: float = 0.0
    contested: int = 0
    won: int = 0
    w_r_sum: float = 0.0
    msgs_sum: int = 0
    w_r_top: int = 0


@dataclass
class JobResult:
    job_id: int
    name: str
    app: str
    size: int
    submit: float
    start: float = math.nan
    end: float = math.nan
    nodes: tuple[int, ...] = ()
    cpu_s: float = 0.0
    # per process, what it got (ProcRecord): read by analyses, not by any summary
    procs: list[ProcRecord] = field(default_factory=list)

    @property
    def wait(self) -> float:
        return self.start - self.submit

    @property
    def response(self) -> float:
        return self.end - self.submit

    @property
    def execution(self) -> float:
        return self.end - self.start


@dataclass
class CdcResult:
    scheme: str
    mpl: int
    jobs: list[JobResult]
    decisions: int = 0
    conflicts: int = 0
    boosts: int = 0
    evaluated: int = 0  # decision points at which the scheme was called
    md_count: int = 0
    md_sum_s: float = 0.0
    events: int = 0
    switches: int = 0
    makespan: float = 0.0
    busy_s: float = 0.0  # CPU the jobs used (spinning included)
    node_time_s: float = 0.0  # nodes x (first arrival .. last end)
    wall_s: float = 0.0
    erl_sum_us: float = 0.0  # ERLs carried by pending messages seen at decisions
    erl_count: int = 0
    per_node: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bcr(self) -> float | None:
        return self.conflicts / self.decisions if self.decisions else None

    @property
    def md_mean_s(self) -> float | None:
        return self.md_sum_s / self.md_count if self.md_count else None


class _Job:
    __slots__ = ("credit", "left", "mark", "procs", "res", "spec")

    def __init__(self, spec: SimJobSpec) -> None:
        self.spec = spec
        self.res = JobResult(
            spec.job_id, spec.name, spec.program.app, spec.program.size, spec.submit
        )
        self.procs: list[_Proc] = []
        self.left = 0
        self.credit = 0.0  # fluid: iterations run in jumps but not yet taken off the program
        self.mark = 0.0  # fluid: iterations done at the start of the measuring window


class _Proc:
    __slots__ = (
        "arr_fire",
        "chans",
        "cpu",
        "extra",
        "held",
        "in_coll",
        "iters",
        "job",
        "key",
        "missing",
        "msg_wait",
        "need",
        "node",
        "onset_t",
        "onset_ver",
        "pblocked",
        "pend_s",
        "pend_t0",
        "pending",
        "rank",
        "rec",
        "remaining",
        "rep",
        "seg",
        "segs",
        "spin_until",
        "spun",
        "state",
        "step",
        "steps",
        "vrt",
        "wait_last",
        "wait_start",
        "wait_ver",
        "waiting",
        "work",
    )

    def __init__(self, job: _Job, rank: int, node: _Node) -> None:
        self.job = job
        self.rank = rank
        self.node = node
        self.key = f"{job.spec.job_id}/{rank}"
        prog = job.spec.program.ranks[rank]
        # mutable: fluid jumps take iterations off the end
        self.segs: list[list[Any]] = [[st, n, b] for (st, n), b in zip(
            prog.segments, prog.body or (True,) * len(prog.segments), strict=False)]  # fmt: skip
        self.iters = 0  # body iterations completed
        self.work = 0.0  # compute done, s at speed 1 (fluid mode's measure of progress)
        self.seg = 0
        self.rep = 0
        self.step = 0
        self.steps = self.segs[0][0] if self.segs else ()
        self.state = NEW
        self.remaining = 0.0
        self.extra = 0.0
        self.vrt = 0.0
        self.cpu = 0.0
        # what ProcRecord reports: CPU while spinning, while holding the boost; time in
        # message waits, and pending (since pend_t0)
        self.spun = 0.0
        self.held = 0.0
        self.msg_wait = 0.0
        self.pend_s = 0.0
        self.pend_t0 = 0.0
        self.rec = ProcRecord(node.idx, node.speed)
        size = job.spec.program.size
        self.chans: list[deque[tuple[float, float]]] = [deque() for _ in range(size)]
        self.arr_fire = [-1] * size  # tick index of the last arrival event per connection
        self.need: dict[int, int] = {}  # src -> messages still to consume in this wait
        self.missing = 0  # of those, not sent yet
        self.wait_last = 0.0  # latest arrival among the needed messages sent
        self.wait_start = 0.0
        self.wait_ver = 0
        self.waiting = False
        self.spin_until = INF
        self.in_coll = False
        self.pblocked = False  # the state page says "blocked" (until the wait returns)
        self.pending = False
        self.onset_t = INF
        self.onset_ver = 0


class _Node:
    __slots__ = (
        "acct_k",
        "acct_next",
        "busy",
        "by_key",
        "cc_erls",
        "cc_key",
        "cc_pend",
        "cc_t",
        "cc_until",
        "cc_views",
        "cdc",
        "cver",
        "decisions_eval",
        "ed_next_k",
        "ed_run",
        "ed_run0",
        "ed_slices",
        "ed_slices0",
        "erl_pub",
        "eval_ver",
        "holder",
        "idx",
        "in_free",
        "last_ran",
        "md_count",
        "md_sum",
        "npend",
        "out_free",
        "phase",
        "procs",
        "pub_next_k",
        "run_start",
        "running",
        "slice_end",
        "speed",
        "stable_t",
        "switches",
        "tick_k",
        "ver",
        "view_ver",
    )

    def __init__(self, idx: int, speed: float, cdc: NodeCdc, phase: float) -> None:
        self.idx = idx
        self.speed = speed
        self.cdc = cdc
        self.phase = phase
        self.procs: list[_Proc] = []
        self.by_key: dict[str, _Proc] = {}
        self.running: _Proc | None = None
        self.last_ran: _Proc | None = None
        self.run_start = 0.0
        self.slice_end = INF
        self.holder: _Proc | None = None
        self.ver = 0
        self.npend = 0
        self.acct_k = -1  # ticks up to this index are counted
        self.acct_next = phase  # the time of tick acct_k + 1
        self.tick_k = -1  # index of the scheduled tick evaluation (-1: none)
        self.out_free = 0.0
        self.in_free = 0.0
        self.busy = 0.0
        self.ed_run = 0.0
        self.ed_slices = 0
        self.ed_run0 = 0.0
        self.ed_slices0 = 0
        self.ed_next_k = 0  # the tick that closes the current ED window
        self.pub_next_k = -1  # gossip: the tick that republishes an ERL that moved < 5 %
        self.erl_pub = 0.0
        self.md_count = 0
        self.md_sum = 0.0
        self.switches = 0
        self.decisions_eval = 0
        self.view_ver = 0  # bumped whenever something the scheme looks at changes
        self.eval_ver = -1  # view_ver at the last decision the scheme made
        self.stable_t = -INF  # until when that decision repeats on the same views
        # CC with two or more pending (_decide): the version of what CC reads in the views
        # (which processes, their pending messages), bumped by every change of it but the
        # clock's (a message becoming visible: cc_until), and what the last evaluation saw
        self.cver = 0
        self.cc_key = -1  # cver at the last evaluation
        self.cc_until = -INF  # its outcome provably repeats on those views until then
        self.cc_erls: list[float] = []  # the ERLs its views carried, in the order added
        self.cc_pend = 0  # processes with pending messages in its views
        self.cc_views: dict[str, ProcView] | None = None  # its views, until repeat_until read
        self.cc_t = 0.0  # its time


class CdcSim:
    """One run: a scheme at an MPL on nodes of given speeds, a job stream (module docstring)."""

    def __init__(
        self,
        scheme: str,
        mpl: int,
        speeds: Sequence[float],
        platform: Platform,
        *,
        seed: int = 1,
        exact_ticks: bool = False,
        progress: Callable[[int], None] | None = None,
        fluid: Fluid | None = None,
        tick_phase: float | None = None,
        record: bool = False,
    ) -> None:
        if mpl < 1:
            raise ValueError(f"MPL must be >= 1, got {mpl}")
        self.scheme_name = scheme
        self.mpl = 1 if scheme == "batch" else mpl
        self.p = platform
        self.exact_ticks = exact_ticks
        self.progress = progress
        self.record = record  # count each process's contested decisions (ProcRecord)
        rng = random.Random(seed)
        T = platform.decision_s
        self.T = T
        slice_s = platform.erl_slice_s
        self.nodes: list[_Node] = []
        for i, sp in enumerate(speeds):
            sch = make_scheme(scheme, self.mpl, T, slice_s)
            cdc = NodeCdc(sch, platform.context_switch_us)
            # each agent's ticks run on their own phase (a test may fix it)
            phase = rng.random() * T if tick_phase is None else tick_phase
            self.nodes.append(_Node(i, sp * (1.0 - platform.agent_cpu), cdc, phase))
        probe = self.nodes[0].cdc.scheme
        self.recv_wait = probe.recv_wait
        self.on_arrival = Event.ARRIVAL in probe.reacts_to
        self.on_coll = Event.COLL_ON in probe.reacts_to
        self.uses_erl = isinstance(probe, CCS | CCB)
        # which schemes need their ticks at all, and on what
        self.ticks_matter = isinstance(probe, PB | CCS | CCB | ArrivalOrder)
        self.hybrid = isinstance(probe, Hybrid)
        self.policy = SpaceShare(len(speeds), self.mpl, scheme=scheme)
        self.heap: list[tuple[float, int, int, int, Any, int]] = []
        self.seq = 0
        self.now = 0.0
        self.jobs: dict[int, _Job] = {}
        self.done_jobs = 0
        self.events = 0
        self.lat = platform.latency_us * 1e-6
        self.bw = platform.bandwidth_gbps * 1e9 / 8.0
        self.cs = platform.context_switch_us * 1e-6
        self.slice = platform.slice_ms * 1e-3
        self.spin = platform.spin_us * 1e-6
        self.wake = platform.wake_us * 1e-6
        self.agent_delay = platform.agent_delay_us * 1e-6
        self.gran = platform.wakeup_granularity_ms * 1e-3
        self.boost = platform.boost_weight
        self.send_cpu = platform.send_cpu_us * 1e-6
        self.recv_cpu = platform.recv_cpu_us * 1e-6
        self.copy = platform.copy_ns_per_byte * 1e-9
        self.gossip = platform.erl_exchange == "gossip"
        self.erl_sum = 0.0
        self.erl_n = 0
        self.fluid = fluid
        self.offset = 0.0  # fluid: how far the arrivals' clock is ahead of the processes'
        self.fluid_ver = 0
        self.jumps = 0
        self.jumped_s = 0.0
        self.stale_cpu = 0  # CPU events popped after their node re-armed (run's loop drops them)
        self._order: list[_Job] = []  # jobs by arrival
        self._next_arrival = 0
        self._snap: dict[str, Any] = {}

    # ---- the event queue ------------------------------------------------------------
    def _push(self, t: float, kind: int, obj: Any, ver: int = 0) -> None:
        self.seq += 1
        heappush(self.heap, (t, _PRIORITY[kind], self.seq, kind, obj, ver))

    # ---- running a stream -------------------------------------------------------------
    def run(self, jobs: Sequence[SimJobSpec], horizon: float = INF) -> CdcResult:
        began = _time.perf_counter()
        for spec in jobs:
            if spec.program.size > len(self.nodes):
                raise SimError(
                    f"job {spec.job_id} needs {spec.program.size} nodes; the machine has "
                    f"{len(self.nodes)}"
                )
            j = _Job(spec)
            self.jobs[spec.job_id] = j
            self._order.append(j)
        self._order.sort(key=lambda j: (j.spec.submit, j.spec.job_id))
        self._push_arrival()
        heap = self.heap
        pop = heapq.heappop
        handlers = (
            self._ev_cpu,
            self._ev_wait,
            self._ev_wake,
            self._ev_onset,
            self._ev_arrival,
            self._ev_tick,
            self._ev_coll,
            self._ev_submit,
            self._ev_start,
            self._ev_fluid,
        )
        n = len(jobs)
        events = 0
        stale = 0
        while heap and self.done_jobs < n:
            t, _p, _s, kind, obj, ver = pop(heap)
            if t > horizon:
                break
            if t < self.now:
                raise SimError(f"event of kind {kind} at {t!r} before now {self.now!r} (a bug)")
            self.now = t
            events += 1
            if kind == EV_CPU and ver != obj.ver:
                stale += 1
                continue  # re-armed since (the commonest stale event): _ev_cpu would return
            handlers[kind](t, obj, ver)
        self.events = events
        self.stale_cpu = stale
        if self.done_jobs < n and not math.isfinite(horizon):
            stuck = [
                j.res.name or j.res.job_id for j in self.jobs.values() if math.isnan(j.res.end)
            ]
            raise SimError(f"{len(stuck)} jobs never ended (deadlocked programs?): {stuck[:5]}")
        return self._result(began)

    def _result(self, began: float) -> CdcResult:
        res = CdcResult(self.scheme_name, self.mpl, [j.res for j in self.jobs.values()])
        for nd in self.nodes:
            self._account(nd, self.now)
            c = nd.cdc.counters
            res.decisions += c.decisions
            res.conflicts += c.conflicts
            res.boosts += c.boosts
            res.evaluated += nd.decisions_eval
            res.md_count += nd.md_count
            res.md_sum_s += nd.md_sum
            res.switches += nd.switches
            res.busy_s += nd.busy
            res.per_node.append(
                {
                    "node": nd.idx,
                    "speed": nd.speed,
                    "decisions": c.decisions,
                    "conflicts": c.conflicts,
                    "boosts": c.boosts,
                    "busy_s": nd.busy,
                    "erl_us": nd.cdc.erl_us,
                    "ed_us": nd.cdc.ed_us,
                }
            )
        ends = [j.end for j in res.jobs if not math.isnan(j.end)]
        first = min((j.submit for j in res.jobs), default=0.0)
        res.makespan = (max(ends) - first) if ends else 0.0
        res.node_time_s = res.makespan * len(self.nodes)
        res.events = self.events
        res.erl_sum_us, res.erl_count = self.erl_sum, self.erl_n
        res.wall_s = _time.perf_counter() - began
        return res

    # ---- jobs ---------------------------------------------------------------------------
    def _push_arrival(self) -> None:
        """Queue the next arrival (at its time on the processes' clock)."""
        if self._next_arrival < len(self._order):
            j = self._order[self._next_arrival]
            self._push(max(self.now, j.spec.submit - self.offset), EV_SUBMIT, j, self.jumps)

    def _ev_submit(self, t: float, job: _Job, ver: int) -> None:
        if ver != self.jumps:
            return  # queued before a fluid jump moved the clock
        self._next_arrival += 1
        self._push_arrival()
        self.policy.submit(JobRequest(job.spec.job_id, job.spec.program.size, 0.0), t)
        self._place(t)

    def _place(self, t: float) -> None:
        for req in self.policy.schedule(t):
            job = self.jobs[req.job_id]
            nodes = self.policy.placement(req.job_id) or ()
            job.res.start = t + self.offset
            job.res.nodes = tuple(nodes)
            job.procs = [_Proc(job, r, self.nodes[n]) for r, n in enumerate(nodes)]
            job.left = len(job.procs)
            for p in job.procs:
                nd = p.node
                if t > nd.acct_next:  # _account inline
                    self._account_to(nd, self._tick_before(nd, t))
                nd.procs.append(p)
                nd.by_key[p.key] = p
                nd.view_ver += 1
                nd.cver += 1
            self._push(t + self.p.launch_s, EV_START, job)
            self._changed(t)

    # ---- fluid mode ------------------------------------------------------------------------
    def _changed(self, t: float) -> None:
        """The running set changed: settle, then measure (fluid mode)."""
        if self.fluid is None:
            return
        self.fluid_ver += 1
        self._push(t + self.fluid.settle_s, EV_FLUID, None, self.fluid_ver * 2)

    def _running_jobs(self) -> list[_Job]:
        return [j for j in self.jobs.values() if j.procs and j.left and not math.isnan(j.res.start)]

    @staticmethod
    def _iterations(j: _Job) -> float:
        """How far the job has got, in iterations of its program: each rank's compute done
        over the compute of one iteration (iterations counted where they compute nothing),
        mean over the ranks."""
        tot = 0.0
        for p in j.procs:
            per = 0.0
            for st, _n, body in p.segs:
                if body:
                    per = sum(x[0] for x in st)
                    break
            if per > 0:
                tot += p.work / per
            else:
                tot += p.iters
                if p.seg < len(p.segs) and p.segs[p.seg][2]:
                    tot += p.step / len(p.steps)
        return tot / len(j.procs)

    def _ev_fluid(self, t: float, _obj: Any, ver: int) -> None:
        assert self.fluid is not None
        if ver // 2 != self.fluid_ver:
            return
        if ver % 2 == 0:  # settled: start measuring
            for j in self._running_jobs():
                j.mark = self._iterations(j)
            self._snap = self._counters()
            self._snap["t"] = t
            self._push(t + self.fluid.measure_s, EV_FLUID, None, ver + 1)
            return
        self._jump(t)

    def _counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": []}
        for nd in self.nodes:
            self._account(nd, self.now)
            if nd.running is not None:
                self._charge(nd, self.now)
            c = nd.cdc.counters
            out["nodes"].append(
                (
                    c.decisions,
                    c.conflicts,
                    c.boosts,
                    c.ticks,
                    nd.md_count,
                    nd.md_sum,
                    nd.busy,
                    nd.switches,
                    nd.decisions_eval,
                )
            )
        out["cpu"] = {
            p: (
                p.cpu,
                p.spun,
                p.held,
                p.msg_wait + (self.now - p.wait_start) * p.waiting,
                p.pend_s + (self.now - p.pend_t0) * p.pending,
            )
            for j in self._running_jobs()
            for p in j.procs
        }
        return out

    def _jump(self, t: float) -> None:
        """Measured: take the coming stretch in one step (module docstring)."""
        assert self.fluid is not None
        f = self.fluid
        w = t - self._snap["t"]
        jobs = self._running_jobs()
        if w <= 0 or not jobs:
            return
        rates: dict[_Job, float] = {}
        horizon = self._arrival_horizon(t)
        for j in jobs:
            r = (self._iterations(j) - j.mark) / w
            if r <= 0 and w < 3 * f.measure_s:
                # no progress: measure longer before believing it (a job starved by a
                # boost for a second may run the next)
                self._push(t + f.measure_s, EV_FLUID, None, self.fluid_ver * 2 + 1)
                return
            rates[j] = max(0.0, r)
            if r > 0:
                left = self._removable_work(j) if f.whole_reps else self._removable(j)
                horizon = min(horizon, left / r - f.tail_s)
        if horizon < f.min_jump_s:
            return
        d = horizon
        for j, r in rates.items():
            j.credit += r * d
            if f.whole_reps:
                j.credit -= self._remove_work(j, j.credit)
                continue
            n = int(j.credit)
            if n:
                n = self._remove(j, n)
                j.credit -= n
        now = self._counters()
        k = d / w
        for nd, a, b in zip(self.nodes, self._snap["nodes"], now["nodes"], strict=True):
            c = nd.cdc.counters
            c.decisions += round((b[0] - a[0]) * k)
            c.conflicts += round((b[1] - a[1]) * k)
            c.boosts += round((b[2] - a[2]) * k)
            c.ticks += round((b[3] - a[3]) * k)
            nd.md_count += round((b[4] - a[4]) * k)
            nd.md_sum += (b[5] - a[5]) * k
            nd.busy += (b[6] - a[6]) * k
            nd.switches += round((b[7] - a[7]) * k)
        for p, b5 in now["cpu"].items():
            a5 = self._snap["cpu"].get(p, b5)
            p.cpu += (b5[0] - a5[0]) * k
            # the records' times (ProcRecord) at their rates too, as the CPU time
            p.spun += (b5[1] - a5[1]) * k
            p.held += (b5[2] - a5[2]) * k
            p.msg_wait += (b5[3] - a5[3]) * k
            p.pend_s += (b5[4] - a5[4]) * k
        self.offset += d
        self.jumps += 1
        self.jumped_s += d
        self._push_arrival()  # the next arrival is nearer now

    def _arrival_horizon(self, t: float) -> float:
        """How far ahead of ``t`` the next arrival that may change the running set is: the
        next arrival, or, with ``past_queued``, the next that can start a job -- no job ends
        before the jump's horizon, so while the FIFO queue holds a job every arrival joins it
        (strict FIFO: controller/policies/spaceshare.py), and so does one that needs more
        nodes with a free slot than there are now."""
        assert self.fluid is not None
        i, order = self._next_arrival, self._order
        if self.fluid.past_queued:
            blocked = self.policy.queue_length > 0
            room = self.policy.open_nodes
            while i < len(order) and (blocked or order[i].spec.program.size > room):
                blocked = True
                i += 1
        if i >= len(order):
            return INF
        return order[i].spec.submit - self.offset - t

    @staticmethod
    def _removable(j: _Job) -> float:
        """Iterations of the job's program no rank has begun (what a jump may take)."""
        first = max(p.seg for p in j.procs)
        left = 0.0
        p0 = j.procs[0]
        for i in range(first, len(p0.segs)):
            _st, n, body = p0.segs[i]
            if not body:
                continue
            if i == first:
                n -= 1 + max(p.rep for p in j.procs if p.seg == first)
            left += max(0, n)
        return left

    @staticmethod
    def _remove(j: _Job, n: int) -> int:
        """Take up to ``n`` iterations off the end of every rank's program; how many were."""
        first = max(p.seg for p in j.procs)
        started = 1 + max(p.rep for p in j.procs if p.seg == first)
        done = 0
        nsegs = len(j.procs[0].segs)
        for i in range(nsegs - 1, first - 1, -1):
            if done >= n:
                break
            seg0 = j.procs[0].segs[i]
            if not seg0[2]:
                continue
            avail = seg0[1] - (started if i == first else 0)
            m = min(n - done, avail)
            if m <= 0:
                continue
            for p in j.procs:
                p.segs[i][1] -= m
            done += m
        return done

    @staticmethod
    def _seg_weights(j: _Job) -> list[float] | None:
        """Each segment's compute per repetition in iterations (``_iterations``' unit: one
        body iteration's compute), mean over the ranks; None if a rank's body computes
        nothing (then only body iterations can be counted)."""
        per_rank: list[list[float]] = []
        for p in j.procs:
            work = [sum(x[0] for x in st) for st, _n, _b in p.segs]
            per = next((w for w, seg in zip(work, p.segs, strict=True) if seg[2]), 0.0)
            if per <= 0:
                return None
            per_rank.append([w / per for w in work])
        return [sum(col) / len(col) for col in zip(*per_rank, strict=True)]

    @classmethod
    def _removable_work(cls, j: _Job) -> float:
        """Fluid ``whole_reps``: what a jump may take, in iterations of compute -- the body
        iterations no rank has begun and every later segment (prologues, epilogues)."""
        wts = cls._seg_weights(j)
        if wts is None:
            return cls._removable(j)
        first = max(p.seg for p in j.procs)
        p0 = j.procs[0]
        left = 0.0
        for i in range(first, len(p0.segs)):
            _st, n, body = p0.segs[i]
            if i == first:
                if not body:
                    continue  # begun
                n -= 1 + max(p.rep for p in j.procs if p.seg == first)
            left += max(0, n) * wts[i]
        return left

    @classmethod
    def _remove_work(cls, j: _Job, budget: float) -> float:
        """Fluid ``whole_reps``: take up to ``budget`` iterations of compute off the end of
        every rank's program, whole segments or body iterations, contiguously from the end;
        how much was taken."""
        wts = cls._seg_weights(j)
        if wts is None:
            return float(cls._remove(j, int(budget)))
        first = max(p.seg for p in j.procs)
        started = 1 + max(p.rep for p in j.procs if p.seg == first)
        left = budget
        p0 = j.procs[0]
        for i in range(len(p0.segs) - 1, first - 1, -1):
            _st, n, body = p0.segs[i]
            if i == first:
                if not body:
                    break  # begun
                n -= started
            if n <= 0:
                continue
            w = wts[i]
            m = min(n, int(left / w)) if w > 0 else n
            if body and m > 0:
                for p in j.procs:
                    p.segs[i][1] -= m
                left -= m * w
            elif not body and m == n:
                for p in j.procs:
                    p.segs[i][1] = 0
                left -= n * w
            if m < n:
                break  # what is left of this segment stays: nothing before it goes
        return budget - left

    def _ev_start(self, t: float, job: _Job, _v: int) -> None:
        for p in job.procs:
            # a new process starts at the node's least CPU received, as CFS places a new task
            p.vrt = self._base_vrt(p.node, p)
            p.state = COMPUTE
            p.node.cver += 1
            self._load_step(p)
            self._runnable(p, t)

    def _base_vrt(self, nd: _Node, p: _Proc) -> float:
        if nd.running is not None:
            self._charge(nd, self.now)
        run = [q.vrt for q in nd.procs if q is not p and (q.state == COMPUTE or q.state == SPIN)]
        if run:
            return min(run)
        return max((q.vrt for q in nd.procs if q is not p and q.state != NEW), default=0.0)

    def _proc_done(self, p: _Proc, t: float) -> None:
        nd = p.node
        if t > nd.acct_next:  # _account inline
            self._account_to(nd, self._tick_before(nd, t))
        p.state = DONE
        nd.cver += 1
        if p.pending:
            p.pending = False
            p.pend_s += t - p.pend_t0
            nd.npend -= 1
            self._dirty(nd, t)
        nd.procs.remove(p)
        del nd.by_key[p.key]
        nd.view_ver += 1
        job = p.job
        job.res.cpu_s += p.cpu
        r = p.rec
        r.cpu_s, r.spin_s, r.held_s, r.msg_wait_s, r.pending_s = (
            p.cpu,
            p.spun,
            p.held,
            p.msg_wait,
            p.pend_s,
        )
        job.res.procs.append(r)
        job.left -= 1
        if nd.holder is p:
            nd.holder = None
        if job.left == 0:
            job.res.end = t + self.offset
            self.done_jobs += 1
            self._changed(t)
            self.policy.finish(job.spec.job_id, t)
            if self.progress is not None:
                self.progress(1)
            self._place(t)

    # ---- programs -----------------------------------------------------------------------
    def _load_step(self, p: _Proc) -> None:
        """Set the current step's compute (plus the CPU the library spends on its sends)."""
        st = p.steps[p.step]
        p.remaining = st[0] + len(st[1]) * self.send_cpu + p.extra
        p.extra = 0.0

    def _next_step(self, p: _Proc) -> bool:
        """Move to the next step; False when the program has ended."""
        p.step += 1
        if p.step < len(p.steps):
            return True
        p.step = 0
        p.rep += 1
        if p.segs[p.seg][2]:
            p.iters += 1
        if p.rep < p.segs[p.seg][1]:
            return True
        p.rep = 0
        p.seg += 1
        while p.seg < len(p.segs) and p.segs[p.seg][1] <= 0:
            p.seg += 1
        if p.seg >= len(p.segs):
            return False
        p.steps = p.segs[p.seg][0]
        return True

    def _advance(self, p: _Proc, t: float) -> None:
        """The current step's compute is done: send, wait, go on while nothing blocks."""
        while True:
            st = p.steps[p.step]
            p.work += st[0]
            flags = st[4]
            if flags & COLL_ON and not p.in_coll:
                p.in_coll = True
                p.node.view_ver += 1
                if self.hybrid:
                    self._push(t + self.agent_delay, EV_COLL, p, 1)
            for dst, nbytes in st[1]:
                self._send(p, dst, nbytes, t)
            recvs = st[2]
            if recvs and not self._start_wait(p, recvs, t):
                return  # waiting: spinning (still running) or blocked
            if flags & COLL_OFF and p.in_coll:
                p.in_coll = False
                p.node.view_ver += 1
                if self.hybrid:
                    self._push(t + self.agent_delay, EV_COLL, p, 0)
            if not self._next_step(p):
                self._proc_done(p, t)
                self._reschedule(p.node, t)
                return
            self._load_step(p)
            if p.remaining > 0:
                p.state = COMPUTE
                return

    # ---- messages -----------------------------------------------------------------------
    def _send(self, p: _Proc, dst: int, nbytes: int, t: float) -> None:
        q = p.job.procs[dst]
        sn, dn = p.node, q.node
        ser = nbytes / self.bw
        leave = (sn.out_free if sn.out_free > t else t) + ser
        sn.out_free = leave
        arr = leave + self.lat
        if dn.in_free + ser > arr:
            arr = dn.in_free + ser
        dn.in_free = arr
        erl = 0.0  # the sender's ERL the message carries (only CC reads it)
        if self.uses_erl:
            erl = sn.erl_pub if self.gossip else sn.cdc.erl_us
        ch = q.chans[p.rank]
        if not ch or (q.waiting and q.state == SPIN and dn.running is q):
            dn.cver += 1  # a new head, or past a running spinner's needed ones (_views)
        ch.append((arr, erl))
        src = p.rank
        absorbed = False
        if q.waiting:
            k = q.need.get(src, 0)
            # this message is needed if the connection held fewer than k before it
            if k and len(q.chans[src]) <= k:
                q.missing -= 1
                if arr > q.wait_last:
                    q.wait_last = arr
                if q.missing == 0:
                    self._wait_ready(q, t)
                absorbed = q.node.running is q and q.state == SPIN
        if not absorbed and not q.pending and arr < q.onset_t:
            q.onset_t = arr
            q.onset_ver += 1
            self.seq += 1
            heappush(self.heap, (arr, _PRIORITY[EV_ONSET], self.seq, EV_ONSET, q, q.onset_ver))
        if self.on_arrival:
            k = int((arr - dn.phase) / self.T)
            if q.arr_fire[src] != k:
                q.arr_fire[src] = k
                self.seq += 1
                heappush(
                    self.heap,
                    (arr + self.agent_delay, _PRIORITY[EV_ARRIVAL], self.seq, EV_ARRIVAL, q, src),
                )

    def _start_wait(self, p: _Proc, recvs: tuple[int, ...], t: float) -> bool:
        """Begin a wait at ``t``: the library first reads what is there (MD 0 for those).
        True if that was every message the wait needs."""
        need: dict[int, int] = {}
        for s in recvs:
            need[s] = need.get(s, 0) + 1
        chans = p.chans
        got = 0
        missing = 0
        last = 0.0
        for s in list(need):
            k = need[s]
            ch = chans[s]
            while k and ch and ch[0][0] <= t:
                ch.popleft()
                k -= 1
                got += 1
            if not k:
                del need[s]
                continue
            need[s] = k
            have = len(ch)
            if have < k:
                missing += k - have
            if have:
                a = ch[(have if have < k else k) - 1][0]
                if a > last:
                    last = a
        nd = p.node
        nd.md_count += got  # there before the wait began: MD 0
        if got:
            nd.cver += 1
        if not need:
            self._after_consume(p, t, len(recvs), p.steps[p.step][3])
            return True
        if got and p.pending:
            self._recheck_pending(p, t)
        p.need = need
        p.missing = missing
        p.wait_last = last
        p.wait_start = t
        p.wait_ver += 1
        p.waiting = True
        mode = self.recv_wait
        if mode == "block":
            self._block(p, t)
        else:
            p.state = SPIN
            nd.cver += 1  # running, waiting, spinning: its view reads past the needed ones
            p.spin_until = t + self.spin if mode == "spinblock" else INF
            if missing == 0:
                self._wait_ready(p, t)
        return False

    def _wait_ready(self, p: _Proc, t: float) -> None:
        """Every needed message is sent; the last arrives at ``p.wait_last``."""
        if p.state == BLOCK:
            w = p.wait_last
            self.seq += 1
            heappush(
                self.heap,
                (
                    (t if t > w else w) + self.wake,
                    _PRIORITY[EV_WAKE],
                    self.seq,
                    EV_WAKE,
                    p,
                    p.wait_ver,
                ),
            )
        elif p.state == SPIN and p.node.running is p:
            w = p.wait_last
            self.seq += 1
            heappush(
                self.heap, (t if t > w else w, _PRIORITY[EV_WAIT], self.seq, EV_WAIT, p, p.wait_ver)
            )
        # a spinning process off the CPU completes when it is switched in

    def _consume_arrived(self, p: _Proc, t: float, since: float) -> bool:
        """Complete the wait's receives that arrived by ``t`` (observed at max(arrival, since));
        True when the wait is over."""
        nd = p.node
        need = p.need
        ws = p.wait_start
        for s in list(need):
            k = need[s]
            ch = p.chans[s]
            while k and ch and ch[0][0] <= t:
                a = ch.popleft()[0]
                nd.cver += 1
                obs = a if a > since else since
                nd.md_count += 1
                nd.md_sum += obs - ws if obs > ws else 0.0
                k -= 1
            if k:
                need[s] = k
            else:
                del need[s]
        if p.pending:
            self._recheck_pending(p, t)
        return not need

    def _after_consume(self, p: _Proc, t: float, nmsg: int, nbytes: int) -> None:
        """The receives' CPU goes to the next compute; the pending state may end."""
        p.extra += nmsg * self.recv_cpu + nbytes * self.copy
        if p.pending:
            self._recheck_pending(p, t)
        self._schedule_onset(p, t)

    def _recheck_pending(self, p: _Proc, t: float) -> None:
        for ch in p.chans:
            if ch and ch[0][0] <= t:
                return
        nd = p.node
        if t > nd.acct_next:  # _account inline
            self._account_to(nd, self._tick_before(nd, t))
        p.pending = False
        p.pend_s += t - p.pend_t0
        nd.npend -= 1
        self._dirty(nd, t)
        self._schedule_onset(p, t)

    def _schedule_onset(self, p: _Proc, t: float) -> None:
        """If not pending, an onset check at the next arrival still to come."""
        if p.pending:
            return
        first = INF
        for ch in p.chans:
            if ch:
                a = ch[0][0]
                if a < first:
                    first = a
        if first == INF:
            return
        if first <= t:
            first = t
        if first < p.onset_t:  # onset_t: the time of the onset check already queued, or inf
            p.onset_t = first
            p.onset_ver += 1
            self.seq += 1
            heappush(self.heap, (first, _PRIORITY[EV_ONSET], self.seq, EV_ONSET, p, p.onset_ver))

    def _finish_wait(self, p: _Proc, t: float) -> None:
        """The wait is over: account its receives, go on with the program."""
        if p.state == SPIN and p.node.running is p:
            p.node.cver += 1
        p.waiting = False
        p.msg_wait += t - p.wait_start
        p.pblocked = False
        p.spin_until = INF
        st = p.steps[p.step]
        self._after_consume(p, t, len(st[2]), st[3])
        flags = st[4]
        if flags & COLL_OFF and p.in_coll:
            p.in_coll = False
            p.node.view_ver += 1
            if self.hybrid:
                self._push(t + self.agent_delay, EV_COLL, p, 0)
        if not self._next_step(p):
            self._proc_done(p, t)
            return
        self._load_step(p)
        p.state = COMPUTE
        if p.remaining <= 0:
            self._advance(p, t)

    # ---- events ----------------------------------------------------------------------------
    def _ev_wait(self, t: float, p: _Proc, ver: int) -> None:
        nd = p.node
        if ver != p.wait_ver or not p.waiting or nd.running is not p or p.state != SPIN:
            return
        self._charge(nd, t)
        if self._consume_arrived(p, t, nd.run_start):
            self._finish_wait(p, t)
            self._continue(nd, p, t)
        else:  # pragma: no cover - every needed message had arrived
            self._arm(nd, t)

    def _ev_wake(self, t: float, p: _Proc, ver: int) -> None:
        if ver != p.wait_ver or p.state != BLOCK:
            return
        self._runnable(p, t)

    def _ev_onset(self, t: float, p: _Proc, ver: int) -> None:
        if ver != p.onset_ver or p.state == DONE:
            return
        p.onset_t = INF
        nd = p.node
        # a running receiver reads what it waits for
        if nd.running is p and p.waiting and self._consume_arrived(p, t, nd.run_start):
            self._charge(nd, t)
            self._finish_wait(p, t)
            self._continue(nd, p, t)
            return
        if p.pending:
            return
        for ch in p.chans:
            if ch and ch[0][0] <= t:
                if t > nd.acct_next:  # _account inline
                    self._account_to(nd, self._tick_before(nd, t))
                p.pending = True
                p.pend_t0 = t
                nd.npend += 1
                self._dirty(nd, t)
                return
        self._schedule_onset(p, t)

    def _ev_arrival(self, t: float, p: _Proc, src: int) -> None:
        if p.state == DONE or p.state == NEW:
            return
        self._decide(p.node, t, Event.ARRIVAL, p)

    def _ev_coll(self, t: float, p: _Proc, on: int) -> None:
        if p.state == DONE:
            return
        self._decide(p.node, t, Event.COLL_ON if on else Event.COLL_OFF, p)

    def _ev_tick(self, t: float, nd: _Node, k: int) -> None:
        if k != nd.tick_k:
            return
        nd.tick_k = -1
        if nd.acct_k >= k:
            return
        self._account_to(nd, k - 1)
        nd.acct_k = k
        nd.acct_next = nd.phase + (k + 1) * self.T
        self._decide(nd, t, Event.TICK, None, tick=k)

    # ---- decisions ---------------------------------------------------------------------------
    def _tick_before(self, nd: _Node, t: float) -> int:
        """The last tick strictly before ``t`` (tick k is at ``phase + k * T``, exactly as
        its event is queued, so a tick at ``t`` itself is left to its own event)."""
        T, ph = self.T, nd.phase
        k = math.floor((t - ph) / T)
        while ph + k * T >= t:
            k -= 1
        while ph + (k + 1) * T < t:
            k += 1
        return k

    def _account_to(self, nd: _Node, k: int) -> None:
        if k > nd.acct_k:
            nd.cdc.skip_ticks(k - nd.acct_k, nd.npend)
            nd.acct_k = k
            nd.acct_next = nd.phase + (k + 1) * self.T

    def _account(self, nd: _Node, t: float) -> None:
        """Count the ticks up to ``t`` that were not evaluated (their outcome repeated)."""
        if t > nd.acct_next:  # else no tick strictly before t is uncounted
            self._account_to(nd, self._tick_before(nd, t))

    def _dirty(self, nd: _Node, t: float) -> None:
        """Something a decision looks at changed: evaluate the next tick."""
        nd.view_ver += 1
        if not self.ticks_matter and not self.uses_erl:
            return
        # the first tick not yet counted at or after t (a tick at t itself comes after this)
        k = nd.acct_k + 1
        if t > nd.acct_next:
            kb = self._tick_before(nd, t) + 1
            if k > kb:
                kb = k
            k = kb
        if nd.tick_k == -1 or nd.tick_k > k:
            nd.tick_k = k
            self.seq += 1
            heappush(
                self.heap, (nd.phase + k * self.T, _PRIORITY[EV_TICK], self.seq, EV_TICK, nd, k)
            )

    def _views(self, nd: _Node, t: float) -> dict[str, ProcView]:
        """What the agent would see now. The one side effect: with CC, the ERLs the pending
        messages carry are added to the run's ERL statistics (one at a time, in the order of
        the views, so the sum is the same as adding them after the decision); with CC too,
        the node keeps those ERLs (``cc_erls``), how many views are pending (``cc_pend``) and
        the earliest arrival still to become visible among the messages looked at
        (``cc_until``: the views hold until then unless ``cver`` moves)."""
        if not self.uses_erl:
            return self._views_pending(nd, t)
        out: dict[str, ProcView] = {}
        running = nd.running
        count_erl = True
        esum = self.erl_sum
        erls: list[float] = []
        vis = INF
        npv = 0
        for p in nd.procs:
            if p.state == NEW:
                continue
            msgs: list[PendingMsg] = []
            if not (p is running and p.waiting and p.state == SPIN):
                # the common case, in one tight loop: each connection's first message, if in
                for ch in p.chans:
                    if ch:
                        a, erl = ch[0]
                        if a <= t:
                            msgs.append(PendingMsg(erl, a))
                            if count_erl:
                                esum += erl
                                erls.append(erl)
                        elif a < vis:
                            vis = a
                if msgs:
                    npv += 1
                out[p.key] = ProcView(p.key, tuple(msgs), p.pblocked, p.in_coll)
                continue
            for s, ch in enumerate(p.chans):
                if ch:
                    if s in p.need:
                        # a running receiver has read what its wait needs as it arrived
                        k = p.need[s]
                        for a, erl in ch:
                            if a > t:
                                if a < vis:
                                    vis = a
                                break
                            if k:
                                k -= 1
                                continue
                            msgs.append(PendingMsg(erl, a))
                            break
                        continue
                    a, erl = ch[0]
                    if a <= t:
                        msgs.append(PendingMsg(erl, a))
                    elif a < vis:
                        vis = a
            if count_erl:
                for m in msgs:
                    esum += m.erl_us
                    erls.append(m.erl_us)
            if msgs:
                npv += 1
            out[p.key] = ProcView(p.key, tuple(msgs), p.pblocked, p.in_coll)
        self.erl_sum = esum
        if count_erl:
            self.erl_n += len(erls)
            nd.cc_erls = erls
            nd.cc_pend = npv
            nd.cc_until = vis
        return out

    def _views_pending(self, nd: _Node, t: float) -> dict[str, ProcView]:
        """``_views`` for the schemes that read of the messages only whether there are any
        (all but CC: agent/cdc/schemes.py): each view carries its process's first pending
        message, found by the same rules, and the scan of a process stops there."""
        out: dict[str, ProcView] = {}
        running = nd.running
        for p in nd.procs:
            if p.state == NEW:
                continue
            first: tuple[PendingMsg, ...] = ()
            if not (p is running and p.waiting and p.state == SPIN):
                for ch in p.chans:
                    if ch:
                        a, erl = ch[0]
                        if a <= t:
                            first = (PendingMsg(erl, a),)
                            break
            else:
                need = p.need
                for s, ch in enumerate(p.chans):
                    if not ch:
                        continue
                    k = need.get(s, 0)
                    if k:
                        # a running receiver has read what its wait needs as it arrived
                        if len(ch) > k:
                            a, erl = ch[k]
                            if a <= t and ch[k - 1][0] <= t:
                                first = (PendingMsg(erl, a),)
                                break
                        continue
                    a, erl = ch[0]
                    if a <= t:
                        first = (PendingMsg(erl, a),)
                        break
            out[p.key] = ProcView(p.key, first, p.pblocked, p.in_coll)
        return out

    def _repeat_cc(self, nd: _Node, t: float, event: Event, tick: int) -> None:
        """CC, two or more pending, the views as at the last evaluation and its outcome
        provably the same now (``cc_until``): what evaluating would do, without the scheme.
        The ERL statistics get the same additions in the same order; the counters the same
        decision point (agent/cdc/node.py's ``repeat``, with the views' pending count)."""
        esum = self.erl_sum
        for e in nd.cc_erls:
            esum += e
        self.erl_sum = esum
        self.erl_n += len(nd.cc_erls)
        if tick >= 0:
            self._update_erl(nd, tick, t, nd.npend)
        nd.cdc.repeat(event, nd.cc_pend)
        nd.eval_ver = nd.view_ver
        nd.stable_t = t
        if tick >= 0 and self.ticks_matter:
            self._dirty(nd, t)  # as after an evaluation: with two pending, the next tick too
        h = nd.cdc.holder
        self._set_holder(nd, nd.by_key.get(h) if h is not None else None, t)

    def _decide(
        self, nd: _Node, t: float, event: Event, subject: _Proc | None, tick: int = -1
    ) -> None:
        if tick < 0 and t > nd.acct_next:  # _account inline
            self._account_to(nd, self._tick_before(nd, t))
        if (
            self.uses_erl
            and nd.npend >= 2
            and nd.cc_key == nd.cver
            and t < nd.cc_until
            and not self.exact_ticks
        ):
            if nd.cc_views is not None:  # first time: the scheme's bound on its last decision
                r = nd.cdc.scheme.repeat_until(nd.cc_t, nd.cc_views)
                nd.cc_views = None
                if r < nd.cc_until:
                    nd.cc_until = r
            if t < nd.cc_until:
                self._repeat_cc(nd, t, event, tick)
                return
        if (
            not self.exact_ticks
            and nd.view_ver == nd.eval_ver
            and t < nd.stable_t
            # CC weighs every pending message (eq. 4), and a pending process's messages change
            # without its pending state changing: with two or more pending, it always decides
            and not (self.uses_erl and nd.npend >= 2)
            and (
                event is Event.TICK
                or (
                    event is Event.ARRIVAL
                    and (
                        self.uses_erl
                        or not subject
                        or not subject.pending
                        # a pending subject: the scheme says whether it would join its queue
                        or nd.cdc.scheme.arrival_repeats(
                            ProcView(subject.key, (), subject.pblocked, subject.in_coll)
                        )
                    )
                )
            )
        ):
            # nothing the scheme looks at has changed since it last decided: the same outcome
            if tick >= 0:
                self._update_erl(nd, tick, t, nd.npend)
            nd.cdc.repeat(event, nd.npend)
            return
        views = self._views(nd, t)
        enp = nd.npend
        cdc = nd.cdc
        if tick >= 0:
            self._update_erl(nd, tick, t, enp)
        key = cdc.decide(t, event, subject.key if subject is not None else None, views)
        nd.decisions_eval += 1
        if self.record:
            self._record_contest(nd, t, views, key)
        holder = nd.by_key.get(key) if key is not None else None
        nd.eval_ver = nd.view_ver
        nd.stable_t = cdc.scheme.tick_stable_until(t, views)
        if self.uses_erl:
            nd.cc_key = nd.cver
            nd.cc_views = views  # repeat_until asked only if a decision on these comes
            nd.cc_t = t
        if self.uses_erl:
            # the ticks that close an ED window or republish the ERL change it: decide then
            for k in (nd.ed_next_k, nd.pub_next_k):
                if k >= 0:
                    tk = nd.phase + k * self.T
                    if tk < nd.stable_t:
                        nd.stable_t = tk
        if self.uses_erl and nd.npend >= 2:
            nd.stable_t = t
        if tick >= 0 and self.ticks_matter:
            nxt = INF if self.exact_ticks else nd.stable_t
            if self.exact_ticks or nxt <= t:
                self._dirty(nd, t)
            elif nxt < INF:
                k = max(math.ceil((nxt - nd.phase) / self.T), tick + 1)
                self._tick_at(nd, k)
        self._set_holder(nd, holder, t)

    def _record_contest(
        self, nd: _Node, t: float, views: dict[str, ProcView], key: str | None
    ) -> None:
        """An evaluated decision with two or more pending: who contested it, who won, and
        (CC) each one's unclamped W_r and pending messages (ProcRecord)."""
        pend = [(k, v) for k, v in views.items() if v.pending]
        if len(pend) < 2:
            return
        emax = nd.cdc.scheme.erl_max() if self.uses_erl else 0.0  # type: ignore[attr-defined]
        for k, v in pend:
            r = nd.by_key[k].rec
            r.contested += 1
            r.won += k == key
            if self.uses_erl:
                u = unclamped_w_r(v.pending, t, emax) or 0.0
                r.w_r_sum += u
                r.w_r_top += u >= W_R_MAX
                r.msgs_sum += len(v.pending)

    def _tick_at(self, nd: _Node, k: int) -> None:
        """Evaluate tick ``k`` (unless an earlier one is due already)."""
        if nd.tick_k == -1 or nd.tick_k > k:
            nd.tick_k = k
            self.seq += 1
            heappush(
                self.heap, (nd.phase + k * self.T, _PRIORITY[EV_TICK], self.seq, EV_TICK, nd, k)
            )

    def _update_erl(self, nd: _Node, k: int, t: float, enp: int) -> None:
        """Eq. (1) at tick ``k``: ED re-measured every ED_WINDOW_S (agent/local.py), and,
        with gossip, what the node's agent would publish (agent/gossip.py)."""
        if not self.uses_erl:
            return
        ed = None
        if k >= nd.ed_next_k:
            w = max(1, round(ED_WINDOW_S / self.T))
            nd.ed_next_k = (k // w + 1) * w
            run = nd.ed_run - nd.ed_run0
            slices = nd.ed_slices - nd.ed_slices0
            nd.ed_run0, nd.ed_slices0 = nd.ed_run, nd.ed_slices
            if slices:
                ed = run / slices * 1e6
            self._tick_at(nd, nd.ed_next_k)
        erl = nd.cdc.update_erl(enp, ed)
        if self.gossip:
            old = nd.erl_pub
            if abs(erl - old) > GOSSIP_CHANGE * abs(old) or k >= nd.pub_next_k >= 0:
                nd.erl_pub = erl
                nd.pub_next_k = -1
            if erl != nd.erl_pub and nd.pub_next_k < 0:
                nd.pub_next_k = k + max(1, round(GOSSIP_PERIOD_S / self.T))
                self._tick_at(nd, nd.pub_next_k)

    def _set_holder(self, nd: _Node, holder: _Proc | None, t: float) -> None:
        old = nd.holder
        if holder is old:
            return
        cur = nd.running
        if cur is not None:
            self._charge(nd, t)  # the old holder's time at its weight
        nd.holder = holder
        if holder is None or holder.state in (BLOCK, DONE, NEW):
            if cur is not None and cur is old:
                self._arm(nd, t)  # no longer boosted: its time slice applies again
            return
        self._lead(nd, holder)
        if cur is not holder:
            self._switch(nd, holder, t)
        else:
            self._arm(nd, t)

    def _lead(self, nd: _Node, p: _Proc) -> None:
        """The boosted process goes first: no more CPU received than any runnable one."""
        for q in nd.procs:
            if q is not p and (q.state == COMPUTE or q.state == SPIN) and q.vrt < p.vrt:
                p.vrt = q.vrt

    # ---- the local scheduler -------------------------------------------------------------------
    def _runnable(self, p: _Proc, t: float) -> None:
        """``p`` becomes runnable (started, or woken): maybe it preempts."""
        nd = p.node
        if p.state == BLOCK:
            p.state = SPIN  # back from poll(); it completes its receives when it runs
            # sleeper credit, as CFS places a woken task: at most one slice behind
            mv = self._base_vrt(nd, p)
            if p.vrt < mv - self.slice:
                p.vrt = mv - self.slice
        cur = nd.running
        if cur is None:
            self._switch(nd, p, t)
            return
        if nd.holder is p:
            self._lead(nd, p)
            self._switch(nd, p, t)
            return
        self._charge(nd, t)
        if cur.vrt - p.vrt > self.gran:
            self._switch(nd, p, t)

    def _block(self, p: _Proc, t: float) -> None:
        nd = p.node
        if p.state == SPIN and nd.running is p:
            nd.cver += 1
        p.state = BLOCK
        p.pblocked = True  # only IB's and SB's arrival decisions read it (for a pending subject)
        p.spin_until = INF
        if p.missing == 0:
            self._wait_ready(p, t)  # blocked now: its wake-up at the last arrival
        if nd.running is p:
            self._reschedule(nd, t)

    def _pick(self, nd: _Node) -> _Proc | None:
        best: _Proc | None = None
        for q in nd.procs:
            if (q.state == COMPUTE or q.state == SPIN) and (best is None or q.vrt < best.vrt):
                best = q
        return best

    def _reschedule(self, nd: _Node, t: float) -> None:
        nxt = self._pick(nd)
        if nxt is nd.running:
            if nxt is not None:
                self._arm(nd, t)
            return
        self._switch(nd, nxt, t)

    def _charge(self, nd: _Node, t: float) -> None:
        """CPU time of the running process since ``run_start``."""
        p = nd.running
        if p is None:
            return
        used = t - nd.run_start
        if used <= 0:
            return
        nd.run_start = t
        if nd.holder is p:
            p.vrt += used / self.boost
            p.held += used
        else:
            p.vrt += used
        p.cpu += used
        nd.busy += used
        nd.ed_run += used
        if p.state == COMPUTE:
            p.remaining -= used * nd.speed
        else:
            p.spun += used

    def _switch(self, nd: _Node, nxt: _Proc | None, t: float) -> None:
        cur = nd.running
        if cur is not None:
            rs = nd.run_start if nd.run_start <= t else t
            self._charge(nd, t)
            if cur.waiting and cur.state == SPIN:
                # it read what arrived while it ran; a wait it completed now is finished when
                # it is back on the CPU (finishing it here could start its next step mid-switch)
                self._consume_arrived(cur, t, rs)
            if cur.state != DONE:
                self._schedule_onset(cur, t)
        if (cur is not None and cur.waiting and cur.state == SPIN) or (
            nxt is not None and nxt.waiting and nxt.state == SPIN
        ):
            nd.cver += 1  # a running spinner's view reads past what its wait needs (_views)
        nd.running = nxt
        nd.ver += 1
        if nxt is None:
            return
        cs = 0.0 if nxt is nd.last_ran else self.cs
        nd.last_ran = nxt
        nd.switches += 1
        nd.ed_slices += 1
        nd.run_start = t + cs
        nd.slice_end = nd.run_start + self.slice
        if nxt.waiting and nxt.state == SPIN:
            # back on the CPU: it reads what arrived meanwhile
            if self._consume_arrived(nxt, t + cs, t + cs) and not nxt.need:
                self._finish_wait(nxt, t + cs)
                self._continue(nd, nxt, t + cs, switched=True)
                return
            if nxt.missing == 0 and nxt.waiting:
                w, tc = nxt.wait_last, t + cs
                self.seq += 1
                heappush(
                    self.heap,
                    (tc if tc > w else w, _PRIORITY[EV_WAIT], self.seq, EV_WAIT, nxt, nxt.wait_ver),
                )
        self._arm(nd, t)

    def _continue(self, nd: _Node, p: _Proc, t: float, switched: bool = False) -> None:
        """``p`` (running) finished a wait at ``t``: run on, or let another run."""
        if p.state == COMPUTE and p.remaining <= _EPS:
            self._advance(p, t)
        if nd.running is not p:
            return
        if p.state in (COMPUTE, SPIN):
            self._arm(nd, t)
        else:
            self._reschedule(nd, t)

    def _arm(self, nd: _Node, t: float) -> None:
        """Schedule the running process's next CPU event."""
        p = nd.running
        nd.ver += 1
        if p is None:
            return
        start = nd.run_start if nd.run_start > t else t
        if p.state == COMPUTE:
            r = p.remaining
            end = start + (r if r > 0.0 else 0.0) / nd.speed
        elif p.state == SPIN:
            end = p.spin_until if p.spin_until > start else start  # spun out while off the CPU
            if p.missing == 0 and p.waiting and p.wait_last < p.spin_until:
                end = INF  # its messages come before the spin is over (EV_WAIT)
        else:
            self._reschedule(nd, t)
            return
        if nd.slice_end < end:
            for q in nd.procs:
                if q is not p and (q.state == COMPUTE or q.state == SPIN):
                    end = nd.slice_end if nd.slice_end > t else t
                    break
        if end < INF:
            self.seq += 1
            heappush(self.heap, (end, _P_CPU, self.seq, EV_CPU, nd, nd.ver))

    def _ev_cpu(self, t: float, nd: _Node, ver: int) -> None:
        if ver != nd.ver:
            return
        p = nd.running
        if p is None:
            return
        self._charge(nd, t)
        r1 = p.remaining + 1
        if p.state == COMPUTE and p.remaining <= 1e-12 * (r1 if r1 > 1.0 else 1.0):
            p.remaining = 0.0
            self._advance(p, t)
            if nd.running is not p:
                return
            if p.state == SPIN and p.spin_until <= t:
                self._spin_over(nd, p, t)
                return
        elif p.state == SPIN and p.spin_until <= t:
            self._spin_over(nd, p, t)
            return
        if p.state == COMPUTE and p.remaining > 0 and t < nd.slice_end - _EPS:
            self._arm(nd, t)
            return
        if t >= nd.slice_end - _EPS:
            nxt = self._pick_other(nd, p)
            if nxt is not None and nxt.vrt <= p.vrt:
                self._switch(nd, nxt, t)
                return
            nd.slice_end = t + self.slice
        self._arm(nd, t)

    def _spin_over(self, nd: _Node, p: _Proc, t: float) -> None:
        """Spin-block: the spin time is over; one last look at the sockets, then block."""
        if self._consume_arrived(p, t, nd.run_start):
            self._finish_wait(p, t)
            self._continue(nd, p, t)
            return
        self._block(p, t)

    def _pick_other(self, nd: _Node, p: _Proc) -> _Proc | None:
        best: _Proc | None = None
        for q in nd.procs:
            running = q.state == COMPUTE or q.state == SPIN
            if q is not p and running and (best is None or q.vrt < best.vrt):
                best = q
        return best


def simulate_stream(
    jobs: Sequence[SimJobSpec],
    scheme: str,
    mpl: int,
    speeds: Sequence[float],
    platform: Platform,
    *,
    seed: int = 1,
    exact_ticks: bool = False,
) -> CdcResult:
    """Run one stream under one scheme (a fresh simulator)."""
    return CdcSim(scheme, mpl, speeds, platform, seed=seed, exact_ticks=exact_ticks).run(jobs)
