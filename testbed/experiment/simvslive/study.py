"""Validate the simulator against the live cluster: Wiseman & Feitelson 2003 §4.2 scaled down
(issue 11, item 5).

One seeded Lublin stream runs through the live controller under strict and
paired gang at two offered loads, and the very same jobs through the
simulator (testbed/sim/engine.py) with the execution model measured live
(testbed/sim/calibration.py). The report (:mod:`testbed.experiment.simvslive.report`)
sets mean response and slowdown side by side and says how far apart they are.

**The stream** (pure, :func:`make_stream`). ``jobs`` Lublin-model jobs
(testbed/sim/workloads/lublin.py, fixed ``seed``) generated for the paper's
16-node ParPar (§4.2), then mapped to our nodes:

* *Size*: a serial job stays serial; a parallel job of ``s`` of 16 nodes gets
  ``max(2, ceil(s × nodes / 16))`` of ours, at most ``nodes``
  (:func:`map_size`). The plain proportional ``ceil(s × nodes / 16)`` would
  make 98-100 % of the jobs serial on 2 nodes (Lublin's parallel jobs are
  mostly 2-8 wide), leaving no gangs to coschedule; this keeps "parallel"
  parallel, so on 2 nodes serial jobs take one node and every other job is a
  2-process gang.
* *Run time*: Lublin's run times span four decades (seconds to a day), so
  the paper's division by 40 would still leave hour-long jobs, and any linear
  scale that fits minutes turns the median job into a few milliseconds.
  We compress the range instead: ``r = c × max(1, t)^power`` with ``c`` such
  that the stream's mean is ``mean_runtime`` (:func:`map_runtimes`); on the
  log scale this only shrinks the model's hyper-gamma by ``power`` and keeps
  every job's rank. The result is clipped to ``[min_runtime, max_runtime]``
  (the clip count is reported; seed 1 needs none).
* *Load*: the stream keeps Lublin's arrival pattern; every gap is stretched
  so that the offered load -- node-seconds asked per second ÷ nodes, with
  the dedicated times measured here -- is the target
  (:func:`testbed.sim.workloads.load.scale_to_load`, exactly what the
  simulator does for Lublin).

**The job** is the fine-grain program of §4.2.1 at about 45 % CPU, with fixed
*work*: ``--iterations`` loops of ``G_comp`` iterations of the compute loop,
one 8 KiB file and ``device_wait_ms`` of blocking wait, then a barrier
(``--wait block``: Wiseman & Feitelson's barrier used Unix IPC and slept). ParPar's
barrier cost about as much as the compute; here a barrier over a 7 µs link
costs a few hundred µs in Python, so the blocking wait stands in for the
communication, as in ``cosched calibrate``'s fine-grain job
(testbed/experiment/execmodel/calibrate.py: 2.0 ms + 2.5 ms), whose interference figure
the simulator uses; it also keeps serial jobs near the share of gangs.
``G_comp`` starts at ``compute_ms`` by ``apps.synthetic --loop-cost``, but
that figure is unreliable here (65-116 ns per iteration on a quiet host, and
2 ms of it gave jobs 59 % CPU), so, as the paper did ("setting the loop in the
compute part to take slightly less time, so that the CPU utilization will be
about 45 percent"), the widest job is run alone and ``G_comp`` rescaled
(:func:`next_gcomp`) until its CPU share is within ``tune_tolerance`` of
``target_cpu`` (at most ``tune_rounds`` tries; every try is recorded). This
tunes the workload to the paper's, never the model: the simulator gets the
share then measured, whatever it is.

**Dedicated time.** At the start a fresh controller runs each job size alone
(``rate_repeats`` times, ``rate_seconds`` each): rank 0's barriers per
second is the *rate*; the controller's execution time (start to end) less
``iterations / rate`` is the fixed *overhead* (interpreter start-up, the
ranks' connect, exit notice); the ranks' CPU/wall is the *CPU share*. A job
of nominal run time ``r`` gets ``round((r - overhead) × rate)`` iterations
and its dedicated time is ``overhead + iterations / rate``: what it takes
here alone. The speed of this virtual machine drifts (the compute loop's
cost moved between 65 and 112 ns per iteration within an hour), so the
measurement is repeated after every live run (``check_repeats`` times) and
each run is simulated with the mean of the measurements just before and just
after it (:func:`blend`); the jobs' *work* stays what the first measurement
set. That dedicated time is the simulator's run time and the denominator of
both slowdowns (live and simulated alike).

**Live** (:func:`run_live`): for every policy and load a fresh controller
(``--quantum``, no policy parameters: the registry's defaults, as in the
simulator), every job submitted at its arrival time, the matrix polled every
``poll_s`` (rows, jobs), then a drain until all end (killed after
``drain_timeout``). Per job the controller's records give submit, start, end
and CPU; rank 0's report its CPU share. The host's CPU spent outside the
experiment is recorded (testbed/experiment/harness/hostload.py).

**Simulated** (:func:`run_sim`, seconds): the very same jobs -- sizes, the
submit times the controller recorded, the dedicated times -- through
:func:`testbed.sim.engine.simulate` in exact mode with the same quantum and
policy, ``SimConfig(interference, context_switch)`` from the calibration.
Each ``[[sim]]`` variant of the spec is one simulation; the first decides
the verdict (Wiseman & Feitelson 2003 §4.2 gives no other way to pick).

The simulated half is a sweep of independent runs (testbed.sweep): one per ``[[sim]]``
variant and live run, and one per factor of :func:`rate_sensitivity`, whose results are
kept in results.json beside the simulations.

    sudo cosched experiment run experiments/sim-vs-live.toml [--quick] [--out DIR]
    cosched experiment run experiments/sim-vs-live.toml --resimulate --out DIR

``--resimulate`` simulates the saved live runs of DIR/results.json again (after a new
calibration) and needs no root; ``cosched experiment report`` rewrites the report.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.fields import SpecError, Table
from testbed.experiment.harness import LiveError
from testbed.experiment.harness import jobs as harness_jobs
from testbed.experiment.harness.controller import controller
from testbed.sweep import RunSpec, SweepOptions, run_sweep

REPO = Path(__file__).resolve().parents[3]
POLICIES = ("gang", "paired-gang")
MATCHING = ("paired-gang",)  # the policies whose quanta have a partner row to match
WAITS = ("spin", "block", "spinblock")
TERMINAL = harness_jobs.TERMINAL
SIM_TERMS = ("occupancy",)  # the jobs' launch, teardown and run times are measured live
DEFAULT_SPEC = REPO / "experiments" / "sim-vs-live.toml"


Say = Callable[[str], None]


# ---- the spec -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimVariant:
    """One simulation of every live run: which execution model, which CPU share."""

    label: str
    calibration: str = "default"  # default (the committed file) | none | PATH
    cpu: float | None = None  # None: the CPU share measured per job size
    # issue 25's model terms that apply to measured jobs: occupancy (the controller's
    # quanta last the whole quantum). The jobs' dedicated times are measured here with
    # their launch and teardown in them, and their sizes' run times are not the program's.
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValidateSpec:
    """``experiments/sim-vs-live.toml`` (see the file for what every key means)."""

    name: str
    path: Path
    policies: tuple[str, ...]
    loads: tuple[float, ...]
    jobs: int
    seed: int
    paper_nodes: int
    mean_runtime: float
    runtime_power: float
    min_runtime: float
    max_runtime: float
    drain_timeout: float
    poll_s: float
    quiet_limit: float
    quiet_timeout: float
    nodes: int
    link: str
    cpus_per_node: float | None
    cpu_mechanism: str
    cfs_period_us: int
    cgroup: str
    quantum: float
    compute_ms: float
    target_cpu: float
    tune_rounds: int
    tune_tolerance: float
    device_wait_ms: float
    nbytes: int
    wait: str
    rate_seconds: float
    rate_repeats: int
    check_repeats: int
    sims: tuple[SimVariant, ...]
    quick: Mapping[str, Any] = field(default_factory=dict)

    def quick_version(self) -> ValidateSpec:
        """The ``--quick`` run: the ``[quick]`` table's overrides."""
        q = dict(self.quick)
        return replace(
            self,
            jobs=int(q.get("jobs", self.jobs)),
            loads=tuple(float(x) for x in q.get("loads", self.loads)),
            mean_runtime=float(q.get("mean_runtime", self.mean_runtime)),
            rate_seconds=float(q.get("rate_seconds", self.rate_seconds)),
            rate_repeats=int(q.get("rate_repeats", self.rate_repeats)),
            check_repeats=int(q.get("check_repeats", self.check_repeats)),
            drain_timeout=float(q.get("drain_timeout", self.drain_timeout)),
        )

    def iteration_s(self) -> float:
        """Nominal seconds per iteration alone (compute + wait), before measuring."""
        return (self.compute_ms + self.device_wait_ms) / 1000.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        d["quick"] = dict(self.quick)
        return d


