"""The Lublin & Feitelson rigid-job workload model.

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers:
modeling the characteristics of rigid jobs", J. Parallel Distrib. Comput.
63(11):1105-1122, 2003.  The structure and every numeric parameter below are
those of the authors' reference program ``m_lublin99.c`` as published with the
Parallel Workloads Archive (a copy lives in the public repository
renatolfc/parallelworkloads).  This module is an independent, vectorised
re-implementation (numpy), not a translation.

The model, per job type (batch or interactive):

* **Size.**  With probability ``serial`` the job is serial (1 node).  Otherwise
  ``x = log2(size)`` is drawn from a *two-stage uniform*: uniform on
  ``[low, med]`` with probability ``uprob``, else uniform on ``[med, hi]``.
  The same uniform draw that decided "serial" also decides "power of two": if
  it falls below ``serial + pow2`` the exponent ``x`` is rounded to an
  integer.  The size is ``2**x`` rounded to the nearest integer.
* **Run time.**  ``log(runtime)`` follows a *hyper-gamma*: gamma(a1, b1) with
  probability ``p``, gamma(a2, b2) otherwise, where ``p = pa * size + pb``
  clipped to [0, 1] (the reference makes ``p`` linear in the number of nodes,
  not its logarithm; we follow the reference).  Draws above 12 (e^12 s, about
  45 hours) are redrawn; the run time is ``exp`` of the draw, truncated to
  whole seconds.
* **Arrivals.**  ``log`` of the rush-hour inter-arrival time follows
  gamma(aarr * arar, barr); draws above 13 are redrawn.  The day is cut into
  48 half-hour buckets whose weights are the mass the gamma(anum, bnum) law
  gives to ``[i - 0.5, i + 0.5]`` for ``i = 11 .. 58`` (bucket ``(i-1) mod 48``),
  normalised to mean 1.  An inter-arrival time ``t`` (seconds) buys
  ``t / 1800`` "points"; the clock advances through buckets, each costing its
  weight in points, so busy buckets (high weight) pass slowly and arrivals
  crowd into them.  That makes arrival time a piecewise-linear, monotone
  function of the cumulative points, which is what lets us vectorise it: we
  draw all the points at once, take their cumulative sum and invert the
  cumulative-weight curve with ``searchsorted``.  The simulated day starts at
  midnight (bucket 0).  As in the reference, the clock is kept in whole
  seconds: every inter-arrival gap is truncated.
* **Types.**  Batch and interactive jobs have separate parameter sets and two
  independent arrival streams; the merged stream takes whichever type's next
  arrival is earlier (ties go to interactive, as in the reference).  In the
  single-type mode (the reference's ``INCLUDE_JOBS_TYPE = 0``) one stream with
  the model's "whole sample" parameters is used.

**Default:** both types (``interactive=True``), the reference's default.

**Scaling to the machine.**  The reference parameters describe a 128-node
machine (``hi = 7`` for batch jobs).  For ``nodes`` other than 128 we shift
``hi`` and ``med`` by ``log2(nodes / 128)`` and keep ``low``; when that puts
``med`` below ``low`` (machines under about 16 nodes) ``med`` becomes the
midpoint of ``[low, hi]``, and when ``hi`` drops below ``low`` the parallel
exponent is uniform on ``[min(low, hi), hi]``.  Sizes above ``nodes`` (power-
of-two rounding on a machine whose size is not a power of two) are clipped to
``nodes``.  The reference has no such rule (its comments only ask the user to
keep ``med`` in ``[hi - 3.5, hi - 1.5]``); this one is ours.

**Our other choices** (the reference is silent or does not apply):

* submit times are shifted so the first job arrives at t = 0 (the reference's
  first job arrives after one inter-arrival time);
* the user's estimate is the run time times ``estimate_factor`` (default 1.0:
  exact estimates, as the model has none);
* randomness comes from ``numpy.random.default_rng(seed)``: the same seed gives
  the same workload on the same numpy version; the jobs are not those of the
  C program (different generator), only the same distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from testbed.sim.job import SimJob

__all__ = [
    "BATCH",
    "BATCH_PARAMS",
    "INTERACTIVE",
    "INTERACTIVE_PARAMS",
    "REFERENCE_NODES",
    "SINGLE_TYPE_PARAMS",
    "LublinArrays",
    "LublinParams",
    "arrival_weights",
    "generate_lublin",
    "generate_lublin_arrays",
]

REFERENCE_NODES = 128
"""Machine size the published parameters describe (``hi = log2(128) = 7``)."""

INTERACTIVE = 0
BATCH = 1

_MAX_LOG_RUNTIME = 12.0  # reference: no run time above e^12 s (about two days)
_MAX_LOG_INTERARRIVAL = 13.0  # reference: no gap above e^13 s (about five days)
_BUCKETS = 48  # half-hour buckets in a day
_SECONDS_PER_BUCKET = 86400 // _BUCKETS
_DAY_SHIFT = 11  # the arrival-count gamma is fitted to buckets 11 .. 58


@dataclass(frozen=True, slots=True)
class LublinParams:
    """One job type's parameters (names as in the paper and the reference)."""

    serial: float  # probability of a serial job
    pow2: float  # probability of a power-of-two parallel job
    low: float  # two-stage uniform on log2(size): [low, med] w.p. uprob ...
    med: float
    hi: float  # ... else [med, hi]; hi = log2(machine) for batch at 128 nodes
    uprob: float
    a1: float  # hyper-gamma on log(runtime): gamma(a1, b1) w.p. p ...
    b1: float
    a2: float  # ... else gamma(a2, b2), p = pa * size + pb
    b2: float
    pa: float
    pb: float
    aarr: float  # log(inter-arrival) at rush hours ~ gamma(aarr * arar, barr)
    barr: float
    anum: float  # daily cycle: gamma(anum, bnum) over half-hour buckets
    bnum: float
    arar: float


