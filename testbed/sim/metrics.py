"""Per-job and per-run metrics of a simulation (issue 2, "Metrics").

Definitions, with the choices made where the papers leave room:

* wait = first time the job ran − submit; response = end − submit.
* slowdown (Wiseman & Feitelson 2003 §4.2) = t_Elapsed / t_Executing, averaged over jobs.
  The paper's t_Executing is "the execution time measured by the kernel on
  the nodes"; in the simulator the job's run time on a dedicated machine
  stands for it (what the job takes when nothing else runs), plus its launch
  and teardown when the model has them, so a job that ran alone from
  submission has slowdown 1. The CPU seconds each job used are
  reported too, for the other reading.
* bounded slowdown = max(1, response / max(run time, τ)), τ = 10 s.
* median slowdown is reported beside the mean (Feitelson & Rudolph's appendix prefers it).
* makespan = last end − first submit.
* utilization = CPU seconds used by all jobs / (nodes × makespan), in 0..1.
* jobs in system: the time-weighted mean and the maximum of the series.
* matching success rate = quanta run with a partner / quanta with a slot
  (paired gang); per-slot matched fraction = quanta in which the slot was
  chosen as the partner / all quanta (Wiseman & Feitelson 2003 Fig. 7 bottom: "fraction of
  quanta in which jobs occupying different slots were used for matching").
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from itertools import repeat
from operator import attrgetter, sub
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


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(JobMetrics))


@dataclass(slots=True)
class JobTable:
    """The per-job metrics of :class:`JobMetrics` as columns, one list per field.

    Completed jobs only, in submission order. Issue 11: one frozen object
    per job and per-row CSV writing cost as much as simulating EASY on the
    KTH trace; columns are built and written in a few passes of C loops.
    """

    job_id: list[int]
    submit: list[float]
    size: list[int]
    runtime: list[float]
    estimate: list[float]
    start: list[float]
    end: list[float]
    wait: list[float]
    response: list[float]
    slowdown: list[float]
    bounded_slowdown: list[float]
    cpu_seconds: list[float]

    def __len__(self) -> int:
        return len(self.job_id)

    def columns(self) -> tuple[list[float] | list[int], ...]:
        """The lists in :data:`COLUMNS` order."""
        return tuple(getattr(self, name) for name in COLUMNS)

    def rows(self) -> list[JobMetrics]:
        return [JobMetrics(*row) for row in zip(*self.columns(), strict=True)]


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


def job_table(res: SimResult) -> JobTable:
    """The metrics of every completed job, as columns (definitions in the module doc)."""
    done = [k for k, e in enumerate(res.end) if not math.isnan(e)]
    if len(done) == len(res.jobs):
        jobs = res.jobs
        start, end, cpu = res.start.tolist(), res.end.tolist(), res.cpu.tolist()
    else:
        jobs = [res.jobs[k] for k in done]
        start = [res.start[k] for k in done]
        end = [res.end[k] for k in done]
        cpu = [res.cpu[k] for k in done]
    submit = list(map(attrgetter("submit"), jobs))
    runtime = list(map(attrgetter("runtime"), jobs))
    response = list(map(sub, end, submit))
    # a job alone also spends its launch and teardown (issue 25's terms; 0 when off)
    overhead = res.config.overhead
    dedicated = [t + overhead for t in runtime] if overhead > 0 else runtime
    return JobTable(
        job_id=list(map(attrgetter("job_id"), jobs)),
        submit=submit,
        size=list(map(attrgetter("size"), jobs)),
        runtime=runtime,
        estimate=list(map(attrgetter("estimate"), jobs)),
        start=start,
        end=end,
        wait=list(map(sub, start, submit)),
        response=response,
        slowdown=[r / t if t > 0 else 1.0 for r, t in zip(response, dedicated, strict=True)],
        bounded_slowdown=[
            max(1.0, r / max(t, TAU)) for r, t in zip(response, dedicated, strict=True)
        ],
        cpu_seconds=cpu,
    )


def job_metrics(res: SimResult) -> list[JobMetrics]:
    """One row per completed job, in submission order."""
    return job_table(res).rows()


def _median(values: list[float]) -> float:
    """``statistics.median``, without importing ``statistics`` (start-up time)."""
    data = sorted(values)
    n = len(data)
    if n % 2 == 1:
        return data[n // 2]
    i = n // 2
    return (data[i - 1] + data[i]) / 2


def summarize(res: SimResult, table: JobTable | None = None) -> RunSummary:
    """Run-wide figures from a result (see the module docstring for definitions)."""
    table = job_table(res) if table is None else table
    nodes = res.config.nodes
    done = len(table)

    def mean(values: list[float]) -> float:
        return math.fsum(values) / len(values) if values else math.nan

    first = min(map(attrgetter("submit"), res.jobs), default=0.0)
    last = max(table.end, default=first)
    makespan = last - first
    cpu = math.fsum(table.cpu_seconds)
    util = cpu / (nodes * makespan) if makespan > 0 else math.nan
    mean_n, max_n = _jobs_in_system(res)
    match_rate: float | None = None
    per_slot: dict[int, float] = {}
    m = res.matching
    if m is not None and m.quanta > 0:
        match_rate = m.matched / m.quanta
        per_slot = {s: used / m.quanta for s, used in sorted(m.slot_partner.items())}
    slowdowns = table.slowdown
    return RunSummary(
        policy=res.policy,
        nodes=nodes,
        mode=res.config.mode,
        jobs=len(res.jobs),
        completed=done,
        rejected=len(res.rejected),
        mean_wait=mean(table.wait),
        mean_response=mean(table.response),
        mean_slowdown=mean(slowdowns),
        median_slowdown=_median(slowdowns) if slowdowns else math.nan,
        mean_bounded_slowdown=mean(table.bounded_slowdown),
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
    # added in series order, one term at a time (sum() might round differently)
    for nk, t0, t1 in zip(n[:-1], t[:-1], t[1:], strict=True):
        area += nk * (t1 - t0)
    span = t[-1] - t[0]
    return (area / span if span > 0 else float(n[0])), int(max(n))


def write_json(path: Path, summary: RunSummary, res: SimResult) -> None:
    path.write_text(json_text(summary, res))


def json_text(summary: RunSummary, res: SimResult) -> str:
    """What :func:`write_json` writes."""
    doc = asdict(summary)
    doc["slot_matched_fraction"] = {str(k): v for k, v in summary.slot_matched_fraction.items()}
    doc["rejected_jobs"] = [{"job_id": j, "reason": why} for j, why in res.rejected]
    doc["config"] = asdict(res.config)
    return json.dumps(_finite(doc), indent=2, allow_nan=False) + "\n"


def _finite(value: object) -> object:
    """JSON has no NaN: undefined figures (no completed job, no quanta) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# Digits after the point in the CSV, per column; ids and sizes are written as