_EXPERIMENT = {
    "name",
    "policies",
    "loads",
    "jobs",
    "seed",
    "paper_nodes",
    "mean_runtime",
    "runtime_power",
    "min_runtime",
    "max_runtime",
    "drain_timeout",
    "poll_s",
    "quiet_limit",
    "quiet_timeout",
}
_JOB = {
    "compute_ms",
    "target_cpu",
    "tune_rounds",
    "tune_tolerance",
    "device_wait_ms",
    "bytes",
    "wait",
    "rate_seconds",
    "rate_repeats",
    "check_repeats",
}
_QUICK = {
    "jobs",
    "loads",
    "mean_runtime",
    "rate_seconds",
    "rate_repeats",
    "check_repeats",
    "drain_timeout",
}


def load_spec(doc: Table, policies: Sequence[str] = POLICIES) -> ValidateSpec:
    """A ``sim-vs-live`` spec; every problem is one line naming the key. ``policies``: the
    ones the study may run (the first two are the default; dhc-live adds ``dhc``)."""
    exp, cl, ctl, job, quick = (
        doc.table(n) for n in ("experiment", "cluster", "controller", "job", "quick")
    )
    exp.only(_EXPERIMENT)
    cl.only({"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup"})
    ctl.only({"quantum"})
    job.only(_JOB)
    quick.only(_QUICK)
    sims = []
    for s in doc.tables("sim", default=[{"label": "calibrated"}]):
        s.only({"label", "calibration", "cpu", "terms"})
        # launch, teardown and run times are measured live here: only occupancy applies
        terms = s.items("terms", str, [], nonempty=False, choices=SIM_TERMS)
        cpu = s.data.get("cpu", "measured")
        if cpu != "measured":
            cpu = s.number("cpu", above=0, maximum=1)
        sims.append(
            SimVariant(
                label=s.text("label"),
                calibration=s.text("calibration", "default"),
                cpu=None if cpu == "measured" else float(cpu),
                terms=tuple(terms),
            )
        )
    if not sims:
        raise doc.error("sim", "at least one [[sim]]", fix='[[sim]] label = "..."')
    if len({s.label for s in sims}) != len(sims):
        raise doc.error(None, "[[sim]] labels must be unique")
    cpus = cl.number("cpus_per_node", None, above=0) if cl.has("cpus_per_node") else None
    spec = ValidateSpec(
        name=exp.text("name", doc.path.stem),
        path=doc.path,
        policies=tuple(exp.items("policies", str, list(POLICIES), choices=tuple(policies))),
        loads=tuple(float(x) for x in exp.items("loads", (int, float), [0.5, 0.8])),
        jobs=exp.integer("jobs", 100),
        seed=exp.integer("seed", 1),
        paper_nodes=exp.integer("paper_nodes", 16),
        mean_runtime=exp.number("mean_runtime", 2.5),
        runtime_power=exp.number("runtime_power", 0.35),
        min_runtime=exp.number("min_runtime", 0.5),
        max_runtime=exp.number("max_runtime", 40.0),
        drain_timeout=exp.number("drain_timeout", 600.0),
        poll_s=exp.number("poll_s", 1.0),
        quiet_limit=exp.number("quiet_limit", 0.15),
        quiet_timeout=exp.number("quiet_timeout", 300.0),
        nodes=cl.integer("nodes", 2),
        link=cl.text("link", "myrinet"),
        cpus_per_node=cpus,
        cpu_mechanism=cl.text("cpu_mechanism", "auto"),
        cfs_period_us=cl.integer("cfs_period_us", 10_000),
        cgroup=cl.text("cgroup", "auto"),
        quantum=ctl.number("quantum", 0.2),
        compute_ms=job.number("compute_ms", 2.0),
        target_cpu=job.number("target_cpu", 0.45),
        tune_rounds=job.integer("tune_rounds", 4),
        tune_tolerance=job.number("tune_tolerance", 0.02),
        device_wait_ms=job.number("device_wait_ms", 2.5),
        nbytes=job.integer("bytes", 8193),
        wait=job.text("wait", "block"),
        rate_seconds=job.number("rate_seconds", 2.0),
        rate_repeats=job.integer("rate_repeats", 3),
        check_repeats=job.integer("check_repeats", 1),
        sims=tuple(sims),
        quick=dict(quick.data),
    )
    _check(spec, str(doc.path))
    _check(spec.quick_version(), f"{doc.path}: [quick]")
    return spec