# Values of m_lublin99.c (Parallel Workloads Archive), for a 128-node machine.
BATCH_PARAMS = LublinParams(
    serial=0.2927, pow2=0.6686, low=1.2, med=5.0, hi=7.0, uprob=0.875,
    a1=6.57, b1=0.823, a2=639.1, b2=0.0156, pa=-0.003, pb=0.6986,
    aarr=6.0415, barr=0.8531, anum=6.1271, bnum=5.2740, arar=1.0519,
)  # fmt: skip
INTERACTIVE_PARAMS = LublinParams(
    serial=0.1541, pow2=0.625, low=1.0, med=3.0, hi=5.5, uprob=0.705,
    a1=3.8351, b1=0.6605, a2=7.073, b2=0.6856, pa=-0.0118, pb=0.9156,
    aarr=6.5510, barr=0.6621, anum=8.9186, bnum=3.6680, arar=0.9797,
)  # fmt: skip
SINGLE_TYPE_PARAMS = LublinParams(
    serial=0.244, pow2=0.576, low=0.8, med=4.5, hi=7.0, uprob=0.86,
    a1=4.2, b1=0.94, a2=312.0, b2=0.03, pa=-0.0054, pb=0.78,
    aarr=10.2303, barr=0.4871, anum=8.1737, bnum=3.9631, arar=1.0225,
)  # fmt: skip


def _gamma_cdf(x: float, shape: float, scale: float) -> float:
    """Regularised lower incomplete gamma P(shape, x / scale) by its power series."""
    z = x / scale
    if z <= 0.0:
        return 0.0
    term = 1.0 / shape
    total = term
    k = 1
    while term > total * 1e-15 and k < 10_000:
        term *= z / (shape + k)
        total += term
        k += 1
    return min(1.0, total * math.exp(-z + shape * math.log(z) - math.lgamma(shape)))


def arrival_weights(anum: float, bnum: float) -> NDArray[np.float64]:
    """The 48 half-hour bucket weights of the daily cycle, mean 1 (see module doc)."""
    w = np.zeros(_BUCKETS)
    for i in range(_DAY_SHIFT, _DAY_SHIFT + _BUCKETS):
        mass = _gamma_cdf(i + 0.5, anum, bnum) - _gamma_cdf(i - 0.5, anum, bnum)
        w[(i - 1) % _BUCKETS] = mass
    normalised: NDArray[np.float64] = w / float(w.mean())
    return normalised


def _bounded_gamma(
    rng: np.random.Generator, shape: float, scale: float, n: int, bound: float
) -> NDArray[np.float64]:
    """``n`` gamma draws, each redrawn while above ``bound`` (reference rejection)."""
    out = rng.gamma(shape, scale, n)
    bad = np.flatnonzero(out > bound)
    while bad.size:
        out[bad] = rng.gamma(shape, scale, bad.size)
        bad = bad[out[bad] > bound]
    return out


