"""Job streams for live experiments: Yu & Byun's WL6 on the local cluster (pure; no I/O).

Yu & Byun 2011 §5.2–5.3 runs a mix of five NAS applications (Table 2) whose jobs
"arrive at the cluster with exponentially distributed inter-arrival times"
(mean 40.75 s heavy, 70.27 s light), each application sized so that it takes
66–73 s alone on the 16 nodes, job sizes drawn from 4, 8, 9 or 16 "as per
the NAS application requirements" (Table 3), jobs waiting in FIFO order, and
reports the average response time = waiting + execution.

This module turns an experiment spec's ``job-stream`` tables into that
stream for our cluster:

* **Applications** are imitated by the synthetic program with communication
  phases (``apps/synthetic.py --comm nn|a2a|allreduce|none --msg-bytes N
  --comm-rounds K``): per iteration ``compute_ms`` of CPU, then ``K``
  exchanges in the application's pattern. Each job draws one of its
  application's message options (pattern, size) with the shares of
  Table 2's size distribution: the library takes one size per job, so the
  distribution holds over the jobs, not inside each.
* **Job sizes** are scaled from Table 3 to our nodes:
  ``max(min_ranks, ceil(paper_size × nodes / paper_nodes))`` — 4, 8, 9, 16
  of 16 become 2, 2, 3, 4 of 4 (a 1-rank job would not communicate, so the
  smallest becomes 2).
* **Length.** A job computes ``job_seconds × (1 − comm_share)`` seconds alone
  on nodes of ``cpus_per_node`` CPU (``comm_share``: the share of its time
  the application spends communicating; Table 2's intensities), so every
  application takes about ``job_seconds`` alone, as the paper adjusted its
  applications to the same time.
* **Arrivals.** Exponential gaps, the same unit draws for every scheme, MPL
  and load (a load only stretches them), from ``seed``. The mean gap is the
  paper's × ``job_seconds / paper_job_seconds`` × (our mean job size ÷ our
  nodes) / (the paper's ÷ 16): the ratio heavy : light stays
  40.75 : 70.27 and the offered load (node-seconds asked per second) stays
  the paper's although our jobs are shorter and relatively wider.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from apps.npb import KERNELS
from testbed.experiment.fields import Table

COMMS = ("nn", "a2a", "allreduce", "none")
#: Yu & Byun 2011 Table 3: which applications each workload mixes.
WORKLOADS: dict[str, tuple[str, ...]] = {
    "WL1": ("bt",),
    "WL2": ("sp",),
    "WL3": ("ft",),
    "WL4": ("is",),
    "WL5": ("cg",),
    "WL6": ("bt", "sp", "ft", "is", "cg"),
}
PROGRAMS = ("synthetic", "npb")
SCHEMES = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
BOOSTS = ("weight", "freeze")


@dataclass(frozen=True)
class Message:
    """One message option of an application: pattern, bytes, share of jobs."""

    comm: str
    nbytes: int
    share: float


@dataclass(frozen=True)
class App:
    """One application of the mix (Yu & Byun 2011 Table 2), as the synthetic program runs it."""

    name: str
    intensity: str
    pattern: str
    paper_sizes: tuple[int, ...]
    compute_ms: float
    comm_rounds: int
    comm_share: float
    messages: tuple[Message, ...]
    npb_reps: int = 1  # programs = "npb": repetitions of the real kernel per job


@dataclass(frozen=True)
class StreamJob:
    """One job of a stream: what it runs and when it arrives (s after the first)."""

    index: int
    app: str
    paper_size: int
    size: int
    arrival_s: float
    message: Message
    iterations: int
    compute_ms: float
    comm_rounds: int
    program: str = "synthetic"  # or "npb": the real kernel (apps/npb), npb_class, npb_reps
    npb_class: str = "S"
    npb_reps: int = 1

    @property
    def name(self) -> str:
        return f"{self.index:03d}-{self.app}"

    def gcomp(self, ns_per_iteration: float) -> int:
        """Compute iterations of the synthetic program for ``compute_ms`` on this host."""
        return max(1, round(self.compute_ms * 1e6 / ns_per_iteration))

    def argv(self, ns_per_iteration: float, python: str = sys.executable) -> list[str]:
        """The job's command line: the synthetic program's flags, or the real kernel's."""
        if self.program == "npb":
            k = KERNELS[self.app]
            # a fixed number of repetitions, not --duration: time-sharing must stretch it
            return k.rank_argv(python, self.npb_class, "ours", extra=("--reps", str(self.npb_reps)))
        m = self.message
        rounds = 0 if m.comm == "none" else self.comm_rounds
        return [
            python,
            "-m",
            "apps.synthetic",
            "--iterations",
            str(self.iterations),
            "--gcomp",
            str(self.gcomp(ns_per_iteration)),
            "--comm",
            m.comm,
            "--msg-bytes",
            str(m.nbytes),
            "--comm-rounds",
            str(rounds),
            "--connect-timeout",
            "120",
        ]


