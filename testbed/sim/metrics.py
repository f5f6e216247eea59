"""Per-job and per-run metrics of a simulation (issue 2, "Metrics").

Definitions, with the choices made where the papers leave room:

* wait = first time the job ran − submit; response = end − submit.
* slowdown (seed 000 §4.2) = t_Elapsed / t_Executing, averaged over jobs.
  The paper's t_Executing is "the execution time measured by the kernel on
  the nodes"; in the simulator the job's run time on a dedicated machine
  stands for it (what the job takes when nothing else runs), so a job that
  ran alone from submission has slowdown 1. The CPU seconds each job used are
  reported too, for the other reading.
* bounded slowdown = max(1, response / max(run time, τ)), τ = 10 s.
* median slowdown is reported beside the mean (seed 004's appendix prefers it).
* makespan = last end − first submit.
* utilization = CPU seconds used by all jobs / (nodes × makespan), in 0..1.
* jobs in system: the time-weighted mean and the maximum of the series.
* matching success rate = quanta run with a partner / quanta with a slot
  (paired gang); per-slot matched fraction = quanta in which the slot was
  chosen as the partner / all quanta (seed 000 Fig. 7 bottom: "fraction of
  quanta in which jobs occupying different slots were used for matching").
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testbed.sim.results import SimResult

TAU = 10.0


@dataclass(frozen=True, slots=True)
class JobMetrics:
    job_id: int
    submit: float
    size: int
    runtime: float
    estimate: float
    start: float
    end: float
    wait: float
    response: float
    slowdown: float
    bounded_slowdown: float
    cpu_seconds: float


@dataclass(slots=True)
class RunSummary:
    policy: str
    nodes: int
    mode: str
    jobs: int
    completed: int
    rejected: int
    mean_wait: float
    mean_response: float
    mean_slowdown: float
    median_slowdown: float
    mean_bounded_slowdown: float
    makespan: float
    utilization: float
    mean_jobs_in_system: float
    max_jobs_in_system: int
    matching_success_rate: float | None
    slot_matched_fraction: dict[int, float] = field(default_factory=dict)
    load: float | None = None
    sim_seconds: float = 0.0
    jobs_per_second: float = 0.0


def job_metrics(res: SimResult) -> list[JobMetrics]:
    """One row per completed job, in submission order."""
    rows: list[JobMetrics] = []
    for k, job in enumerate(res.jobs):
        end = res.end[k]
        if math.isnan(end):
            continue
        start = res.start[k]
        response = end - job.submit
        slowdown = response / job.runtime if job.runtime > 0 else 1.0
        bounded = max(1.0, response / max(job.runtime, TAU))
        rows.append(
            JobMetrics(
                job_id=job.job_id,
                submit=job.submit,
                size=job.size,
                runtime=job.runtime,
                estimate=job.estimate,
                start=start,
                end=end,
                wait=start - job.submit,
                response=response,
                slowdown=slowdown,
                bounded_slowdown=bounded,
                cpu_seconds=res.cpu[k],
            )
        )
    return rows


def summarize(res: SimResult, rows: list[JobMetrics] | None = None) -> RunSummary:
    """Run-wide figures from a result (see the module docstring for definitions)."""
    rows = job_metrics(res) if rows is None else rows
    nodes = res.config.nodes
    done = len(rows)

    def mean(values: list[float]) -> float:
        return math.fsum(values) / len(values) if values else math.nan

    first = min((j.submit for j in res.jobs), default=0.0)
    last = max((r.end for r in rows), default=first)
    makespan = last - first
    cpu = math.fsum(r.cpu_seconds for r in rows)
    util = cpu / (nodes * makespan) if makespan > 0 else math.nan
    mean_n, max_n = _jobs_in_system(res)
    match_rate: float | None = None
    per_slot: dict[int, float] = {}
    m = res.matching
    if m is not None and m.quanta > 0:
        match_rate = m.matched / m.quanta
        per_slot = {s: used / m.quanta for s, used in sorted(m.slot_partner.items())}
    slowdowns = [r.slowdown for r in rows]
    return RunSummary(
        policy=res.policy,
        nodes=nodes,
        mode=res.config.mode,
        jobs=len(res.jobs),
        completed=done,
        rejected=len(res.rejected),
        mean_wait=mean([r.wait for r in rows]),
        mean_response=mean([r.response for r in rows]),
        mean_slowdown=mean(slowdowns),
        median_slowdown=statistics.median(slowdowns) if slowdowns else math.nan,
        mean_bounded_slowdown=mean([r.bounded_slowdown for r in rows]),
        makespan=makespan,
        utilization=util,
        mean_jobs_in_system=mean_n,
        max_jobs_in_system=max_n,
        matching_success_rate=match_rate,
        slot_matched_fraction=per_slot,
        sim_seconds=res.wall_seconds,
        jobs_per_second=len(res.jobs) / res.wall_seconds if res.wall_seconds > 0 else math.nan,
    )


def _jobs_in_system(res: SimResult) -> tuple[float, int]:
    t, n = res.series_t, res.series_n
    if len(t) < 2:
        return (float(n[0]) if n else 0.0), (int(n[0]) if n else 0)
    area = 0.0
    for k in range(len(t) - 1):
        area += n[k] * (t[k + 1] - t[k])
    span = t[-1] - t[0]
    return (area / span if span > 0 else float(n[0])), int(max(n))


def write_json(path: Path, summary: RunSummary, res: SimResult) -> None:
    doc = asdict(summary)
    doc["slot_matched_fraction"] = {str(k): v for k, v in summary.slot_matched_fraction.items()}
    doc["rejected_jobs"] = [{"job_id": j, "reason": why} for j, why in res.rejected]
    doc["config"] = asdict(res.config)
    path.write_text(json.dumps(_finite(doc), indent=2, allow_nan=False) + "\n")


def _finite(value: object) -> object:
    """JSON has no NaN: undefined figures (no completed job, no quanta) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_csv(path: Path, rows: list[JobMetrics]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f for f in JobMetrics.__dataclass_fields__])
        for r in rows:
            w.writerow(astuple_fast(r))


def astuple_fast(r: JobMetrics) -> tuple[object, ...]:
    return (
        r.job_id,
        f"{r.submit:.3f}",
        r.size,
        f"{r.runtime:.3f}",
        f"{r.estimate:.3f}",
        f"{r.start:.3f}",
        f"{r.end:.3f}",
        f"{r.wait:.3f}",
        f"{r.response:.3f}",
        f"{r.slowdown:.4f}",
        f"{r.bounded_slowdown:.4f}",
        f"{r.cpu_seconds:.3f}",
    )