def _arrivals(rng: np.random.Generator, p: LublinParams, n: int) -> NDArray[np.float64]:
    """Arrival times (whole seconds, from midnight) of ``n`` jobs of one stream."""
    weights = arrival_weights(p.anum, p.bnum)
    gaps = np.exp(_bounded_gamma(rng, p.aarr * p.arar, p.barr, n, _MAX_LOG_INTERARRIVAL))
    points = np.cumsum(gaps / _SECONDS_PER_BUCKET)
    # Cumulative weight at the end of each bucket over enough days.
    days = int(points[-1] // weights.sum()) + 2
    cum = np.concatenate(([0.0], np.cumsum(np.tile(weights, days))))
    k = np.searchsorted(cum, points, side="left") - 1  # bucket containing the point
    k = np.clip(k, 0, cum.size - 2)
    w = np.tile(weights, days)[k]
    exact = (k + (points - cum[k]) / w) * _SECONDS_PER_BUCKET
    # The reference keeps its clock in whole seconds, truncating every gap.
    steps = np.floor(np.diff(exact, prepend=0.0))
    return np.cumsum(np.maximum(steps, 0.0))


def _scaled(p: LublinParams, nodes: int) -> tuple[float, float, float]:
    """(low, med, hi) of the size law moved to a ``nodes``-node machine."""
    shift = math.log2(nodes) - math.log2(REFERENCE_NODES)
    low, med, hi = p.low, p.med + shift, p.hi + shift
    if med < low:
        med = (low + hi) / 2.0
    if hi < low:
        low = med = hi
    return low, med, hi


def _sizes(rng: np.random.Generator, p: LublinParams, nodes: int, n: int) -> NDArray[np.int64]:
    low, med, hi = _scaled(p, nodes)
    u = rng.random(n)
    first = rng.random(n) <= p.uprob
    v = rng.random(n)
    expo = np.where(first, low + v * (med - low), med + v * (hi - med))
    expo = np.where(u <= p.serial + p.pow2, np.floor(expo + 0.5), expo)
    size = np.floor(np.exp2(expo) + 0.5).astype(np.int64)
    size[u <= p.serial] = 1
    return np.clip(size, 1, nodes)


def _runtimes(
    rng: np.random.Generator, p: LublinParams, size: NDArray[np.int64]
) -> NDArray[np.float64]:
    n = size.size
    prob = np.clip(p.pa * size + p.pb, 0.0, 1.0)
    first = rng.random(n) <= prob
    logt = np.empty(n)
    n1 = int(first.sum())
    logt[first] = _bounded_gamma(rng, p.a1, p.b1, n1, _MAX_LOG_RUNTIME)
    logt[~first] = _bounded_gamma(rng, p.a2, p.b2, n - n1, _MAX_LOG_RUNTIME)
    return np.floor(np.exp(logt))


@dataclass(frozen=True, slots=True)
class LublinArrays:
    """A generated workload as columns (fast path; :func:`generate_lublin` wraps it)."""

    submit: NDArray[np.float64]
    size: NDArray[np.int64]
    runtime: NDArray[np.float64]
    job_type: NDArray[np.int64]  # BATCH (1) or INTERACTIVE (0), the SWF queue field


def generate_lublin_arrays(
    n_jobs: int, nodes: int = REFERENCE_NODES, seed: int = 0, *, interactive: bool = True
) -> LublinArrays:
    """Columns of ``n_jobs`` Lublin-model jobs for a ``nodes``-node machine.

    ``interactive=True`` (default, the reference's default) uses the batch and
    interactive types; ``False`` a single type with the "whole sample"
    parameters.  Submit times start at 0.
    """
    if n_jobs < 0:
        raise ValueError(f"n_jobs must be >= 0, got {n_jobs}")
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    rng = np.random.default_rng(seed)
    if n_jobs == 0:
        empty_f = np.zeros(0)
        empty_i = np.zeros(0, dtype=np.int64)
        return LublinArrays(empty_f, empty_i, empty_f.copy(), empty_i.copy())
    if interactive:
        t_int = _arrivals(rng, INTERACTIVE_PARAMS, n_jobs)
        t_bat = _arrivals(rng, BATCH_PARAMS, n_jobs)
        times = np.concatenate((t_int, t_bat))
        types = np.concatenate(
            (np.full(n_jobs, INTERACTIVE, dtype=np.int64), np.full(n_jobs, BATCH, dtype=np.int64))
        )
        # Stable sort on time with interactive first: ties go to interactive.
        order = np.argsort(times, kind="stable")[:n_jobs]
        submit, job_type = times[order], types[order]
        size = np.empty(n_jobs, dtype=np.int64)
        runtime = np.empty(n_jobs)
        for kind, params in ((INTERACTIVE, INTERACTIVE_PARAMS), (BATCH, BATCH_PARAMS)):
            sel = job_type == kind
            m = int(sel.sum())
            size[sel] = _sizes(rng, params, nodes, m)
            runtime[sel] = _runtimes(rng, params, size[sel])
    else:
        submit = _arrivals(rng, SINGLE_TYPE_PARAMS, n_jobs)
        job_type = np.full(n_jobs, INTERACTIVE, dtype=np.int64)
        size = _sizes(rng, SINGLE_TYPE_PARAMS, nodes, n_jobs)
        runtime = _runtimes(rng, SINGLE_TYPE_PARAMS, size)
    submit = submit - submit[0]
    return LublinArrays(submit=submit, size=size, runtime=runtime, job_type=job_type)


def generate_lublin(
    n_jobs: int,
    nodes: int = REFERENCE_NODES,
    seed: int = 0,
    *,
    interactive: bool = True,
    estimate_factor: float = 1.0,
) -> list[SimJob]:
    """``n_jobs`` compute-bound :class:`SimJob` from the Lublin-Feitelson model.

    Job ids are 1..n in submit order; ``estimate = runtime * estimate_factor``
    (default: exact).  See the module docstring for the model and our choices.
    """
    if estimate_factor <= 0:
        raise ValueError(f"estimate_factor must be > 0, got {estimate_factor}")
    cols = generate_lublin_arrays(n_jobs, nodes, seed, interactive=interactive)
    submits = cols.submit.tolist()
    sizes = cols.size.tolist()
    runtimes = cols.runtime.tolist()
    estimates = (cols.runtime * estimate_factor).tolist()
    return [
        SimJob(job_id=i + 1, submit=s, size=n, runtime=r, estimate=e)
        for i, (s, n, r, e) in enumerate(zip(submits, sizes, runtimes, estimates, strict=True))
    ]