@dataclass(frozen=True)
class StreamSpec:
    """A ``cdc-live`` study's spec (experiments/cdc-policies.toml)."""

    name: str
    path: Path
    schemes: tuple[str, ...]
    loads: tuple[str, ...]  # which of load_means to run, in order
    load_means: Mapping[str, float]  # load name -> the paper's mean interarrival, s
    mpls: tuple[int, ...]
    jobs: int
    seed: int
    job_seconds: float
    paper_job_seconds: float
    paper_nodes: int
    min_ranks: int
    apps: tuple[App, ...]
    nodes: int
    link: str
    cpus_per_node: float | None
    cpu_mechanism: str
    cfs_period_us: int
    cgroup: str
    quantum: float
    tick_ms: float | None  # None: the cluster's decision interval (the agents' own tick)
    spin_us: float
    boost: str
    drain_timeout: float
    quick: Mapping[str, Any] = field(default_factory=dict)
    # Loads at which every MPL of ``mpls`` runs; elsewhere only the first (None: all loads).
    mpl_loads: tuple[str, ...] | None = None
    workload: str = ""  # Yu & Byun 2011 Table 3's WL1-WL6: the apps the stream draws from
    program: str = "synthetic"  # "npb": run the real kernels (apps/npb) instead
    npb_class: str = "S"
    reps_job_seconds: float = 0.0  # the job_seconds npb_reps were chosen for (0: job_seconds)
    speeds: tuple[float, ...] | None = None  # [cluster] speeds: heterogeneous nodes
    decision_interval_ms: float | None = None  # [cluster]: the agents' tick

    def npb_size(self, app: str, paper_size: int) -> int:
        """The kernel's allowed rank count nearest to the scaled size (ties: the larger),
        at least ``min_ranks`` where it can, at most ``nodes``: BT and SP take squares,
        FT, IS and CG powers of two."""
        want = self.size_of(paper_size)
        ok = KERNELS[app].allowed_ranks(self.nodes)
        wide = [n for n in ok if n >= self.min_ranks] or ok  # a 1-rank job would not talk
        return min(wide, key=lambda n: (abs(n - want), -n))

    # ---- derived ------------------------------------------------------------------
    def size_of(self, paper_size: int) -> int:
        """Table 3's size on ``paper_nodes`` nodes scaled to ours (module docstring)."""
        return max(
            self.min_ranks, min(self.nodes, math.ceil(paper_size * self.nodes / self.paper_nodes))
        )

    def mean_size_fraction(self, paper: bool) -> float:
        """Expected job size ÷ nodes: applications equally likely, sizes uniform per app."""
        per_app = []
        for app in self.apps:
            sizes = app.paper_sizes if paper else tuple(self.size_of(s) for s in app.paper_sizes)
            per_app.append(sum(sizes) / len(sizes))
        return (sum(per_app) / len(per_app)) / (self.paper_nodes if paper else self.nodes)

    def time_scale(self) -> float:
        """Our job length ÷ the paper's."""
        return self.job_seconds / self.paper_job_seconds

    def width_scale(self) -> float:
        """Our mean relative job width ÷ the paper's."""
        return self.mean_size_fraction(False) / self.mean_size_fraction(True)

    def mean_interarrival(self, load: str) -> float:
        """Our mean interarrival time for ``load`` (module docstring), s."""
        return self.load_means[load] * self.time_scale() * self.width_scale()

    def cpu_share(self) -> float:
        return min(1.0, self.cpus_per_node) if self.cpus_per_node else 1.0

    def iterations(self, app: App) -> int:
        compute_s = self.job_seconds * (1.0 - app.comm_share) * self.cpu_share()
        return max(1, round(compute_s * 1000.0 / app.compute_ms))

    def app(self, name: str) -> App:
        return next(a for a in self.apps if a.name == name)

    def quick_version(self) -> StreamSpec:
        """The ``--quick`` run: the [quick] table's overrides."""
        q = dict(self.quick)
        return replace(
            self,
            schemes=tuple(q.get("schemes", self.schemes)),
            loads=tuple(q.get("loads", self.loads)),
            mpls=tuple(q.get("mpls", self.mpls)),
            jobs=int(q.get("jobs", self.jobs)),
            job_seconds=float(q.get("job_seconds", self.job_seconds)),
            drain_timeout=float(q.get("drain_timeout", self.drain_timeout)),
            reps_job_seconds=self.reps_job_seconds or self.job_seconds,
        )

    def npb_reps(self, app: App) -> int:
        """The kernel's repetitions per job: ``npb_reps`` is for the spec's own
        ``job_seconds``; a shorter run (``--quick``) scales it down."""
        base = self.reps_job_seconds or self.job_seconds
        return max(1, round(app.npb_reps * self.job_seconds / base))

    def runs(self) -> list[tuple[str, str, int]]:
        """(scheme, load, mpl) in run order; batch once per load (its MPL is always 1)."""
        out: list[tuple[str, str, int]] = []
        for load in self.loads:
            sweep = self.mpl_loads is None or load in self.mpl_loads
            for mpl in self.mpls if sweep else self.mpls[:1]:
                for scheme in self.schemes:
                    if scheme == "batch":
                        if any(r[0] == "batch" and r[1] == load for r in out):
                            continue
                        out.append((scheme, load, 1))
                    else:
                        out.append((scheme, load, mpl))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "schemes": list(self.schemes),
            "loads": list(self.loads),
            "load_means_paper_s": dict(self.load_means),
            "load_means_s": {k: self.mean_interarrival(k) for k in self.load_means},
            "mpls": list(self.mpls),
            "jobs": self.jobs,
            "seed": self.seed,
            "workload": self.workload or "every [apps] table",
            "programs": self.program,
            "npb_class": self.npb_class,
            "job_seconds": self.job_seconds,
            "paper_job_seconds": self.paper_job_seconds,
            "time_scale": self.time_scale(),
            "width_scale": self.width_scale(),
            "size_map": {
                str(s): self.size_of(s)
                for s in sorted({s for a in self.apps for s in a.paper_sizes})
            },
            "apps": [
                {
                    "name": a.name,
                    "intensity": a.intensity,
                    "pattern": a.pattern,
                    "paper_sizes": list(a.paper_sizes),
                    "sizes": [self.size_of(s) for s in a.paper_sizes],
                    "compute_ms": a.compute_ms,
                    "comm_rounds": a.comm_rounds,
                    "comm_share": a.comm_share,
                    "iterations": self.iterations(a),
                    "messages": [[m.comm, m.nbytes, m.share] for m in a.messages],
                }
                for a in self.apps
            ],
            "nodes": self.nodes,
            "link": self.link,
            "cpus_per_node": self.cpus_per_node,
            "cpu_mechanism": self.cpu_mechanism,
            "quantum": self.quantum,
            "tick_ms": self.tick_ms,
            "speeds": list(self.speeds) if self.speeds else None,
            "decision_interval_ms": self.decision_interval_ms,
            "spin_us": self.spin_us,
            "boost": self.boost,
        }


