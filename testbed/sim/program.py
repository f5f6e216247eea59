"""The synthetic program's run time from N, G_comp and the barrier cost (Wiseman & Feitelson
2003 §4.1.1, Fig. 6, §4.2.1-4.2.2).

The paper's Lublin jobs were not "a job that takes ``sec`` seconds": each was the Fig. 6
program with ``N = 600 * sec`` barriers and one G_comp for all jobs, chosen so that the
compute part takes "slightly less time" than "the communication involved in a barrier
synchronization" and the CPU utilization is about 45 %. A job's real length is then
``N * (t_comp + b(n))``: its barrier cost ``b(n)`` grows with its size ``n`` (ParPar's
barrier: every process sends to process 0, which answers once all have arrived), so
wide jobs run longer than ``sec`` and use less of the CPU, and a one-process job has no
barrier at all and is compute-bound.

:class:`BarrierCost` is ``b(n)`` and the CPU a process spends in it, ``c(n)``, fitted
from measurements at several sizes (``cosched calibrate``): linear in ``n - 1``, the
messages process 0 handles one after another. :func:`realise` turns a nominal job
(``sec`` and a utilization ``u_ref`` at the reference size) into the program's job:

* ``t_comp`` from ``(t_comp + c_ref) / (t_comp + b_ref) = u_ref``, the paper's rule
  (apps/presets.py ``fine_compute_s`` does the same live);
* ``N = sec / (t_comp + b_ref)`` barriers: at the reference size the job takes ``sec``;
* run time ``N * (t_comp + b(n))``, utilization ``(t_comp + c(n)) / (t_comp + b(n))``,
  a barrier every ``t_comp + b(n)`` seconds.

Choices where the paper is silent (docs/paired-fidelity.md):

* **Reference size 2**: the barrier the paper timed is the smallest one, between two
  processes; ``reference_size`` takes another (the study shows 16 beside it).
* **One process**: no barrier (our program's one-rank barrier returns at once, as a
  gather to oneself would), so ``b(1) = c(1) = 0``.
* **Heterogeneous jobs** (§4.2.2) use the same rule with their own utilization: "for each
  degree of CPU utilization, we use the most fine-grain application possible", i.e.
  one barrier per compute part. A compute-bound job (``u_ref = 1``) has no barriers
  worth the name and keeps ``sec``.

Pure: no I/O. Terms switch off separately (``grow=False``: every parallel job pays the
reference barrier; :func:`realise` not called: ``runtime = sec``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from testbed.sim.job import COMPUTE_BOUND, SimJob, unchecked_phase

REFERENCE_SIZE = 2


@dataclass(frozen=True, slots=True)
class BarrierCost:
    """``b(n) = wall_base + wall_per_rank * (n - 1)`` seconds per barrier, ``c(n)`` likewise
    for the CPU a process spends in it; ``n = 1``: no barrier (0, 0)."""

    wall_base: float
    wall_per_rank: float
    cpu_base: float = 0.0
    cpu_per_rank: float = 0.0

    def __post_init__(self) -> None:
        for name in ("wall_base", "wall_per_rank", "cpu_base", "cpu_per_rank"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"barrier cost {name} must be finite")
        if self.wall(2) <= 0:
            raise ValueError(f"barrier cost at 2 processes must be > 0, got {self.wall(2)}")

    def wall(self, n: int) -> float:
        """Seconds one barrier of ``n`` processes takes (at least 0)."""
        if n <= 1:
            return 0.0
        return max(0.0, self.wall_base + self.wall_per_rank * (n - 1))

    def cpu(self, n: int) -> float:
        """CPU seconds a process spends in one barrier of ``n`` (at most the barrier's wall)."""
        if n <= 1:
            return 0.0
        return min(self.wall(n), max(0.0, self.cpu_base + self.cpu_per_rank * (n - 1)))

    @classmethod
    def fit(cls, points: Mapping[int, tuple[float, float]]) -> BarrierCost:
        """Least squares of wall and CPU against ``n - 1`` over ``{n: (wall, cpu)}``, n >= 2.

        One size gives a constant cost (no growth measured).
        """
        pts = sorted((n, w, c) for n, (w, c) in points.items() if n >= 2)
        if not pts:
            raise ValueError("a barrier cost needs a measurement at 2 or more processes")
        xs = [float(n - 1) for n, _, _ in pts]
        wall_b, wall_a = _line(xs, [w for _, w, _ in pts])
        cpu_b, cpu_a = _line(xs, [c for _, _, c in pts])
        return cls(wall_base=wall_b, wall_per_rank=wall_a, cpu_base=cpu_b, cpu_per_rank=cpu_a)


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line; slope 0 when the xs do not vary."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


@dataclass(frozen=True, slots=True)
class ProgramModel:
    """How a nominal job becomes the Fig. 6 program (module docstring)."""

    barrier: BarrierCost
    reference_size: int = REFERENCE_SIZE
    grow: bool = True  # False: every parallel job pays the reference size's barrier

    def __post_init__(self) -> None:
        if self.reference_size < 2:
            raise ValueError(f"reference size must be >= 2 processes, got {self.reference_size}")

    def costs(self, n: int) -> tuple[float, float]:
        """(b(n), c(n)) as this model charges them."""
        if n <= 1:
            return 0.0, 0.0
        m = n if self.grow else self.reference_size
        return self.barrier.wall(m), self.barrier.cpu(m)

    def compute_time(self, u_ref: float) -> float:
        """``t_comp`` for utilization ``u_ref`` at the reference size (inf for u_ref >= 1)."""
        if u_ref >= 1.0:
            return math.inf
        b, c = self.costs(self.reference_size)
        return max(0.0, (u_ref * b - c) / (1.0 - u_ref))

    def shape(self, u_ref: float, n: int) -> tuple[float, float, float]:
        """(run time per nominal second, utilization, barrier interval per nominal second)
        of a job of ``n`` processes whose nominal utilization is ``u_ref``."""
        t_comp = self.compute_time(u_ref)
        if math.isinf(t_comp):
            return 1.0, 1.0, 0.0
        b_ref, _ = self.costs(self.reference_size)
        b, c = self.costs(n)
        per_barrier = t_comp + b
        if per_barrier <= 0:  # no compute and no barrier: the program does nothing
            return 0.0, 1.0, 0.0
        iterations = 1.0 / (t_comp + b_ref)  # barriers per nominal second
        return iterations * per_barrier, (t_comp + c) / per_barrier, per_barrier


def realise(job: SimJob, model: ProgramModel) -> SimJob:
    """The program a nominal one-phase job stands for (module docstring); jobs with
    several phases (QCRD) are returned unchanged."""
    if len(job.phases) != 1:
        return job
    u_ref = job.phases[0].cpu
    factor, u, interval = model.shape(u_ref, job.size)
    runtime = job.runtime * factor
    phases = COMPUTE_BOUND if u >= 1.0 else (unchecked_phase(1.0, u),)
    return job.copy_with(
        runtime=runtime,
        phases=phases,
        barrier=min(interval, runtime) if interval > 0 else 0.0,
    )


def realise_all(jobs: Sequence[SimJob], model: ProgramModel) -> list[SimJob]:
    """:func:`realise` over a workload; the offered load was set before, on ``sec``."""
    return [realise(j, model) for j in jobs]