def read_spec(path: str | Path) -> ValidateSpec:
    from testbed.experiment.fields import read_toml

    return load_spec(Table.document(read_toml(path), path))


def _check(s: ValidateSpec, where: str) -> None:
    """Values in range (the table's own checks are types and names)."""
    problems = [
        (s.jobs >= 2, "jobs must be >= 2 (a load needs two arrivals)"),
        (bool(s.loads) and all(0 < x < 1.5 for x in s.loads), "loads must be in (0, 1.5)"),
        (bool(s.policies), "policies must not be empty"),
        (s.paper_nodes >= 1 and s.nodes >= 1, "paper_nodes and nodes must be >= 1"),
        (s.mean_runtime > 0, "mean_runtime must be > 0"),
        (0 < s.runtime_power <= 1, "runtime_power must be in (0, 1]"),
        (0 < s.min_runtime < s.max_runtime, "0 < min_runtime < max_runtime"),
        (s.drain_timeout > 0 and s.poll_s > 0, "drain_timeout and poll_s must be > 0"),
        (s.quiet_limit >= 0 and s.quiet_timeout >= 0, "quiet_limit, quiet_timeout >= 0"),
        (s.quantum >= 0.01, "quantum must be >= 0.01 s"),
        (s.compute_ms > 0 and s.device_wait_ms >= 0 and s.nbytes >= 0, "job times must be >= 0"),
        (s.wait in WAITS, f"wait must be one of {', '.join(WAITS)}"),
        (0 <= s.target_cpu < 1, "target_cpu must be in [0, 1) (0: no tuning)"),
        (s.tune_rounds >= 1 and s.tune_tolerance > 0, "tune_rounds >= 1, tune_tolerance > 0"),
        (s.rate_seconds > 0, "rate_seconds must be > 0"),
        (s.rate_repeats >= 1 and s.check_repeats >= 1, "rate_repeats, check_repeats >= 1"),
    ]
    for ok, what in problems:
        if not ok:
            raise SpecError(f"{where}: {what}")


# ---- the stream (pure) ----------------------------------------------------------------------


@dataclass(frozen=True)
class StreamEntry:
    """One Lublin job and what it became here (module docstring)."""

    index: int
    lublin_submit: float
    lublin_size: int
    lublin_runtime: float
    size: int
    runtime: float  # nominal dedicated run time here, s
    clipped: bool = False


def map_size(size: int, nodes: int, paper_nodes: int = 16) -> int:
    """Serial stays serial; parallel ``s`` of ``paper_nodes`` -> ``max(2, ceil(s·nodes/paper))``
    of ``nodes``, at most ``nodes`` (module docstring says why not plain proportional)."""
    if size < 1 or nodes < 1 or paper_nodes < 1:
        raise ValueError("sizes and node counts must be >= 1")
    if size == 1:
        return 1
    return min(nodes, max(2, math.ceil(size * nodes / paper_nodes)))


def map_runtimes(
    raw: Sequence[float], power: float, mean: float, lo: float, hi: float
) -> list[tuple[float, bool]]:
    """``c · max(1, t)^power`` with the mean of the unclipped values ``mean``, clipped to
    ``[lo, hi]``; each with whether it was clipped. (Lublin's 0 s jobs count as 1 s.)"""
    if not raw:
        return []
    if not 0 < power <= 1 or mean <= 0 or not 0 < lo < hi:
        raise ValueError("need 0 < power <= 1, mean > 0 and 0 < lo < hi")
    y = [max(1.0, float(t)) ** power for t in raw]
    c = mean / (math.fsum(y) / len(y))
    out = []
    for v in y:
        r = c * v
        out.append((min(hi, max(lo, r)), not lo <= r <= hi))
    return out


def make_stream(spec: ValidateSpec) -> list[StreamEntry]:
    """The spec's Lublin jobs mapped to this cluster (sizes, nominal run times)."""
    from testbed.sim.workloads.lublin import generate_lublin

    lub = generate_lublin(spec.jobs, nodes=spec.paper_nodes, seed=spec.seed)
    times = map_runtimes(
        [j.runtime for j in lub],
        spec.runtime_power,
        spec.mean_runtime,
        spec.min_runtime,
        spec.max_runtime,
    )
    return [
        StreamEntry(
            index=k,
            lublin_submit=j.submit,
            lublin_size=j.size,
            lublin_runtime=j.runtime,
            size=map_size(j.size, spec.nodes, spec.paper_nodes),
            runtime=r,
            clipped=clipped,
        )
        for k, (j, (r, clipped)) in enumerate(zip(lub, times, strict=True))
    ]


@dataclass
class SizeRate:
    """A job size's dedicated behaviour here (module docstring, "Dedicated time")."""

    size: int
    rate: float  # barriers per second alone
    overhead_s: float  # controller's execution time - iterations / rate
    cpu_share: float  # the ranks' CPU / wall in the loop, alone
    samples: list[dict[str, float]] = field(default_factory=list)

    def iterations(self, runtime: float) -> int:
        return max(1, round((runtime - self.overhead_s) * self.rate))

    def dedicated(self, iterations: int) -> float:
        return self.overhead_s + iterations / self.rate


@dataclass
class Rates:
    ns_per_iteration: float  # the compute loop's cost by ``apps.synthetic --loop-cost``
    gcomp: int  # compute iterations per barrier of every job
    sizes: dict[int, SizeRate]
    other_cores: float | None = None  # host CPU outside the experiment while measuring
    tuning: list[dict[str, float]] = field(default_factory=list)  # (gcomp, share) tried

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sizes"] = {str(k): asdict(v) for k, v in self.sizes.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rates:
        return cls(
            ns_per_iteration=float(d["ns_per_iteration"]),
            gcomp=int(d["gcomp"]),
            sizes={int(k): SizeRate(**v) for k, v in d["sizes"].items()},
            other_cores=d.get("other_cores"),
            tuning=list(d.get("tuning") or []),
        )


def blend(before: Rates, after: Rates | None) -> dict[int, SizeRate]:
    """A run's dedicated behaviour: the mean of the measurements just before and just after it
    (each weighted alike, whatever its repeats); ``before`` alone when there is no after."""
    if after is None:
        return dict(before.sizes)
    out = {}
    for size, a in before.sizes.items():
        b = after.sizes.get(size)
        if b is None:
            out[size] = a
            continue
        out[size] = SizeRate(
            size,
            (a.rate + b.rate) / 2,
            (a.overhead_s + b.overhead_s) / 2,
            (a.cpu_share + b.cpu_share) / 2,
            [*a.samples, *b.samples],
        )
    return out