def job_stream(spec: StreamSpec, load: str) -> list[StreamJob]:
    """The jobs of one run, in arrival order (module docstring); the first arrives at 0."""
    rng = random.Random(spec.seed)
    mean = spec.mean_interarrival(load)
    out: list[StreamJob] = []
    t = 0.0
    for i in range(spec.jobs):
        gap = rng.expovariate(1.0)  # drawn for every job: the stream does not depend on load
        if i:
            t += gap * mean
        app = spec.apps[rng.randrange(len(spec.apps))]
        paper_size = app.paper_sizes[rng.randrange(len(app.paper_sizes))]
        msg = rng.choices(app.messages, weights=[m.share for m in app.messages])[0]
        npb = spec.program == "npb"
        out.append(
            StreamJob(
                index=i,
                app=app.name,
                paper_size=paper_size,
                size=spec.npb_size(app.name, paper_size) if npb else spec.size_of(paper_size),
                arrival_s=t,
                message=msg,
                iterations=spec.iterations(app),
                compute_ms=app.compute_ms,
                comm_rounds=app.comm_rounds,
                program=spec.program,
                npb_class=spec.npb_class,
                npb_reps=spec.npb_reps(app),
            )
        )
    return out


# ---- measurements ----------------------------------------------------------------------

CDC_COUNTERS = ("decisions", "conflicts", "boosts", "md_count", "md_sum_s", "agent_cpu_s")


