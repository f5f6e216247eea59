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


class StreamSpecError(ValueError):
    """A malformed job-stream spec (one line: where, what, how to fix)."""


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
            python, "-m", "apps.synthetic",
            "--iterations", str(self.iterations),
            "--gcomp", str(self.gcomp(ns_per_iteration)),
            "--comm", m.comm,
            "--msg-bytes", str(m.nbytes),
            "--comm-rounds", str(rounds),
            "--connect-timeout", "120",
        ]  # fmt: skip


@dataclass(frozen=True)
class StreamSpec:
    """A ``kind = "job-stream"`` experiment (experiments/cdc-policies.toml)."""

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
    tick_ms: float
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


def _get(
    table: Mapping[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    where: str,
    default: Any = ...,
) -> Any:
    if key not in table:
        if default is ...:
            raise StreamSpecError(f"{where}.{key}: missing; add `{key} = ...`")
        return default
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in kinds)
        raise StreamSpecError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _check_keys(table: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in table:
        if key not in known:
            raise StreamSpecError(
                f"{where}.{key}: unknown key; valid keys: {', '.join(sorted(known))}"
            )


def _app(name: str, t: Mapping[str, Any], where: str) -> App:
    _check_keys(
        t,
        {
            "intensity",
            "pattern",
            "paper_sizes",
            "compute_ms",
            "comm_rounds",
            "comm_share",
            "messages",
            "npb_reps",
        },
        where,
    )
    sizes = _get(t, "paper_sizes", list, where)
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise StreamSpecError(
            f"{where}.paper_sizes: a list of process counts >= 1, e.g. [4, 8, 16]"
        )
    msgs_raw = _get(t, "messages", list, where)
    msgs = []
    for i, m in enumerate(msgs_raw):
        w = f"{where}.messages[{i}]"
        if not isinstance(m, dict):
            raise StreamSpecError(f'{w}: a table like {{comm = "nn", bytes = 8, share = 50}}')
        _check_keys(m, {"comm", "bytes", "share"}, w)
        comm = _get(m, "comm", str, w)
        if comm not in COMMS:
            raise StreamSpecError(f"{w}.comm: one of {', '.join(COMMS)}, got {comm!r}")
        nbytes = _get(m, "bytes", int, w)
        share = float(_get(m, "share", (int, float), w, 1.0))
        if nbytes < 0 or share <= 0:
            raise StreamSpecError(f"{w}: bytes must be >= 0 and share > 0")
        msgs.append(Message(comm, nbytes, share))
    if not msgs:
        raise StreamSpecError(f"{where}.messages: at least one message option")
    app = App(
        name=name,
        intensity=_get(t, "intensity", str, where, ""),
        pattern=_get(t, "pattern", str, where, ""),
        paper_sizes=tuple(sizes),
        compute_ms=float(_get(t, "compute_ms", (int, float), where)),
        comm_rounds=_get(t, "comm_rounds", int, where, 1),
        comm_share=float(_get(t, "comm_share", (int, float), where, 0.0)),
        messages=tuple(msgs),
        npb_reps=_get(t, "npb_reps", int, where, 1),
    )
    if app.npb_reps < 1:
        raise StreamSpecError(f"{where}.npb_reps: repetitions per job, >= 1")
    if app.compute_ms <= 0 or app.comm_rounds < 0 or not 0 <= app.comm_share < 1:
        raise StreamSpecError(f"{where}: compute_ms > 0, comm_rounds >= 0, 0 <= comm_share < 1")
    return app


def load_stream_spec(doc: Mapping[str, Any], path: Path) -> StreamSpec:
    """Build a :class:`StreamSpec` from a parsed TOML document (``kind = "job-stream"``)."""
    origin = str(path)

    def table(name: str) -> Mapping[str, Any]:
        t = doc.get(name, {})
        if not isinstance(t, dict):
            raise StreamSpecError(f"{origin}: [{name}] must be a table")
        return t

    exp, cl, ctl, loads, mapping, quick = (
        table(n) for n in ("experiment", "cluster", "controller", "loads", "mapping", "quick")
    )
    apps_t = table("apps")
    w = f"{origin}: [experiment]"
    _check_keys(
        exp,
        {"name", "kind", "schemes", "loads", "mpls", "mpl_loads", "jobs", "seed",
         "job_seconds", "paper_job_seconds", "drain_timeout", "workload", "programs",
         "npb_class"},
        w,
    )  # fmt: skip
    schemes = tuple(_get(exp, "schemes", list, w, list(SCHEMES)))
    for s in schemes:
        if s not in SCHEMES:
            raise StreamSpecError(f"{w}.schemes: unknown {s!r}; valid: {', '.join(SCHEMES)}")
    if not loads:
        raise StreamSpecError(
            f"{origin}: [loads] missing: name = mean interarrival s, e.g. heavy = 40.75"
        )
    load_means: dict[str, float] = {}
    for k, v in loads.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise StreamSpecError(f"{origin}: [loads].{k}: a mean interarrival time > 0 s")
        load_means[k] = float(v)
    run_loads = tuple(_get(exp, "loads", list, w, list(load_means)))
    for ld in run_loads:
        if ld not in load_means:
            raise StreamSpecError(
                f"{w}.loads: unknown {ld!r}; defined in [loads]: {', '.join(load_means)}"
            )
    mpls = tuple(_get(exp, "mpls", list, w, [5]))
    if not mpls or any(
        isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= 64 for m in mpls
    ):
        raise StreamSpecError(f"{w}.mpls: a list of MPLs in 1..64, e.g. [3, 5]")
    mpl_loads_raw = exp.get("mpl_loads")
    mpl_loads: tuple[str, ...] | None = None
    if mpl_loads_raw is not None:
        if not isinstance(mpl_loads_raw, list) or any(x not in load_means for x in mpl_loads_raw):
            raise StreamSpecError(
                f"{w}.mpl_loads: a list of loads from [loads] ({', '.join(load_means)})"
            )
        mpl_loads = tuple(mpl_loads_raw)
    jobs = _get(exp, "jobs", int, w, 30)
    if jobs < 1:
        raise StreamSpecError(f"{w}.jobs: must be >= 1")
    job_seconds = float(_get(exp, "job_seconds", (int, float), w, 8.0))
    paper_job_seconds = float(_get(exp, "paper_job_seconds", (int, float), w, 69.5))
    drain = float(_get(exp, "drain_timeout", (int, float), w, 900.0))
    if job_seconds <= 0 or paper_job_seconds <= 0 or drain <= 0:
        raise StreamSpecError(f"{w}: job_seconds, paper_job_seconds and drain_timeout must be > 0")
    wm = f"{origin}: [mapping]"
    _check_keys(mapping, {"paper_nodes", "min_ranks"}, wm)
    if not apps_t:
        raise StreamSpecError(f"{origin}: no [apps.NAME] tables; see experiments/cdc-policies.toml")
    apps = tuple(
        _app(n, t, f"{origin}: [apps.{n}]") for n, t in apps_t.items() if isinstance(t, dict)
    )
    workload = _get(exp, "workload", str, w, "")  # "": every [apps.NAME] of the spec
    if workload:
        if workload not in WORKLOADS:
            raise StreamSpecError(
                f"{w}.workload: unknown {workload!r}; Yu & Byun 2011 Table 3 has "
                f"{', '.join(WORKLOADS)}"
            )
        have = {a.name for a in apps}
        missing = [a for a in WORKLOADS[workload] if a not in have]
        if missing:
            raise StreamSpecError(
                f"{w}.workload: {workload} mixes {', '.join(WORKLOADS[workload])}; add "
                + ", ".join(f"[apps.{a}]" for a in missing)
            )
        apps = tuple(a for a in apps if a.name in WORKLOADS[workload])
    program = _get(exp, "programs", str, w, "synthetic")
    if program not in PROGRAMS:
        raise StreamSpecError(f"{w}.programs: one of {', '.join(PROGRAMS)}, got {program!r}")
    npb_class = _get(exp, "npb_class", str, w, "S")
    if program == "npb":
        for a in apps:
            if a.name not in KERNELS:
                raise StreamSpecError(
                    f"{w}.programs = npb: [apps.{a.name}] is not a kernel ({', '.join(KERNELS)})"
                )
            if npb_class not in KERNELS[a.name].classes:
                raise StreamSpecError(f"{w}.npb_class: {a.name} has no class {npb_class!r}")
    wc = f"{origin}: [cluster]"
    _check_keys(
        cl, {"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup"}, wc
    )
    nodes = _get(cl, "nodes", int, wc, 4)
    if nodes < 1:
        raise StreamSpecError(f"{wc}.nodes: must be >= 1")
    cpus = cl.get("cpus_per_node")
    if cpus is not None and (
        isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0
    ):
        raise StreamSpecError(f"{wc}.cpus_per_node: a number > 0, e.g. 0.5")
    cgroup = _get(cl, "cgroup", str, wc, "auto")
    if cgroup not in ("auto", "v1", "v2"):
        raise StreamSpecError(f"{wc}.cgroup: must be auto, v1 or v2, got {cgroup!r}")
    wt = f"{origin}: [controller]"
    _check_keys(ctl, {"quantum", "tick_ms", "spin_us", "boost"}, wt)
    quantum = float(_get(ctl, "quantum", (int, float), wt, 0.1))
    boost = _get(ctl, "boost", str, wt, "weight")
    if quantum < 0.01:
        raise StreamSpecError(f"{wt}.quantum: must be >= 0.01 s")
    if boost not in BOOSTS:
        raise StreamSpecError(f"{wt}.boost: one of {', '.join(BOOSTS)}, got {boost!r}")
    wq = f"{origin}: [quick]"
    _check_keys(quick, {"schemes", "loads", "mpls", "jobs", "job_seconds", "drain_timeout"}, wq)
    spec = StreamSpec(
        name=_get(exp, "name", str, w, path.stem),
        path=path,
        schemes=schemes,
        loads=run_loads,
        load_means=load_means,
        mpls=mpls,
        jobs=jobs,
        seed=_get(exp, "seed", int, w, 2002),
        job_seconds=job_seconds,
        paper_job_seconds=paper_job_seconds,
        paper_nodes=_get(mapping, "paper_nodes", int, wm, 16),
        min_ranks=_get(mapping, "min_ranks", int, wm, 2),
        apps=apps,
        nodes=nodes,
        link=_get(cl, "link", str, wc, "myrinet"),
        cpus_per_node=float(cpus) if cpus is not None else None,
        cpu_mechanism=_get(cl, "cpu_mechanism", str, wc, "auto"),
        cfs_period_us=_get(cl, "cfs_period_us", int, wc, 10_000),
        cgroup=cgroup,
        quantum=quantum,
        tick_ms=float(_get(ctl, "tick_ms", (int, float), wt, 10.0)),
        spin_us=float(_get(ctl, "spin_us", (int, float), wt, 150.0)),
        boost=boost,
        drain_timeout=drain,
        quick=dict(quick),
        mpl_loads=mpl_loads,
        workload=workload,
        program=program,
        npb_class=npb_class,
    )
    # the [quick] table's values must have the types of the keys they replace
    for k, want in (("schemes", list), ("loads", list), ("mpls", list), ("jobs", int),
                    ("job_seconds", (int, float)), ("drain_timeout", (int, float))):  # fmt: skip
        if k in quick:
            v = _get(quick, k, want, wq)
            if k == "mpls" and (
                not v
                or any(isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= 64 for m in v)
            ):
                raise StreamSpecError(f"{wq}.mpls: a list of MPLs in 1..64, e.g. [5]")
            if k in ("schemes", "loads") and not all(isinstance(x, str) for x in v):
                raise StreamSpecError(f"{wq}.{k}: a list of names")
            if k != "mpls" and not isinstance(v, list) and v <= 0:
                raise StreamSpecError(f"{wq}.{k}: must be > 0")
    q = spec.quick_version()  # the quick table must name known things too
    for s in q.schemes:
        if s not in SCHEMES:
            raise StreamSpecError(f"{wq}.schemes: unknown {s!r}; valid: {', '.join(SCHEMES)}")
    for ld in q.loads:
        if ld not in load_means:
            raise StreamSpecError(
                f"{wq}.loads: unknown {ld!r}; defined in [loads]: {', '.join(load_means)}"
            )
    return spec