def summarize_rates(samples: Mapping[int, Sequence[Mapping[str, float]]]) -> dict[int, SizeRate]:
    """Per size: mean rate, mean overhead, mean CPU share over the repeats.

    Each sample has ``iterations``, ``rate`` (rank 0's barriers/s), ``exec_s``
    (the controller's start to end) and ``cpu`` (ranks' mean CPU/wall).
    """
    out = {}
    for size, ss in samples.items():
        if not ss:
            raise ValueError(f"no rate samples for size {size}")
        rate = sum(s["rate"] for s in ss) / len(ss)
        overhead = sum(s["exec_s"] - s["iterations"] / s["rate"] for s in ss) / len(ss)
        cpu = sum(s["cpu"] for s in ss) / len(ss)
        out[size] = SizeRate(size, rate, max(0.0, overhead), cpu, [dict(s) for s in ss])
    return out


@dataclass(frozen=True)
class PlannedJob:
    """One job of one run: its work, its dedicated time here, its arrival at this load."""

    index: int
    size: int
    runtime: float  # nominal
    iterations: int
    dedicated_s: float
    arrival_s: float


def plan_jobs(
    stream: Sequence[StreamEntry], rates: Rates, nodes: int, load: float
) -> list[PlannedJob]:
    """Iterations from the measured rate; arrivals stretched to ``load`` (load.py)."""
    from testbed.sim.job import SimJob
    from testbed.sim.workloads.load import scale_to_load

    work = []
    sims = []
    for e in stream:
        r = rates.sizes[e.size]
        it = r.iterations(e.runtime)
        d = r.dedicated(it)
        work.append((it, d))
        sims.append(
            SimJob(job_id=e.index + 1, submit=e.lublin_submit, size=e.size, runtime=d, estimate=d)
        )
    scaled = scale_to_load(sims, nodes, load)
    first = min(j.submit for j in scaled)
    return [
        PlannedJob(e.index, e.size, e.runtime, it, d, j.submit - first)
        for e, (it, d), j in zip(stream, work, scaled, strict=True)
    ]


def job_argv(spec: ValidateSpec, gcomp: int, iterations: int, python: str = "") -> list[str]:
    """The fine-grain job's command line (apps/synthetic.py flags)."""
    return [
        python or sys.executable,
        "-m",
        "apps.synthetic",
        "--iterations",
        str(iterations),
        "--gcomp",
        str(gcomp),
        "--gio",
        "1" if spec.device_wait_ms > 0 or spec.nbytes > 0 else "0",
        "--bytes",
        str(spec.nbytes),
        "--device-latency",
        f"{spec.device_wait_ms / 1000.0:g}",
        "--wait",
        spec.wait,
        "--connect-timeout",
        "120",
    ]


# ---- results ----------------------------------------------------------------------------------


@dataclass
class LiveJob:
    index: int
    size: int
    iterations: int
    dedicated_s: float
    arrival_s: float  # planned, from the run's first submission
    job_id: int | None = None
    state: str = "unsubmitted"
    submit_s: float | None = None  # the controller's clock, from the run's first submission
    start_s: float | None = None
    end_s: float | None = None
    cpu_s: float | None = None  # the controller's accounting, all ranks
    cpu_ratio: float | None = None  # rank 0's CPU/wall in its loop (frozen time included)
    barriers: int | None = None
    loop_cpu_s: float | None = None  # rank 0's CPU seconds in its loop
    loop_s: float | None = None  # rank 0's wall seconds in its loop (frozen time included)
    report_s: float | None = None  # when rank 0's report was written (same clock as submit_s)

    @property
    def response_s(self) -> float | None:
        if self.submit_s is None or self.end_s is None or self.state != "done":
            return None
        return self.end_s - self.submit_s


@dataclass
class LiveRun:
    policy: str
    load: float
    jobs: list[LiveJob]
    quanta: int = 0
    matching_success_ratio: float | None = None
    rows: list[tuple[float, int, int]] = field(default_factory=list)  # (t, rows, jobs shown)
    other_cores: float | None = None
    killed: int = 0
    wall_seconds: float = 0.0
    status: dict[str, Any] = field(default_factory=dict)
    rates_after: Rates | None = None  # the dedicated measurement right after the run
    quiet_before: float | None = None  # host cores busy outside, when the run started


@dataclass
class SimJobTimes:
    index: int
    runtime: float  # the dedicated time simulated (and both slowdowns' denominator)
    submit_s: float
    start_s: float | None
    end_s: float | None


@dataclass
class SimRun:
    variant: str
    policy: str
    load: float
    calibration: str
    interference: float
    context_switch: float
    cpu: dict[int, float]  # CPU share per job size used
    jobs: list[SimJobTimes]
    rows: list[tuple[float, int]] = field(default_factory=list)
    matching_success_rate: float | None = None
    quanta: float = 0.0
    seconds: float = 0.0


@dataclass
class ValidationResult:
    meta: dict[str, Any]
    stream: list[StreamEntry]
    rates: Rates | None = None
    live: list[LiveRun] = field(default_factory=list)
    sim: list[SimRun] = field(default_factory=list)
    # how each run's simulated response moves with the dedicated rate (rate_sensitivity)
    sensitivity: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "stream": [asdict(e) for e in self.stream],
            "rates": self.rates.to_dict() if self.rates else None,
            "live": [
                {**asdict(r), "rates_after": r.rates_after.to_dict() if r.rates_after else None}
                for r in self.live
            ],
            "sim": [{**asdict(r), "cpu": {str(k): v for k, v in r.cpu.items()}} for r in self.sim],
            "sensitivity": self.sensitivity,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ValidationResult:
        live = []
        for r in d.get("live", []):
            r = dict(r)
            r["jobs"] = [LiveJob(**j) for j in r["jobs"]]
            r["rows"] = [tuple(x) for x in r.get("rows", [])]
            r["rates_after"] = Rates.from_dict(r["rates_after"]) if r.get("rates_after") else None
            live.append(LiveRun(**r))
        sims = []
        for r in d.get("sim", []):
            r = dict(r)
            r["jobs"] = [SimJobTimes(**j) for j in r["jobs"]]
            r["rows"] = [tuple(x) for x in r.get("rows", [])]
            r["cpu"] = {int(k): float(v) for k, v in r["cpu"].items()}
            sims.append(SimRun(**r))
        return cls(
            meta=dict(d.get("meta") or {}),
            stream=[StreamEntry(**e) for e in d.get("stream", [])],
            rates=Rates.from_dict(d["rates"]) if d.get("rates") else None,
            live=live,
            sim=sims,
            sensitivity=list(d.get("sensitivity") or []),
        )

    def run_rates(self, run: LiveRun) -> dict[int, SizeRate]:
        """The dedicated behaviour around ``run`` (:func:`blend` of the measurements before
        and after it; runs are kept in the order they ran)."""
        if self.rates is None:
            raise LiveError("no dedicated-rate measurement in the result")
        k = next(i for i, r in enumerate(self.live) if r is run)
        before = self.rates if k == 0 else (self.live[k - 1].rates_after or self.rates)
        return blend(before, run.rates_after)

    def live_run(self, policy: str, load: float) -> LiveRun | None:
        for r in self.live:
            if r.policy == policy and abs(r.load - load) < 1e-9:
                return r
        return None