# str() gives them. Rows end in "\r\n", as the csv module's default dialect does.
_DECIMALS = {
    name: 4 if "slowdown" in name else 3 for name in COLUMNS if name not in ("job_id", "size")
}


def _whole(column: list[float] | list[int]) -> bool:
    """Every value a float with no fraction and a plus sign (-0.0 prints as "-0.000")."""
    try:
        return all(map(float.is_integer, column)) and (
            min(map(math.copysign, repeat(1.0, len(column)), column), default=1.0) > 0
        )
    except TypeError:  # ints (jobs built by hand): the general format
        return False


def _row_format(table: JobTable) -> str:
    """One %-format for all rows. A column of whole numbers is written "%d.000":
    the same text as "%.3f" at half the cost (issue 11: traces have whole-second
    times, and batch runs keep them whole)."""
    parts = []
    for name, column in zip(COLUMNS, table.columns(), strict=True):
        decimals = _DECIMALS.get(name)
        if decimals is None:
            parts.append("%s")
        elif _whole(column):
            parts.append("%d." + "0" * decimals)
        else:
            parts.append(f"%.{decimals}f")
    return ",".join(parts) + "\r\n"


def write_csv(path: Path, table: JobTable) -> None:
    """One row per job, :data:`COLUMNS` as the header (no field needs quoting)."""
    with path.open("w", newline="") as fh:
        fh.write(csv_text(table))


def csv_text(table: JobTable) -> str:
    """What :func:`write_csv` writes."""
    row = _row_format(table)
    head = ",".join(COLUMNS) + "\r\n"
    return head + "".join(map(row.__mod__, zip(*table.columns(), strict=True)))