def cdc_delta(
    before: Mapping[str, Mapping[str, Any] | None], after: Mapping[str, Mapping[str, Any] | None]
) -> dict[str, Any] | None:
    """Sum over nodes of what the agents' ``cdc`` counters gained during a run.

    A node whose counters went down was reconfigured in between (the agent
    resets them when the scheme changes): its ``after`` values count whole.
    None when no agent reports a ``cdc`` block (agents without the CDC side).
    """
    total: dict[str, Any] = dict.fromkeys(CDC_COUNTERS, 0)
    buckets: list[float] = []
    bounds: list[float] = []
    schemes: dict[str, str] = {}
    seen = False
    for node, a in after.items():
        if not a:
            continue
        seen = True
        b = before.get(node) or {}
        reset = any(float(a.get(k) or 0) < float(b.get(k) or 0) for k in CDC_COUNTERS)
        base = {} if reset else b
        for k in CDC_COUNTERS:
            total[k] += float(a.get(k) or 0) - float(base.get(k) or 0)
        ab = list(a.get("md_buckets") or [])
        bb = list(base.get("md_buckets") or [])
        if len(buckets) < len(ab):
            buckets += [0.0] * (len(ab) - len(buckets))
        for i, v in enumerate(ab):
            buckets[i] += float(v) - (float(bb[i]) if i < len(bb) else 0.0)
        bounds = list(a.get("md_bounds_s") or bounds)
        schemes[node] = str(a.get("scheme"))
    if not seen:
        return None
    total["decisions"] = int(total["decisions"])
    total["conflicts"] = int(total["conflicts"])
    total["boosts"] = int(total["boosts"])
    total["md_count"] = int(total["md_count"])
    total["md_buckets"] = [int(v) for v in buckets]
    total["md_bounds_s"] = bounds
    total["schemes"] = schemes
    return total


def bcr(cdc: Mapping[str, Any] | None) -> float | None:
    """Boost conflict ratio = conflicts ÷ decision points (docs/cdc.md)."""
    if not cdc or not cdc.get("decisions"):
        return None
    return float(cdc["conflicts"]) / float(cdc["decisions"])


def md_mean_s(cdc: Mapping[str, Any] | None) -> float | None:
    """Mean message delay over every completed receive, s."""
    if not cdc or not cdc.get("md_count"):
        return None
    return float(cdc["md_sum_s"]) / float(cdc["md_count"])


