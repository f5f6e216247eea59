"""Synthetic job mixes and CPU/I-O profiles from Wiseman & Feitelson, *Paired
Gang Scheduling*, IEEE TPDS 2003 (Wiseman & Feitelson 2003).

(a) :func:`io_compute_mix` - the proof-of-concept mix of §4.1: mix ``i`` has
    ``i`` I/O-bound and ``4 - i`` compute-bound jobs, every job as wide as the
    cluster, all submitted at t = 0.
(b) :func:`apply_profile` - CPU profiles laid over any job list (e.g. Lublin
    jobs): ``"homogeneous"`` fine-grain jobs at 45 % CPU (§4.2.1),
    ``"heterogeneous"`` jobs with CPU uniform in [0, 1] (§4.2.2), ``"qcrd"``
    phased jobs (§4.2.3) and ``"compute"`` (cpu = 1, the default profile).
(c) :func:`qcrd_phases` - the QCRD phase structure (§4.2.3, after Rosti et al.
    [15]), as fractions of the run time, so it scales to each job's length
    (the paper "shrank the phases so the total time will be same as it is in
    the Lublin workload model").
(d) :func:`set_barrier` - barrier granularity, as a fixed interval or as a
    number of barriers per job.
(e) the ``"devices"`` profile (issue 31, N + 1 gangs; not in the paper): each job
    drawn compute-, disk- or network-bound with equal odds, shares in
    :data:`DEVICE_KINDS` (docs/nplus1.md says why these values).

Figures the paper gives, and the ones we had to choose (marked *choice*):

* §4.1 program (Fig. 6): ``N = 250`` iterations, each ending in a barrier, so
  a job passes 250 barriers: ``barrier = runtime / 250``.  The compute and
  I/O parameters were tuned so a compute barrier and an I/O barrier take about
  the same time, so both job kinds get the same interval.
* §4.1.2: I/O-bound jobs show "typically 0 percent" CPU ("they immediately
  perform an I/O operation whenever they run, and do not log any noticeable
  CPU time"), so ``io_cpu = 0.0``: the I/O jobs then tie exactly, which is
  what makes best-fit pick the last slot (75 % / 25 % with four I/O jobs).
  Compute-bound jobs: *choice* ``compute_cpu = 0.95`` - the paper notes that
  barrier communication "creates some I/O-like activity, even for
  compute-bound processes", and the I/O job of mix 1 was matched with every
  compute job, so 0 + u + m < 100 % held: u < 99 %.
* §4.1 run time: the paper reports rates (barriers per second), not run times.
  *Choice:* ``runtime = 600`` s by default; it only sets the time scale.
* §4.2.1: homogeneous jobs run ``N = 600 * sec`` iterations at about 45 % CPU,
  i.e. a barrier every 1/600 s: ``cpu = 0.45, barrier = 1/600``.
* §4.2.2: CPU uniform in [0, 1] "with the rest being used for barrier
  synchronizations", each job as fine-grained as possible.  The time spent in
  one barrier is then fixed; from §4.2.1 it is ``0.55 / 600`` s (55 % of a
  1/600 s iteration).  A job at utilization ``c`` spends ``c / (1 - c)`` times
  that computing between barriers, so its barrier interval is
  ``(0.55 / 600) / (1 - c)`` (*derived*), capped at the job's run time.
* §4.2.3 QCRD: 12 short I/O phases alternating with 12 longer CPU phases, then
  a relatively long final I/O phase.  *Choices:* each short I/O phase 1 % of
  the run time, the final I/O phase 10 %, the 12 CPU phases share the rest
  (6.5 % each); I/O phases at 5 % CPU, CPU phases at 95 %; the job starts with
  an I/O phase (reading its input).  QCRD jobs keep their barrier setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob, unchecked_phase

__all__ = [
    "DEVICE_KINDS",
    "HETEROGENEOUS_BARRIER_COST",
    "HOMOGENEOUS_BARRIER",
    "HOMOGENEOUS_CPU",
    "MIX_BARRIERS",
    "PROFILES",
    "CpuProfile",
    "apply_profile",
    "io_compute_mix",
    "qcrd_phases",
    "set_barrier",
]

CpuProfile = Literal["compute", "homogeneous", "heterogeneous", "qcrd", "devices"]
PROFILES: tuple[CpuProfile, ...] = ("compute", "homogeneous", "heterogeneous", "qcrd", "devices")

#: the three job kinds of the ``devices`` profile: kind -> (cpu, disk, net) shares of a
#: process's dedicated time. *Choice* (issue 31 gives none): I/O-bound jobs barely use
#: the CPU, as §4.1.2 observed ("typically 0 percent"; 4 % here), and use their device
#: 80 % of the time; compute jobs use the CPU 90 % (the rest barrier waits), so a group
#: of one of each needs 0.98 CPU and fits under §2.4's margin of 1 %.
DEVICE_KINDS: dict[str, tuple[float, float, float]] = {
    "compute": (0.90, 0.0, 0.0),
    "disk": (0.04, 0.80, 0.0),
    "net": (0.04, 0.0, 0.80),
}

MIX_BARRIERS = 250  # §4.1, Fig. 6: N = 250
HOMOGENEOUS_CPU = 0.45  # §4.2.1
HOMOGENEOUS_BARRIER = 1.0 / 600.0  # §4.2.1: N = 600 * sec
HETEROGENEOUS_BARRIER_COST = (1.0 - HOMOGENEOUS_CPU) * HOMOGENEOUS_BARRIER  # derived, see doc


def io_compute_mix(
    io_jobs: int,
    nodes: int,
    *,
    runtime: float = 600.0,
    io_cpu: float = 0.0,
    compute_cpu: float = 0.95,
    barriers: int = MIX_BARRIERS,
    first_id: int = 1,
) -> list[SimJob]:
    """Wiseman & Feitelson 2003 §4.1 mix ``io_jobs``: ``4 - io_jobs`` compute-bound jobs (ids
    first, the
    paper's lower slots) then ``io_jobs`` I/O-bound jobs, all ``nodes`` wide, at t = 0.

    Each job passes ``barriers`` barriers over ``runtime`` seconds; estimate = runtime.
    """
    if not 0 <= io_jobs <= 4:
        raise ValueError(f"the §4.1 mixes have 0..4 I/O-bound jobs, got {io_jobs}")
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    if runtime <= 0:
        raise ValueError(f"runtime must be > 0, got {runtime}")
    if barriers < 1:
        raise ValueError(f"barriers must be >= 1, got {barriers}")
    barrier = runtime / barriers
    kinds = [compute_cpu] * (4 - io_jobs) + [io_cpu] * io_jobs
    return [
        SimJob(
            job_id=first_id + k,
            submit=0.0,
            size=nodes,
            runtime=runtime,
            estimate=runtime,
            phases=(Phase(1.0, cpu),),
            barrier=barrier,
        )
        for k, cpu in enumerate(kinds)
    ]


def qcrd_phases(
    *,
    cycles: int = 12,
    io_fraction: float = 0.01,
    final_io_fraction: float = 0.10,
    io_cpu: float = 0.05,
    compute_cpu: float = 0.95,
) -> tuple[Phase, ...]:
    """QCRD-like profile (Wiseman & Feitelson 2003 §4.2.3): ``cycles`` x (short I/O, longer CPU),
    then
    a long final I/O phase; fractions of the run time (defaults: see module doc)."""
    if cycles < 1:
        raise ValueError(f"cycles must be >= 1, got {cycles}")
    cpu_fraction = (1.0 - cycles * io_fraction - final_io_fraction) / cycles
    if cpu_fraction <= 0 or io_fraction <= 0 or final_io_fraction <= 0:
        raise ValueError(
            "QCRD fractions must be positive and the I/O phases must leave room for CPU phases"
        )
    phases: list[Phase] = []
    for _ in range(cycles):
        phases.append(Phase(io_fraction, io_cpu))
        phases.append(Phase(cpu_fraction, compute_cpu))
    # Put the float rounding residue into the final phase so fractions sum to 1.
    phases.append(Phase(1.0 - sum(p.fraction for p in phases), io_cpu))
    return tuple(phases)


def apply_profile(jobs: Sequence[SimJob], profile: str, *, seed: int = 0) -> list[SimJob]:
    """Copies of ``jobs`` with a CPU/I-O profile (one of :data:`PROFILES`) and the
    barrier granularity that goes with it (module doc).  ``seed`` drives the
    heterogeneous draw (same seed, same utilizations).

    Jobs are immutable, so a job that already has the profile is returned as
    is (a trace's jobs are compute-bound from the start); the others are
    copied with :meth:`SimJob.copy_with`, which skips the checks
    ``dataclasses.replace`` re-ran for every job (issue 11: a tenth of a KTH
    run).  The profiles' phases are valid by construction.
    """
    if profile == "compute":
        return [j if j.phases is COMPUTE_BOUND else j.copy_with(phases=COMPUTE_BOUND) for j in jobs]
    if profile == "homogeneous":
        phases = (Phase(1.0, HOMOGENEOUS_CPU),)
        return [j.copy_with(phases=phases, barrier=HOMOGENEOUS_BARRIER) for j in jobs]
    if profile == "heterogeneous":
        # numpy here only: the other profiles and SWF runs do without it (start-up time)
        import numpy as np

        cpus = np.random.default_rng(seed).random(len(jobs)).tolist()
        out: list[SimJob] = []
        for j, c in zip(jobs, cpus, strict=True):
            interval = HETEROGENEOUS_BARRIER_COST / (1.0 - c)
            if j.runtime > 0:
                interval = min(interval, j.runtime)
            # c is in [0, 1): a valid utilization
            out.append(j.copy_with(phases=(unchecked_phase(1.0, c),), barrier=interval))
        return out
    if profile == "qcrd":
        qp = qcrd_phases()
        return [j.copy_with(phases=qp) for j in jobs]
    if profile == "devices":
        import numpy as np

        kinds = [(unchecked_phase(1.0, c, d, w),) for c, d, w in DEVICE_KINDS.values()]
        draws = np.random.default_rng(seed).integers(0, len(kinds), len(jobs)).tolist()
        return [j.copy_with(phases=kinds[k]) for j, k in zip(jobs, draws, strict=True)]
    raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")


def set_barrier(
    jobs: Sequence[SimJob], *, interval: float | None = None, count: int | None = None
) -> list[SimJob]:
    """Copies of ``jobs`` with barrier granularity set: either a fixed ``interval``
    (seconds of dedicated execution between barriers, 0 = none) or ``count``
    barriers per job (``interval = runtime / count``)."""
    if (interval is None) == (count is None):
        raise ValueError("give exactly one of interval= or count=")
    if interval is not None:
        if interval < 0:
            raise ValueError(f"barrier interval must be >= 0, got {interval}")
        return [j.copy_with(barrier=interval) for j in jobs]
    assert count is not None
    if count < 1:
        raise ValueError(f"barrier count must be >= 1, got {count}")
    return [j.copy_with(barrier=j.runtime / count) for j in jobs]