def read_result(path: Path, kind: str = "sim-vs-live") -> ValidationResult:
    """The ``kind`` data of a results.json (what ``--resimulate`` starts from)."""
    from testbed.experiment import pipeline

    res = pipeline.read(path)
    if res.kind != kind:
        raise SpecError(f"{path}: a {res.kind} results.json, not {kind}")
    try:
        return ValidationResult.from_dict(res.data)
    except (KeyError, TypeError, ValueError) as e:
        raise LiveError(f"{path}: not a validation result ({e})") from None


# ---- the simulated side (seconds) ---------------------------------------------------------


def _rows_of(matrix: Sequence[Sequence[int | None]]) -> int:
    return sum(1 for row in matrix if any(c is not None for c in row))


def sim_jobs(run: LiveRun, cpu: Mapping[int, float], rates: Mapping[int, SizeRate]) -> list[Any]:
    """The live run's jobs as simulator jobs: size, the submit time the controller recorded,
    and as run time the dedicated time of its iterations measured around the run."""
    from testbed.sim.job import Phase, SimJob
    from testbed.sim.workloads.synthetic import HOMOGENEOUS_BARRIER

    out = []
    for j in run.jobs:
        submit = j.submit_s if j.submit_s is not None else j.arrival_s
        runtime = rates[j.size].dedicated(j.iterations)
        out.append(
            SimJob(
                job_id=j.index + 1,
                submit=max(0.0, submit),
                size=j.size,
                runtime=runtime,
                estimate=runtime,
                phases=(Phase(1.0, cpu[j.size]),),
                barrier=HOMOGENEOUS_BARRIER,
            )
        )
    return out


def sim_params(
    run: LiveRun, spec: ValidateSpec, variant: SimVariant, rates: Mapping[int, SizeRate]
) -> dict[str, Any]:
    """Everything one simulation of a live run depends on (a sweep run's parameters)."""
    from testbed.experiment.results import repo_relative
    from testbed.sim.calibration import resolve_calibration

    cal = resolve_calibration(None if variant.calibration == "default" else variant.calibration)
    if cal.context_switch >= spec.quantum:
        raise SpecError(
            f"calibrated context switch {cal.context_switch} s is not below the quantum "
            f"{spec.quantum} s",
            fix="use a longer quantum",
        )
    sizes = sorted({j.size for j in run.jobs})
    return {
        "variant": variant.label,
        "policy": run.policy,
        "load": run.load,
        "nodes": spec.nodes,
        "quantum": spec.quantum,
        "calibration": repo_relative(cal.source),
        "interference": cal.interference,
        "context_switch": cal.context_switch,
        "terms": list(variant.terms),
        "cpu": {
            str(s): variant.cpu if variant.cpu is not None else rates[s].cpu_share for s in sizes
        },
        "rates": {
            str(s): {"rate": rates[s].rate, "overhead_s": rates[s].overhead_s} for s in sizes
        },
        "jobs": [[j.index, j.size, j.iterations, j.submit_s, j.arrival_s] for j in run.jobs],
    }


