"""Yu & Byun 2011's workloads WL1-WL6 as simulated job streams (§5.2, Tables 2-3).

``WL1`` … ``WL6`` (Table 3): the applications each mixes, every job an NPB
class-A kernel replayed from its recorded trace (testbed/sim/cdc/traces.py)
on 4, 9 or 16 processes (BT, SP) or 4, 8 or 16 (FT, IS, CG), the size drawn
uniformly "as per the NAS application requirements". Choices where §5.2 is
silent, recorded in docs/simulator.md:

* **Length.** "All applications have been adjusted … so they approximately
  take the same amount of time (66 - 73 sec) to complete, when executed
  individually on all 16-nodes": each application repeats its class-A run as
  many times as makes its 16-process job take ``job_seconds`` (69.5) alone
  on the 16 nodes; a job of fewer processes runs the same problem, so it
  takes longer (its ranks each have more of it).
* **Arrivals.** Exponential gaps with mean ``interarrival`` (heavy 40.75 s,
  light 70.27 s, §5.3), the first job at 0; ``at_once`` submits every job at
  0 (§5.4: "we simultaneously run 50 identical type of jobs").
* **Compression.** ``job_seconds`` below 69.5 scales the repetitions and the
  gaps alike (responses then scale by the same factor).

A spec is ``WL6``, ``WL6:jobs=100,load=heavy`` or ``WL5:jobs=50,at_once``;
an unknown workload, key or application without a trace is one line.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from testbed.sim.cdc.engine import CdcSim, SimJobSpec
from testbed.sim.cdc.platform import Platform
from testbed.sim.cdc.program import JobProgram, synthetic
from testbed.sim.cdc.traces import TABLE3_RANKS, TraceError, available, npb_program

#: Yu & Byun 2011 Table 3.
WORKLOADS: dict[str, tuple[str, ...]] = {
    "WL1": ("bt",),
    "WL2": ("sp",),
    "WL3": ("ft",),
    "WL4": ("is",),
    "WL5": ("cg",),
    "WL6": ("bt", "sp", "ft", "is", "cg"),
}
#: §5.3: the mean interarrival times of Fig. 7's heavy and light loads, s.
LOADS: dict[str, float] = {"heavy": 40.75, "light": 70.27}
PAPER_JOB_SECONDS = 69.5  # §5.2: "66 - 73 sec"


class WorkloadError(ValueError):
    """A workload spec the simulator cannot use (one line: the field and its valid values)."""


@dataclass(frozen=True)
class PaperWorkload:
    """One of Table 3's workloads as a stream (module docstring)."""

    name: str = "WL6"
    jobs: int = 100
    interarrival: float = LOADS["heavy"]
    at_once: bool = False
    job_seconds: float = PAPER_JOB_SECONDS

    @property
    def apps(self) -> tuple[str, ...]:
        return WORKLOADS[self.name]

    @property
    def scale(self) -> float:
        return self.job_seconds / PAPER_JOB_SECONDS

    def describe(self) -> str:
        arr = "all at 0" if self.at_once else f"mean interarrival {self.interarrival:g} s"
        return (
            f"{self.name} ({'+'.join(a.upper() for a in self.apps)}), {self.jobs} jobs, {arr}, "
            f"16-process jobs {self.job_seconds:g} s alone"
        )


def parse_workload(spec: str) -> PaperWorkload:
    name, _, rest = spec.partition(":")
    name = name.strip().upper()
    if name not in WORKLOADS:
        raise WorkloadError(
            f"workload {spec!r}: the CDC schemes run Yu & Byun 2011 Table 3's workloads "
            f"{', '.join(WORKLOADS)} (e.g. WL6:jobs=100,load=heavy)"
        )
    wl = PaperWorkload(name)
    for part in filter(None, (x.strip() for x in rest.split(","))):
        k, sep, v = part.partition("=")
        k = k.strip()
        try:
            if k == "at_once" and not sep:
                wl = replace(wl, at_once=True)
            elif k == "jobs":
                wl = replace(wl, jobs=int(v))
            elif k == "load":
                if v not in LOADS:
                    raise WorkloadError(
                        f"workload {spec!r}: load {v!r} unknown; valid loads: "
                        f"{', '.join(LOADS)} (or interarrival=SECONDS)"
                    )
                wl = replace(wl, interarrival=LOADS[v])
            elif k == "interarrival":
                wl = replace(wl, interarrival=float(v))
            elif k == "job_seconds":
                wl = replace(wl, job_seconds=float(v))
            else:
                raise WorkloadError(
                    f"workload {spec!r}: key {k!r} unknown; valid keys: jobs, load, "
                    "interarrival, job_seconds, at_once"
                )
        except ValueError as e:
            if isinstance(e, WorkloadError):
                raise
            raise WorkloadError(f"workload {spec!r}: {k}={v!r} is not a number") from None
    if wl.jobs < 1:
        raise WorkloadError(f"workload {spec!r}: jobs must be >= 1, got {wl.jobs}")
    if not wl.interarrival > 0 or not wl.job_seconds > 0:
        raise WorkloadError(f"workload {spec!r}: interarrival and job_seconds must be > 0 s")
    check_traces(wl.apps)
    return wl


