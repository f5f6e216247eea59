"""Offered load of a workload, and rescaling a workload to a target load.

Offered load is the fraction of the machine the jobs would keep busy if they
ran as they arrive (Feitelson & Rudolph, Feitelson & Rudolph 1996, Appendix: average gang size
times average execution time over number of processors times average
inter-arrival time).  We use the form that does not assume size and run time
independent, as the comment of the Lublin reference program ``m_lublin99.c``
does::

    load = sum(size_i * runtime_i) / (nodes * span),   span = last submit - first submit

(``span / (n - 1)`` is the average inter-arrival time, so this equals the
appendix formula up to the factor ``n / (n - 1)`` and the size-runtime
correlation.)  A workload whose jobs all arrive at once has infinite load.

Load is changed the way Wiseman & Feitelson 2003 §4.2 does it ("the arrival times were further
multiplied by a constant factor"): every inter-arrival gap is multiplied by
the same factor, run times and sizes stay.  Submit times stay floats; they are
not rounded, so the target is met exactly (up to float rounding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from testbed.sim.job import SimJob

__all__ = ["offered_load", "scale_time", "scale_to_load", "span"]


def span(jobs: Sequence[SimJob]) -> float:
    """Time from the first to the last submission (0 for fewer than two jobs)."""
    if len(jobs) < 2:
        return 0.0
    submits = [j.submit for j in jobs]
    return max(submits) - min(submits)


def offered_load(jobs: Sequence[SimJob], nodes: int) -> float:
    """``sum(size * runtime) / (nodes * span)``; ``inf`` if the span is 0 and there is work."""
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    work = math.fsum(j.size * j.runtime for j in jobs)
    s = span(jobs)
    if s <= 0.0:
        return math.inf if work > 0 else 0.0
    return work / (nodes * s)


def scale_to_load(jobs: Sequence[SimJob], nodes: int, target_load: float) -> list[SimJob]:
    """Copies of ``jobs`` whose inter-arrival gaps are stretched so the offered load is
    ``target_load``; the first submission time is kept."""
    if not target_load > 0 or not math.isfinite(target_load):
        raise ValueError(f"target load must be a positive number, got {target_load}")
    current = offered_load(jobs, nodes)
    if current == 0.0 or math.isinf(current):
        raise ValueError(
            "cannot scale the load of a workload with no work or whose jobs all arrive at once"
        )
    factor = current / target_load
    first = min(j.submit for j in jobs)
    # copy_with: no checks to re-run (submit stays >= first >= 0), unlike dataclasses.replace
    return [j.copy_with(submit=first + (j.submit - first) * factor) for j in jobs]


def scale_time(jobs: Sequence[SimJob], factor: float) -> list[SimJob]:
    """Multiply every time of every job (submit, run time, estimate, barrier) by ``factor``.

    Wiseman & Feitelson 2003 §4.2 divided Lublin arrival and run times by 40 (``factor=1/40``)
    to fit experiments in hours; the offered load does not change.
    """
    if not factor > 0 or not math.isfinite(factor):
        raise ValueError(f"time scale factor must be a positive number, got {factor}")
    return [
        j.copy_with(
            submit=j.submit * factor,
            runtime=j.runtime * factor,
            estimate=j.estimate * factor,
            barrier=j.barrier * factor,
        )
        for j in jobs
    ]
