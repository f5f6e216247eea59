"""The program's costs by gang size, measured on the live cluster (issue 25; part of
``cosched calibrate``).

What testbed/sim/program.py and the launch term need, from runs of the synthetic
program through the real controller, one job alone on clusters of 2, 4 and 8 nodes
(each size its own cluster; ``cpus_per_node = "fit"``: a core per node while the
host's cores last, then nodes share them):

* **barrier**: a job of barriers only (G_comp = G_IO = 0, waits block, as ParPar's Unix
  IPC did): ``b(n)`` = rank 0's seconds per barrier, ``c(n)`` = the CPU a rank spends
  per barrier (mean over ranks). Fitted linear in ``n - 1`` (BarrierCost.fit).
* **launch** = from the controller's start of the job to the moment its last rank is
  connected and begins its work (the program's ``started_wall``); ``launch_cpu`` = the
  CPU its ranks used for that (``startup_cpu_seconds``) over the launch time.
* **teardown** = from the last rank's last barrier (``ended_wall``) to the controller's
  end of the job: the rank exits, the agent reaps it, the controller hears of it.
* **fine** (a check of the program term, not an input): the §4.2.1 fine-grain program
  with one G_comp for every size (45 % CPU at 2 nodes) -- its seconds per barrier
  should grow with the size as ``b(n)`` does, and its CPU share fall as
  ``(t_comp + c(n)) / (t_comp + b(n))``.

The controller runs a 50 ms quantum here so that the wait for the first thaw and for
the next quantum boundary, which the simulator's quanta already have, is at most
that much of launch and teardown. The model takes launch and teardown from the
smallest size measured (nodes with a core each): on 8 nodes sharing 2 cores, 8
interpreters start on 2 CPUs, a cost of this host that ParPar's one CPU per node
did not have; every size is kept in ``[measured.sizes]``.

Pure parts (:func:`summarise`, :func:`model_terms`) are unit-tested on given runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError, hostload
from testbed.experiment.harness.cluster import Say, cluster_cpu_reader, local_cluster
from testbed.experiment.paired.run import run_controlled
from testbed.experiment.paired.spec import AppParams, fit_cpus

SIZES = (2, 4, 8)
QUANTUM = 0.05  # s: the thaw and boundary waits stay out of launch and teardown
KINDS = ("barrier", "fine")


@dataclass(frozen=True)
class SizeRun:
    """One job alone on ``size`` nodes: what its ranks and the controller recorded."""

    size: int
    kind: str  # "barrier" | "fine"
    repeat: int
    barrier_wall: float  # s per barrier (rank 0)
    barrier_cpu: float  # CPU s per barrier, mean over ranks
    cpu_share: float  # CPU / wall, mean over ranks
    launch: float  # s from the controller's start to the last rank's first barrier
    launch_cpu: float  # CPU share of the ranks during the launch
    teardown: float  # s from the last rank's last barrier to the controller's end
    other_cores: float | None = None
    gcomp: int = 0
    # s per barrier the ranks spent runnable but waiting for a CPU (schedstat): rank 0's
    # plus the others' mean, the wake-ups on a barrier's critical path
    runq: float = 0.0

    @property
    def quiet_wall(self) -> float:
        """Seconds per barrier less the run-queue waits: what a host with nothing else to
        run would give (at least the CPU the barrier used)."""
        return max(self.barrier_cpu, self.barrier_wall - self.runq)


def run_from(
    size: int,
    kind: str,
    repeat: int,
    record: Mapping[str, Any],
    reports: Sequence[Mapping[str, Any]],
    gcomp: int = 0,
) -> SizeRun:
    """A :class:`SizeRun` from the controller's record and the ranks' reports."""
    need = ("barriers", "seconds", "cpu_seconds", "started_wall", "ended_wall")
    if not reports or any(any(k not in r for k in need) for r in reports):
        raise LiveError(f"{kind} job on {size} nodes left incomplete rank reports")
    start, end = record.get("start_time"), record.get("end_time")
    if not isinstance(start, int | float) or not isinstance(end, int | float):
        raise LiveError(f"{kind} job on {size} nodes: the controller recorded no start/end")
    r0 = reports[0]
    barriers = max(1, int(r0["barriers"]))
    began = max(float(r["started_wall"]) for r in reports)
    ended = max(float(r["ended_wall"]) for r in reports)
    launch = max(0.0, began - float(start))
    startup_cpu = sum(float(r.get("startup_cpu_seconds", 0.0)) for r in reports) / len(reports)
    cpu = [float(r["cpu_seconds"]) / max(1, int(r["barriers"])) for r in reports]
    share = [float(r["cpu_seconds"]) / float(r["seconds"]) for r in reports if r["seconds"]]
    runq = [float(r.get("runq_seconds", 0.0)) / max(1, int(r["barriers"])) for r in reports]
    critical = runq[0] + (sum(runq[1:]) / (len(runq) - 1) if len(runq) > 1 else 0.0)
    return SizeRun(
        size=size,
        kind=kind,
        repeat=repeat,
        barrier_wall=float(r0["seconds"]) / barriers,
        barrier_cpu=sum(cpu) / len(cpu),
        cpu_share=sum(share) / len(share) if share else 0.0,
        launch=launch,
        launch_cpu=min(1.0, startup_cpu / launch) if launch > 0 else 0.0,
        teardown=max(0.0, float(end) - ended),
        gcomp=gcomp,
        runq=critical,
    )


@dataclass(frozen=True)
class SizeSummary:
    """Means over the repeats of one size and kind (sd beside each)."""

    size: int
    kind: str
    n: int
    barrier_wall: float
    barrier_wall_sd: float
    barrier_cpu: float
    cpu_share: float
    launch: float
    launch_sd: float
    launch_cpu: float
    teardown: float
    teardown_sd: float
    gcomp: int = 0
    quiet_wall: float = 0.0  # barrier_wall less the run-queue waits (SizeRun.quiet_wall)
    runq: float = 0.0

    @property
    def quiet_share(self) -> float:
        """CPU share on a quiet host: CPU per barrier over the quiet seconds per barrier."""
        return self.barrier_cpu / self.quiet_wall if self.quiet_wall > 0 else 0.0


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def summarise(runs: Sequence[SizeRun]) -> list[SizeSummary]:
    """One :class:`SizeSummary` per (kind, size), sizes ascending."""
    out = []
    for kind, size in sorted({(r.kind, r.size) for r in runs}):
        rs = [r for r in runs if r.kind == kind and r.size == size]
        bw, bw_sd = _mean_sd([r.barrier_wall for r in rs])
        la, la_sd = _mean_sd([r.launch for r in rs])
        td, td_sd = _mean_sd([r.teardown for r in rs])
        out.append(
            SizeSummary(
                size=size,
                kind=kind,
                n=len(rs),
                barrier_wall=bw,
                barrier_wall_sd=bw_sd,
                barrier_cpu=_mean_sd([r.barrier_cpu for r in rs])[0],
                cpu_share=_mean_sd([r.cpu_share for r in rs])[0],
                launch=la,
                launch_sd=la_sd,
                launch_cpu=_mean_sd([r.launch_cpu for r in rs])[0],
                teardown=td,
                teardown_sd=td_sd,
                gcomp=rs[0].gcomp,
                quiet_wall=_mean_sd([r.quiet_wall for r in rs])[0],
                runq=_mean_sd([r.runq for r in rs])[0],
            )
        )
    return out


def model_terms(summaries: Sequence[SizeSummary]) -> dict[str, float]:
    """The ``[model]`` keys: the barrier fit over every size (seconds per barrier less the
    run-queue waits: a busy host's share is not the program's), launch and teardown from
    the smallest size (module docstring)."""
    from testbed.sim.program import BarrierCost

    bars = [s for s in summaries if s.kind == "barrier"]
    if not bars:
        raise ValueError("no barrier runs to fit")
    fit = BarrierCost.fit({s.size: (s.quiet_wall, s.barrier_cpu) for s in bars})
    smallest = min(bars, key=lambda s: s.size)
    return {
        "launch": smallest.launch,
        "launch_cpu": smallest.launch_cpu,
        "teardown": smallest.teardown,
        "barrier_wall_base": fit.wall_base,
        "barrier_wall_per_rank": fit.wall_per_rank,
        "barrier_cpu_base": fit.cpu_base,
        "barrier_cpu_per_rank": fit.cpu_per_rank,
    }


def fine_check(summaries: Sequence[SizeSummary]) -> list[dict[str, float]]:
    """Per size: the fine program's seconds per barrier and CPU share, measured and as the
    program model predicts them from the barrier runs (t_comp from the smallest size)."""
    bars = {s.size: s for s in summaries if s.kind == "barrier"}
    fines = sorted((s for s in summaries if s.kind == "fine"), key=lambda s: s.size)
    if not fines or fines[0].size not in bars:
        return []
    ref = fines[0]
    t_comp = ref.quiet_wall - bars[ref.size].quiet_wall
    out = []
    for f in fines:
        b = bars.get(f.size)
        if b is None:
            continue
        wall = t_comp + b.quiet_wall
        out.append(
            {
                "size": float(f.size),
                "measured_barrier_s": f.quiet_wall,
                "predicted_barrier_s": wall,
                "measured_cpu_share": f.quiet_share,
                "predicted_cpu_share": (t_comp + b.barrier_cpu) / wall if wall > 0 else 0.0,
            }
        )
    return out


# -- the live runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeCalConfig:
    """What the size runs need (``cosched calibrate --sizes``)."""

    sizes: tuple[int, ...] = SIZES
    repeats: int = 3
    duration: float = 6.0
    link: str = "myrinet"
    cgroup: str = "auto"
    cfs_period_us: int = 10_000
    quiet_limit: float = 0.15
    quiet_timeout: float = 120.0
    target_cpu: float = 0.45  # the fine job's share at the smallest size (§4.2.1)


@dataclass
class _Cluster:
    """ClusterSettings for one size (testbed/experiment/harness/cluster.py)."""

    nodes: int
    link: str
    cpus_per_node: float | None
    cpu_mechanism: str
    cfs_period_us: int
    cgroup: str


@dataclass
class SizeCalibration:
    runs: list[SizeRun] = field(default_factory=list)
    ns_per_iteration: float = 0.0
    cores: int = 0


def measure_sizes(
    cfg: SizeCalConfig,
    *,
    ns_per_iteration: Callable[[], float],
    work: Path,
    say: Say = print,
) -> SizeCalibration:
    """Every size on its own cluster: the barrier job, then the fine job, ``repeats`` times
    interleaved. Needs root and the host lock; brings each cluster up and down."""
    import os

    from apps.presets import fine_compute_s, gcomp_for

    cores = len(os.sched_getaffinity(0))
    out = SizeCalibration(ns_per_iteration=ns_per_iteration(), cores=cores)
    gcomp: int | None = None
    for size in sorted(cfg.sizes):
        cpus, mech = fit_cpus(size, cores)
        spec = _Cluster(size, cfg.link, cpus, mech, cfg.cfs_period_us, cfg.cgroup)
        say(f"{size} nodes ({cpus:g} CPU each, {mech})")
        with local_cluster(spec, False, say) as cluster:
            reader = cluster_cpu_reader()
            for repeat in range(cfg.repeats):
                for kind in KINDS:
                    if kind == "fine" and gcomp is None:
                        bars = [r for r in out.runs if r.kind == "barrier" and r.size == size]
                        b = sum(r.quiet_wall for r in bars) / len(bars)
                        c = sum(r.barrier_cpu for r in bars) / len(bars)
                        x = fine_compute_s(b, c, cfg.target_cpu)
                        gcomp = gcomp_for(x, out.ns_per_iteration)
                        say(
                            f"    fine job: {x * 1e3:.3f} ms of compute per barrier "
                            f"(G_comp {gcomp}) for {cfg.target_cpu:.0%} CPU at {size} nodes"
                        )
                    g = 0 if kind == "barrier" else (gcomp or 0)
                    app = AppParams(g, 0, 8193, 0.0, "block")
                    hostload.wait_quiet(
                        cfg.quiet_limit, 2.0, cfg.quiet_timeout, cluster_cpu=reader, say=say
                    )
                    before = hostload.sample(reader)
                    res = run_controlled(
                        cluster["state"], size, QUANTUM, cfg.duration, "gang", {},
                        [(f"{kind}{repeat}", kind, app)],
                        work / f"n{size}-{kind}-{repeat}",
                    )  # fmt: skip
                    other = hostload.other_cores(before, hostload.sample(reader))
                    (record, reports) = next(iter(res.details.values()))
                    run = replace(
                        run_from(size, kind, repeat, record, reports, g), other_cores=other
                    )
                    out.runs.append(run)
                    say(
                        f"    {kind} ({repeat + 1}/{cfg.repeats}): "
                        f"{run.barrier_wall * 1e3:.3f} ms per barrier ({run.quiet_wall * 1e3:.3f} "
                        f"without run-queue waits), CPU {run.cpu_share:.3f}, "
                        f"launch {run.launch:.2f} s, teardown {run.teardown:.2f} s"
                        + (f", host busy outside {other:.2f} cores" if other is not None else "")
                    )
            time.sleep(0.5)
    return out


def measured_doc(cal: SizeCalibration) -> dict[str, Any]:
    """``[measured.sizes]``: every run's figures and the summaries."""
    doc: dict[str, Any] = {
        "quantum": QUANTUM,
        "host_cores": cal.cores,
        "ns_per_iteration": cal.ns_per_iteration,
    }
    for s in summarise(cal.runs):
        runs = [r for r in cal.runs if r.kind == s.kind and r.size == s.size]
        busy = [r.other_cores for r in runs if r.other_cores is not None]
        doc[f"{s.kind}_n{s.size}"] = {
            "barrier_wall": s.barrier_wall,
            "barrier_wall_sd": s.barrier_wall_sd,
            "barrier_wall_quiet": s.quiet_wall,
            "runq_per_barrier": s.runq,
            "barrier_cpu": s.barrier_cpu,
            "cpu_share": s.cpu_share,
            "launch": s.launch,
            "launch_sd": s.launch_sd,
            "launch_cpu": s.launch_cpu,
            "teardown": s.teardown,
            "teardown_sd": s.teardown_sd,
            "gcomp": s.gcomp,
            "barrier_wall_values": [r.barrier_wall for r in runs],
            "barrier_wall_quiet_values": [r.quiet_wall for r in runs],
            "launch_values": [r.launch for r in runs],
            "teardown_values": [r.teardown for r in runs],
            "host_busy_outside_cores_max": max(busy) if busy else -1.0,
        }
    for row in fine_check(summarise(cal.runs)):
        doc[f"check_n{int(row['size'])}"] = {k: v for k, v in row.items() if k != "size"}
    return doc