def simulate_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One live run through the simulator (a sweep run: module-level, JSON in and out)."""
    from controller.policies.base import GangPolicy
    from controller.policies.registry import make_policy
    from testbed.sim.engine import simulate
    from testbed.sim.results import SimConfig

    cpu = {int(k): float(v) for k, v in params["cpu"].items()}
    rates = {
        int(k): SizeRate(int(k), v["rate"], v["overhead_s"], cpu[int(k)])
        for k, v in params["rates"].items()
    }
    live = LiveRun(
        policy=str(params["policy"]),
        load=float(params["load"]),
        jobs=[
            LiveJob(i, size, it, 0.0, arr, submit_s=sub) for i, size, it, sub, arr in params["jobs"]
        ],
    )
    jobs = sim_jobs(live, cpu, rates)
    nodes = int(params["nodes"])
    policy = make_policy(live.policy, nodes, {})
    if not isinstance(policy, GangPolicy):
        raise SpecError(f"{live.policy} is not a gang policy")
    rows: list[tuple[float, int]] = []
    inner = policy.next_quantum
    view = policy.matrix_view

    def next_quantum(now: float) -> Any:
        plan = inner(now)
        rows.append((now, _rows_of(view())))
        return plan

    policy.next_quantum = next_quantum  # type: ignore[method-assign]
    config = SimConfig(
        nodes=nodes,
        quantum=float(params["quantum"]),
        context_switch=float(params["context_switch"]),
        interference=float(params["interference"]),
        mode="exact",
        occupancy="full" if "occupancy" in params.get("terms", ()) else "early-end",
    )
    t0 = time.perf_counter()
    res = simulate(jobs, policy, config)
    seconds = time.perf_counter() - t0
    m = res.matching
    by_id = {j.job_id: k for k, j in enumerate(res.jobs)}

    def f(x: float) -> float | None:
        return None if math.isnan(x) else x

    times = [
        SimJobTimes(
            lj.index,
            sj.runtime,
            sj.submit,
            f(res.start[by_id[sj.job_id]]),
            f(res.end[by_id[sj.job_id]]),
        )
        for lj, sj in zip(live.jobs, jobs, strict=True)
    ]
    sim = SimRun(
        variant=str(params["variant"]),
        policy=live.policy,
        load=live.load,
        calibration=str(params["calibration"]),
        interference=float(params["interference"]),
        context_switch=float(params["context_switch"]),
        cpu=cpu,
        jobs=times,
        rows=_thin_rows(rows),
        matching_success_rate=(m.matched / m.quanta)
        if m and m.quanta and live.policy in MATCHING
        else None,
        quanta=m.quanta if m else 0.0,
        seconds=seconds,
    )
    return {**asdict(sim), "cpu": {str(k): v for k, v in cpu.items()}}


def _sim_run(d: Mapping[str, Any]) -> SimRun:
    r = dict(d)
    r["jobs"] = [SimJobTimes(**j) for j in r["jobs"]]
    r["rows"] = [tuple(x) for x in r.get("rows", [])]
    r["cpu"] = {int(k): float(v) for k, v in r["cpu"].items()}
    return SimRun(**r)


def run_sim(
    run: LiveRun, spec: ValidateSpec, variant: SimVariant, rates: Mapping[int, SizeRate]
) -> SimRun:
    """One live run through the simulator (exact mode, same quantum and policy); ``rates``:
    the dedicated behaviour around the run (:meth:`ValidationResult.run_rates`)."""
    return _sim_run(simulate_one(sim_params(run, spec, variant, rates), 0))


def _sweep(specs: list[RunSpec], sweep: SweepOptions | None, desc: str) -> list[dict[str, Any]]:
    res = run_sweep(specs, sweep or SweepOptions(desc=desc))
    res.check()  # failed runs: each listed, exit status 1; the others stay in the store
    return [dict(r) for r in res.results if r is not None]


SENSITIVITY_FACTORS = (0.9, 0.95, 1.0, 1.05, 1.1)


def rate_sensitivity(
    result: ValidationResult,
    spec: ValidateSpec,
    factors: Sequence[float] = SENSITIVITY_FACTORS,
    variant: str | None = None,
    sweep: SweepOptions | None = None,
) -> list[dict[str, Any]]:
    """How much the simulated mean response of each live run depends on the dedicated rate.

    The dedicated rate drifts between measurements (docs/experiments.md, "Simulator vs
    live"); near saturation a few percent of rate move the response far more. Each run is
    simulated again with every size's rate times each factor, and once with the first
    rate measurement (before any run) instead of the one around it. One entry per live run:
    ``live`` (its mean response), ``factors`` (factor -> simulated mean response) and
    ``first``. ``variant`` names the ``[[sim]]`` model; by default the first, the one that
    decides the verdict.
    """
    if variant is None and spec.sims:
        variant = spec.sims[0].label
    var = next((v for v in spec.sims if v.label == variant), None)
    if var is None:
        raise SpecError(
            f"no [[sim]] variant {variant!r} in {spec.path}",
            fix="use one of: " + ", ".join(v.label for v in spec.sims),
        )
    if result.rates is None:
        raise LiveError("no dedicated-rate measurement in the result")
    runs: list[RunSpec] = []
    for run in result.live:
        around = result.run_rates(run)
        for f in factors:
            scaled = {s: replace(r, rate=r.rate * f) for s, r in around.items()}
            runs.append(RunSpec("sim-vs-live", sim_params(run, spec, var, scaled), 0, simulate_one))
        runs.append(
            RunSpec(
                "sim-vs-live", sim_params(run, spec, var, dict(result.rates.sizes)), 0, simulate_one
            )
        )
    sims = iter(_sweep(runs, sweep, "rate sensitivity"))
    out = []
    for run in result.live:
        live = [j.response_s for j in run.jobs if j.response_s is not None]
        per = {f"{f:g}": _mean_response(_sim_run(next(sims))) for f in factors}
        out.append(
            {
                "policy": run.policy,
                "load": run.load,
                "live": statistics.fmean(live) if live else math.nan,
                "factors": per,
                "first": _mean_response(_sim_run(next(sims))),
            }
        )
    return out


def _mean_response(sim: SimRun) -> float:
    r = [j.end_s - j.submit_s for j in sim.jobs if j.end_s is not None]
    return statistics.fmean(r) if r else math.nan


def sensitivity_lines(result: ValidationResult) -> list[str]:
    lines = []
    for s in result.sensitivity:
        cells = ", ".join(f"x{float(f):.2f} {v:.2f}" for f, v in s["factors"].items())
        first, lm = s["first"], s["live"]
        lines.append(
            f"{s['policy']:12s} load {s['load']}: live {lm:.2f} s; simulated, rate {cells}; "
            f"with the first measurement {first:.2f} ({(first / lm - 1) * 100:+.1f}%)"
        )
    return lines


def _thin_rows(rows: list[tuple[float, int]], step: float = 0.5) -> list[tuple[float, int]]:
    """Keep a sample whenever the row count changes, or every ``step`` s of virtual time."""
    out: list[tuple[float, int]] = []
    for t, n in rows:
        if not out or n != out[-1][1] or t - out[-1][0] >= step:
            out.append((round(t, 4), n))
    return out


def simulate_all(
    result: ValidationResult,
    spec: ValidateSpec,
    say: Say = print,
    sweep: SweepOptions | None = None,
) -> None:
    """Every ``[[sim]]`` variant of every live run (replaces ``result.sim``), and how the
    first variant's responses move with the dedicated rate (``result.sensitivity``)."""
    if result.rates is None or not result.live:
        raise LiveError("no live runs in the saved result", fix="run the live part first (as root)")
    runs = [
        RunSpec("sim-vs-live", sim_params(run, spec, v, result.run_rates(run)), 0, simulate_one)
        for v in spec.sims
        for run in result.live
    ]
    result.sim = [_sim_run(d) for d in _sweep(runs, sweep, "simulations")]
    for s in result.sim:
        say(f"sim {s.variant}: {s.policy} at load {s.load:g} ({s.seconds:.2f} s)")
    result.sensitivity = rate_sensitivity(result, spec, variant=spec.sims[0].label, sweep=sweep)
    result.meta["simulated"] = time.strftime("%Y-%m-%d %H:%M:%S")


# ---- the live side (root) ---------------------------------------------------------------------


def split_overhead(
    start: float, end: float, written: float | None, loop_s: float | None
) -> tuple[float | None, float | None]:
    """(before the loop, after it) of a job's execution: controller start to loop start
    (launch, interpreter start-up, connect; frozen time under gang included) and loop end
    (rank 0's report written) to the controller's end (exit and its notice)."""
    if written is None or loop_s is None:
        return None, None
    return written - loop_s - start, end - written


def next_gcomp(gcomp: int, share: float, target: float) -> int:
    """The compute iterations that bring a job of CPU share ``share`` to ``target``.

    With the CPU part of an iteration proportional to ``gcomp`` and its waiting
    part fixed, ``share = c / (c + w)``; solving for the ``c`` that gives
    ``target`` scales ``gcomp`` by ``target/(1-target) * (1-share)/share``
    (bounded to 4x either way: one round never jumps far on a noisy reading).
    The file write's small fixed CPU makes this approximate, so it is repeated.
    """
    if not 0 < target < 1:
        raise ValueError(f"target share must be in (0, 1), got {target}")
    share = min(max(share, 1e-3), 1 - 1e-3)
    factor = (target / (1 - target)) * ((1 - share) / share)
    return max(1, round(gcomp * min(4.0, max(0.25, factor))))


def _quiet(spec: ValidateSpec, reader: Callable[[], float] | None, say: Say) -> float | None:
    """Wait (at most ``quiet_timeout``) until the host spends less than ``quiet_limit``
    cores outside the experiment: on 2 cores one foreign process halves a node
    (testbed/experiment/harness/hostload.py). Returns the last reading; 0 limit: no wait."""
    from testbed.experiment.harness import hostload

    if spec.quiet_limit <= 0:
        return None
    return hostload.wait_quiet(
        spec.quiet_limit, 2.0, spec.quiet_timeout, cluster_cpu=reader, say=say
    )


def _alone(
    client: Any, spec: ValidateSpec, size: int, gcomp: int, name: str, run_dir: Path
) -> dict[str, float]:
    """One job of ``size`` alone for about ``rate_seconds``: rate, overhead, CPU share."""
    iterations = max(10, round(spec.rate_seconds / spec.iteration_s()))
    jid = harness_jobs.submit(client, name, size, job_argv(spec, gcomp, iterations))
    rec = harness_jobs.wait_ended(client, [jid], spec.rate_seconds * 10 + 60, poll=0.1)[jid]
    reports = harness_jobs.rank_reports(client, jid, written=True)
    if rec["state"] != "done" or not reports or "barriers_per_second" not in reports[0]:
        raise LiveError(
            f"rate measurement: job {jid} (size {size}) {rec['state']}",
            fix=f"see {run_dir}/controller.log and the job's output",
        )
    cpus = [float(r["cpu_ratio"]) for r in reports if "cpu_ratio" in r]
    pre, post = split_overhead(
        float(rec["start_time"]),
        float(rec["end_time"]),
        reports[0].get("_written"),
        reports[0].get("seconds"),
    )
    sample = {
        "iterations": float(iterations),
        "rate": float(reports[0]["barriers_per_second"]),
        "exec_s": float(rec["end_time"]) - float(rec["start_time"]),
        "cpu": sum(cpus) / len(cpus),
        # rank 0's CPU per iteration, to compare with the live runs' (the report)
        "cpu0_per_iteration": float(reports[0].get("cpu_seconds", 0.0)) / iterations,
    }
    if pre is not None and post is not None:
        sample.update(pre_s=pre, post_s=post)
    return sample


def measure_rates(
    spec: ValidateSpec,
    state_path: str,
    gcomp: int,
    repeats: int,
    run_dir: Path,
    say: Say,
    reader: Callable[[], float] | None = None,
    *,
    tune: bool = False,
) -> Rates:
    """Each job size alone on a fresh controller, ``repeats`` times, sizes interleaved
    (module docstring, "Dedicated time"). With ``tune``, first bring the widest job's CPU
    share to ``target_cpu`` by changing ``gcomp`` (at most ``tune_rounds`` tries)."""
    from testbed.experiment.harness import hostload

    sizes = list(range(1, spec.nodes + 1))
    samples: dict[int, list[dict[str, float]]] = {s: [] for s in sizes}
    tuning: list[dict[str, float]] = []
    before = hostload.sample(reader)
    with controller(state_path, "gang", spec.quantum, run_dir) as client:

        def undisturbed(size: int, name: str) -> dict[str, float]:
            # a sample the host disturbed (a foreign process took part of a node's core)
            # is measured again, at most twice; the last one is kept either way
            for attempt in range(3):
                _quiet(spec, reader, say)
                a = hostload.sample(reader)
                smp = _alone(client, spec, size, gcomp, f"{name}-{attempt}", run_dir)
                other = hostload.other_cores(a, hostload.sample(reader))
                smp["other_cores"] = other if other is not None else -1.0
                if spec.quiet_limit <= 0 or other is None or other <= 2 * spec.quiet_limit:
                    break
                say(f"    size {size}: disturbed ({other:.2f} cores outside), again")
            return smp

        if tune and spec.target_cpu:
            for k in range(spec.tune_rounds):
                s = undisturbed(spec.nodes, f"tune-{k}")
                tuning.append({"gcomp": float(gcomp), "share": s["cpu"]})
                say(f"    G_comp {gcomp}: CPU share {s['cpu']:.3f} (target {spec.target_cpu})")
                if abs(s["cpu"] - spec.target_cpu) <= spec.tune_tolerance:
                    break
                gcomp = next_gcomp(gcomp, s["cpu"], spec.target_cpu)
            # not converged: keep the try that came closest (a noisy reading can mislead)
            best = min(tuning, key=lambda t: abs(t["share"] - spec.target_cpu))
            if abs(best["share"] - spec.target_cpu) > spec.tune_tolerance:
                gcomp = int(best["gcomp"])
        for rep in range(repeats):
            for size in sizes:
                samples[size].append(undisturbed(size, f"rate-s{size}-r{rep}"))
    rates = Rates(0.0, gcomp, summarize_rates(samples), None, tuning)
    rates.other_cores = hostload.other_cores(before, hostload.sample(reader))
    for r in rates.sizes.values():
        say(
            f"    size {r.size}: {r.rate:.1f} iterations/s, overhead {r.overhead_s:.3f} s, "
            f"CPU share {r.cpu_share:.3f} ({len(r.samples)} x {r.samples[0]['iterations']:.0f}"
            " iterations)"
        )
    return rates


def run_live(
    spec: ValidateSpec,
    policy: str,
    load: float,
    planned: Sequence[PlannedJob],
    gcomp: int,
    state_path: str,
    run_dir: Path,
    reader: Callable[[], float] | None = None,
    say: Say = print,
) -> LiveRun:
    """One policy at one load: submit at arrival times, poll the matrix, drain."""
    from testbed.experiment.harness import hostload

    jobs = [LiveJob(p.index, p.size, p.iterations, p.dedicated_s, p.arrival_s) for p in planned]
    run = LiveRun(policy=policy, load=load, jobs=jobs)
    run.quiet_before = _quiet(spec, reader, say)
    began = time.monotonic()
    before = hostload.sample(reader)
    with controller(state_path, policy, spec.quantum, run_dir) as client:
        ids: dict[int, LiveJob] = {}
        t0 = time.monotonic()
        wall0: float | None = None
        next_poll = t0
        pending = sorted(jobs, key=lambda j: (j.arrival_s, j.index))
        k = 0

        def poll() -> None:
            nonlocal next_poll
            with contextlib.suppress(Exception):
                m = client.request("matrix")
                rows = _rows_of(m.get("slots") or [])
                shown = len(m.get("jobs") or {})
                base = wall0 if wall0 is not None else time.time()
                run.rows.append((round(time.time() - base, 3), rows, shown))
            next_poll += spec.poll_s

        while k < len(pending):
            now = time.monotonic()
            due = t0 + pending[k].arrival_s
            if now >= due:
                j = pending[k]
                jid = harness_jobs.submit(
                    client, f"v{j.index:03d}-s{j.size}", j.size, job_argv(spec, gcomp, j.iterations)
                )
                j.job_id, j.state = jid, "submitted"
                ids[jid] = j
                if wall0 is None:
                    wall0 = float(harness_jobs.records(client)[jid]["submit_time"])
                k += 1
            elif now >= next_poll:
                poll()
            else:
                time.sleep(min(due, next_poll) - now)
        deadline = time.monotonic() + spec.drain_timeout
        kill_sent = False
        while True:
            recs = harness_jobs.records(client)
            if all(recs.get(i, {}).get("state") in TERMINAL for i in ids):
                break
            if time.monotonic() > deadline and not kill_sent:
                for i in ids:
                    if recs.get(i, {}).get("state") not in TERMINAL:
                        with contextlib.suppress(Exception):
                            client.request("kill", job_id=i)
                            run.killed += 1
                kill_sent = True
                deadline = time.monotonic() + 30.0
            elif time.monotonic() > deadline:
                break
            if time.monotonic() >= next_poll:
                poll()
            time.sleep(0.25)
        status = client.request("status")
        run.quanta = int(status.get("quanta") or 0)
        if policy in MATCHING:
            run.matching_success_ratio = status.get("matching_success_ratio")
        run.status = {
            k_: status.get(k_)
            for k_ in (
                "quanta",
                "skew_p50_s",
                "skew_p99_s",
                "cluster_cpu_utilization",
                "slot_partner_ratio",
            )
        }
        base = wall0 or 0.0
        for jid, j in ids.items():
            r = recs.get(jid) or {}
            j.state = str(r.get("state", "unknown"))
            for attr, key in (
                ("submit_s", "submit_time"),
                ("start_s", "start_time"),
                ("end_s", "end_time"),
            ):
                v = r.get(key)
                setattr(j, attr, round(float(v) - base, 6) if isinstance(v, int | float) else None)
            j.cpu_s = float(r.get("cpu_s") or 0.0)
            rep = harness_jobs.rank0_report(client, jid, written=True)
            j.cpu_ratio = rep.get("cpu_ratio")
            j.barriers = rep.get("barriers")
            j.loop_cpu_s = rep.get("cpu_seconds")
            j.loop_s = rep.get("seconds")
            w = rep.get("_written")
            j.report_s = round(float(w) - base, 6) if isinstance(w, int | float) else None
    run.other_cores = hostload.other_cores(before, hostload.sample(reader))
    run.wall_seconds = time.monotonic() - began
    return run


def run_validation(
    spec: ValidateSpec,
    out: Path,
    *,
    quick: bool,
    reuse_cluster: bool = False,
    say: Say = print,
    save: Callable[[ValidationResult], None] | None = None,
    sweep: SweepOptions | None = None,
) -> ValidationResult:
    """Rates, then every (policy, load) live, each followed by a rate check, then the
    simulations; ``save`` after every step."""
    from testbed.experiment import results as results_mod
    from testbed.experiment.harness.cluster import cluster_cpu_reader, local_cluster, require_root
    from testbed.experiment.harness.loopcost import ns_per_iteration

    require_root("the live runs")
    out.mkdir(parents=True, exist_ok=True)
    stream = make_stream(spec)
    clipped = sum(e.clipped for e in stream)
    meta: dict[str, Any] = {
        "spec": spec.to_dict(),
        "quick": quick,
        "host": results_mod.host_facts(),
        "commit": results_mod.made_now("").commit,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    result = ValidationResult(meta=meta, stream=stream)

    def keep() -> None:
        if save is not None:
            save(result)

    work = Path(tempfile.mkdtemp(prefix="cosched-validate-"))  # run dirs, controller logs
    ns = ns_per_iteration()
    say(f"compute loop: {ns:.1f} ns per iteration; {len(stream)} jobs, {clipped} run times clipped")
    with local_cluster(spec, reuse_cluster, say) as cluster:
        meta["cluster"] = {k: v for k, v in cluster.items() if k != "state"}
        reader = cluster_cpu_reader()
        say(f"dedicated rates ({spec.rate_repeats} x each size):")
        gcomp = max(1, round(spec.compute_ms * 1e6 / ns))
        rates = measure_rates(
            spec, cluster["state"], gcomp, spec.rate_repeats, work / "rates", say, reader, tune=True
        )
        rates.ns_per_iteration = ns
        result.rates = rates
        keep()
        total = len(spec.policies) * len(spec.loads)
        n = 0
        for load in spec.loads:
            planned = plan_jobs(stream, rates, spec.nodes, load)
            for policy in spec.policies:
                n += 1
                span = max(p.arrival_s for p in planned)
                say(f"[{n}/{total}] {policy}, load {load:g}: {len(planned)} jobs over {span:.0f} s")
                run = run_live(
                    spec,
                    policy,
                    load,
                    planned,
                    rates.gcomp,
                    cluster["state"],
                    work / f"{policy}-{load:g}",
                    reader,
                    say,
                )
                result.live.append(run)
                say("    " + live_line(run))
                say(f"    dedicated rates after it ({spec.check_repeats} x each size):")
                run.rates_after = measure_rates(
                    spec,
                    cluster["state"],
                    rates.gcomp,
                    spec.check_repeats,
                    work / f"rates-{n}",
                    say,
                    reader,
                )
                run.rates_after.ns_per_iteration = ns
                keep()  # partial results survive
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    simulate_all(result, spec, say, sweep)
    return result


def live_line(run: LiveRun) -> str:
    done = [j for j in run.jobs if j.response_s is not None]
    resp = sum(j.response_s or 0.0 for j in done) / len(done) if done else math.nan
    parts = [
        f"{len(done)}/{len(run.jobs)} done",
        f"mean response {resp:.2f} s",
        f"{run.quanta} quanta",
    ]
    if run.matching_success_ratio is not None:
        parts.append(f"matched {run.matching_success_ratio:.0%}")
    if run.other_cores is not None:
        parts.append(f"host busy outside {run.other_cores:.2f} cores")
    if run.killed:
        parts.append(f"{run.killed} killed at the drain timeout")
    return ", ".join(parts)