def check_traces(apps: Sequence[str]) -> None:
    """Every application and Table 3 size has a recorded trace (else one line)."""
    have = available()
    for a in apps:
        if a not in have:
            raise WorkloadError(
                f"application {a!r} has no recorded trace; recorded: {', '.join(have) or 'none'} "
                "(python -m testbed.sim.cdc.traces record)"
            )
        missing = [n for n in TABLE3_RANKS[a] if n not in have[a]]
        if missing:
            raise WorkloadError(
                f"application {a!r} has no recorded trace on {missing} processes; recorded: "
                f"{', '.join(map(str, have[a]))}"
            )


def _alone_seconds(program: JobProgram, speeds: tuple[float, ...], platform: Platform) -> float:
    job = SimJobSpec(0, 0.0, program, program.label)
    return CdcSim("batch", 1, speeds, platform).run([job]).jobs[0].execution


@cache
def rep_seconds(app: str, speeds: tuple[float, ...], platform: Platform) -> float:
    """One class-A repetition of the 16-process job alone on ``speeds`` (the job's nodes are
    the machine's first 16), extrapolated from two short runs: prologue and epilogue once,
    the steady iteration NPB's count."""
    n = 16
    full = npb_program(app, n).info["npb_iterations"]
    a, b = 2, 6
    ta = _alone_seconds(npb_program(app, n, a), speeds[:n], platform)
    tb = _alone_seconds(npb_program(app, n, b), speeds[:n], platform)
    per = (tb - ta) / (b - a)
    return ta + per * (int(full) - a)


def reps_for(app: str, speeds: tuple[float, ...], platform: Platform, job_seconds: float) -> int:
    """Repetitions that make the 16-process job take about ``job_seconds`` alone."""
    if len(speeds) < 16:
        raise WorkloadError(
            f"Yu & Byun's workloads need 16 nodes (jobs of up to 16); got {len(speeds)}"
        )
    return max(1, round(job_seconds / rep_seconds(app, speeds, platform)))


@dataclass(frozen=True)
class StreamEntry:
    job_id: int
    submit: float
    app: str
    size: int
    reps: int


def draw(wl: PaperWorkload, seed: int, reps: dict[str, int]) -> list[StreamEntry]:
    """The jobs of one stream: gaps, applications and sizes from ``seed`` (the same draws
    whatever the load, which only stretches the gaps)."""
    rng = random.Random(seed)
    out: list[StreamEntry] = []
    t = 0.0
    for i in range(wl.jobs):
        gap = rng.expovariate(1.0)
        if i and not wl.at_once:
            t += gap * wl.interarrival * wl.scale
        app = wl.apps[rng.randrange(len(wl.apps))]
        sizes = TABLE3_RANKS[app]
        size = sizes[rng.randrange(len(sizes))]
        out.append(StreamEntry(i, t, app, size, reps[app]))
    return out


def stream(
    wl: PaperWorkload, seed: int, speeds: Sequence[float], platform: Platform
) -> list[SimJobSpec]:
    """The simulator's jobs for ``wl`` drawn from ``seed``."""
    sp = tuple(speeds)
    try:
        reps = {a: reps_for(a, sp, platform, wl.job_seconds) for a in wl.apps}
    except TraceError as e:
        raise WorkloadError(str(e)) from None
    out = []
    for ent in draw(wl, seed, reps):
        if ent.size > len(sp):
            raise WorkloadError(f"{wl.name} has {ent.size}-process jobs; the machine has {len(sp)}")
        prog = npb_program(ent.app, ent.size).repeated(ent.reps)
        out.append(
            SimJobSpec(ent.job_id, ent.submit, prog, f"{ent.job_id:03d}-{ent.app}{ent.size}")
        )
    return out


def offered_load(entries: Sequence[StreamEntry], alone: dict[tuple[str, int], float], nodes: int,
                 span: float) -> float:  # fmt: skip
    """Node-seconds the jobs ask for alone ÷ node-seconds the machine offers over ``span``."""
    if span <= 0 or math.isinf(span):
        return math.nan
    return sum(alone[(e.app, e.size)] * e.size for e in entries) / (nodes * span)


def synthetic_stream(entries: Sequence[Any]) -> list[SimJobSpec]:
    """A live job stream's jobs (testbed/experiment/cdc/stream.py ``StreamJob``: the synthetic
    program's parameters and arrival times) as the simulator's, for running the same stream
    live and simulated."""
    out = []
    for j in entries:
        m = j.message
        rounds = 0 if m.comm == "none" else int(j.comm_rounds)
        prog = synthetic(j.size, j.compute_ms / 1e3, m.comm, int(m.nbytes), rounds, j.iterations)
        out.append(SimJobSpec(int(j.index), float(j.arrival_s), prog, f"{j.index:03d}-{j.app}"))
    return out