def summary_lines(cal: SizeCalibration) -> list[str]:
    """What ``cosched calibrate`` prints about the sizes."""
    lines = [
        f"{'job':<9}{'nodes':>6}{'ms/barrier':>12}{'less runq':>11}{'CPU/barrier ms':>16}"
        f"{'CPU/wall':>10}{'launch s':>10}{'teardown s':>12}",
        "-" * 86,
    ]
    sums = summarise(cal.runs)
    for s in sums:
        lines.append(
            f"{s.kind:<9}{s.size:>6}{s.barrier_wall * 1e3:>12.3f}{s.quiet_wall * 1e3:>11.3f}"
            f"{s.barrier_cpu * 1e3:>16.3f}{s.cpu_share:>10.3f}{s.launch:>10.2f}"
            f"{s.teardown:>12.2f}"
        )
    terms = model_terms(sums)
    lines.append(
        f"barrier fit (less run-queue waits): b(n) = {terms['barrier_wall_base'] * 1e3:.3f} + "
        f"{terms['barrier_wall_per_rank'] * 1e3:.3f} (n - 1) ms, c(n) = "
        f"{terms['barrier_cpu_base'] * 1e3:.3f} + {terms['barrier_cpu_per_rank'] * 1e3:.3f} "
        f"(n - 1) ms"
    )
    for row in fine_check(sums):
        lines.append(
            f"fine program on {int(row['size'])} nodes: {row['measured_barrier_s'] * 1e3:.3f} ms "
            f"per barrier (model {row['predicted_barrier_s'] * 1e3:.3f}), CPU "
            f"{row['measured_cpu_share']:.3f} (model {row['predicted_cpu_share']:.3f})"
        )
    return lines