def job_times(record: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(wait, execution, response) of an ended job record (controller API), s."""
    sub, start, end = record.get("submit_time"), record.get("start_time"), record.get("end_time")
    if not all(isinstance(x, int | float) for x in (sub, start, end)):
        return None
    assert isinstance(sub, int | float) and isinstance(start, int | float)
    assert isinstance(end, int | float)
    return start - sub, end - start, end - sub


def utilization(records: Sequence[Mapping[str, Any]], cpus: float) -> float | None:
    """CPU the jobs used ÷ CPU the cluster offered from the first arrival to the last end."""
    subs = [
        float(r["submit_time"]) for r in records if isinstance(r.get("submit_time"), int | float)
    ]
    ends = [float(r["end_time"]) for r in records if isinstance(r.get("end_time"), int | float)]
    if not subs or not ends or cpus <= 0:
        return None
    span = max(ends) - min(subs)
    if span <= 0:
        return None
    return sum(float(r.get("cpu_s") or 0.0) for r in records) / (span * cpus)


def mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


# ---- the spec's TOML ---------------------------------------------------------------------

_APP_KEYS = {
    "intensity",
    "pattern",
    "paper_sizes",
    "compute_ms",
    "comm_rounds",
    "comm_share",
    "messages",
    "npb_reps",
}
_EXPERIMENT = {
    "name",
    "schemes",
    "loads",
    "mpls",
    "mpl_loads",
    "jobs",
    "seed",
    "job_seconds",
    "paper_job_seconds",
    "drain_timeout",
    "workload",
    "programs",
    "npb_class",
}
_QUICK = {"schemes", "loads", "mpls", "jobs", "job_seconds", "drain_timeout"}


def _app(name: str, t: Table) -> App:
    t.only(_APP_KEYS)
    sizes = t.items("paper_sizes", int, minimum=1, example="[4, 8, 16]")
    raw = t.get("messages", list)
    msgs = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise t.error(f"messages[{i}]", 'a table like {comm = "nn", bytes = 8, share = 50}')
        mt = Table(t.path, f"{t.name}.messages[{i}]", m)
        mt.only({"comm", "bytes", "share"})
        msgs.append(
            Message(
                mt.text("comm", choices=COMMS),
                mt.integer("bytes", minimum=0),
                mt.number("share", 1.0, above=0),
            )
        )
    if not msgs:
        raise t.error("messages", "at least one message option")
    return App(
        name=name,
        intensity=t.text("intensity", ""),
        pattern=t.text("pattern", ""),
        paper_sizes=tuple(sizes),
        compute_ms=t.number("compute_ms", above=0),
        comm_rounds=t.integer("comm_rounds", 1, minimum=0),
        comm_share=t.number("comm_share", 0.0, minimum=0, below=1),
        messages=tuple(msgs),
        npb_reps=t.integer("npb_reps", 1, minimum=1),
    )


def _speeds(cl: Table, nodes: int) -> tuple[float, ...] | None:
    """[cluster] speeds: a list or testbed/cluster/cpu.py's text form, one per node."""
    from testbed.cluster.cpu import parse_speeds

    if not cl.has("speeds"):
        return None
    raw = cl.data["speeds"]
    text = ",".join(str(x) for x in raw) if isinstance(raw, list) else str(raw)
    try:
        return parse_speeds(text, nodes)
    except ValueError as e:
        raise cl.error("speeds", str(e)) from None


def load_stream_spec(doc: Table) -> StreamSpec:
    """A ``cdc-live`` spec (experiments/cdc-policies.toml): every problem one line."""
    exp = doc.table("experiment", required=True)
    cl, ctl, loads, mapping, quick, apps_t = (
        doc.table(n) for n in ("cluster", "controller", "loads", "mapping", "quick", "apps")
    )
    exp.only(_EXPERIMENT)
    if not loads.data:
        raise doc.error(
            None, "[loads] missing", fix="name = mean interarrival s, e.g. heavy = 40.75"
        )
    load_means = {k: loads.number(k, above=0) for k in loads.data}
    schemes = tuple(exp.items("schemes", str, list(SCHEMES), choices=SCHEMES))
    run_loads = tuple(exp.items("loads", str, list(load_means), choices=tuple(load_means)))
    mpls = tuple(exp.items("mpls", int, [5], minimum=1, maximum=64, example="[3, 5]"))
    mpl_loads = (
        tuple(exp.items("mpl_loads", str, choices=tuple(load_means)))
        if exp.has("mpl_loads")
        else None
    )
    mapping.only({"paper_nodes", "min_ranks"})
    if not apps_t.data:
        raise doc.error(None, "no [apps.NAME] tables", fix="see experiments/cdc-policies.toml")
    apps = tuple(_app(n, apps_t.table(n)) for n, v in apps_t.data.items() if isinstance(v, dict))
    workload = exp.text("workload", "")  # "": every [apps.NAME] of the spec
    if workload:
        if workload not in WORKLOADS:
            raise exp.error(
                "workload",
                f"unknown {workload!r}; Yu & Byun 2011 Table 3 has {', '.join(WORKLOADS)}",
            )
        have = {a.name for a in apps}
        missing = [a for a in WORKLOADS[workload] if a not in have]
        if missing:
            raise exp.error(
                "workload",
                f"{workload} mixes {', '.join(WORKLOADS[workload])}",
                fix="add " + ", ".join(f"[apps.{a}]" for a in missing),
            )
        apps = tuple(a for a in apps if a.name in WORKLOADS[workload])
    program = exp.text("programs", "synthetic", choices=PROGRAMS)
    npb_class = exp.text("npb_class", "S")
    if program == "npb":
        for a in apps:
            if a.name not in KERNELS:
                raise exp.error(
                    "programs", f"npb: [apps.{a.name}] is not a kernel ({', '.join(KERNELS)})"
                )
            if npb_class not in KERNELS[a.name].classes:
                raise exp.error("npb_class", f"{a.name} has no class {npb_class!r}")
    cl.only({"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup",
             "speeds", "decision_interval_ms"})  # fmt: skip
    cpus = cl.number("cpus_per_node", None, above=0) if cl.has("cpus_per_node") else None
    nodes = cl.integer("nodes", 4, minimum=1)
    ctl.only({"quantum", "tick_ms", "spin_us", "boost"})
    quick.only(_QUICK)
    spec = StreamSpec(
        name=exp.text("name", doc.path.stem),
        path=doc.path,
        schemes=schemes,
        loads=run_loads,
        load_means=load_means,
        mpls=mpls,
        jobs=exp.integer("jobs", 30, minimum=1),
        seed=exp.integer("seed", 2002),
        job_seconds=exp.number("job_seconds", 8.0, above=0),
        paper_job_seconds=exp.number("paper_job_seconds", 69.5, above=0),
        paper_nodes=mapping.integer("paper_nodes", 16, minimum=1),
        min_ranks=mapping.integer("min_ranks", 2, minimum=1),
        apps=apps,
        nodes=nodes,
        link=cl.text("link", "myrinet"),
        cpus_per_node=cpus,
        cpu_mechanism=cl.text("cpu_mechanism", "auto"),
        cfs_period_us=cl.integer("cfs_period_us", 10_000, minimum=1),
        cgroup=cl.text("cgroup", "auto", choices=("auto", "v1", "v2")),
        quantum=ctl.number("quantum", 0.1, minimum=0.01),
        # None: the controller leaves the tick to the cluster's agents
        tick_ms=ctl.number("tick_ms", None, above=0) if ctl.has("tick_ms") else None,
        spin_us=ctl.number("spin_us", 150.0, minimum=0),
        boost=ctl.text("boost", "weight", choices=BOOSTS),
        drain_timeout=exp.number("drain_timeout", 900.0, above=0),
        quick=dict(quick.data),
        mpl_loads=mpl_loads,
        workload=workload,
        program=program,
        npb_class=npb_class,
        speeds=_speeds(cl, nodes),
        decision_interval_ms=(
            cl.number("decision_interval_ms", None, minimum=0.1)
            if cl.has("decision_interval_ms")
            else None
        ),
    )
    # the [quick] table's values must have the types and names of the keys they replace
    quick.items("schemes", str, [], choices=SCHEMES)
    quick.items("loads", str, [], choices=tuple(load_means))
    quick.items("mpls", int, [5], minimum=1, maximum=64, example="[5]")
    quick.integer("jobs", 1, minimum=1)
    quick.number("job_seconds", 1.0, above=0)
    quick.number("drain_timeout", 1.0, above=0)
    return spec
