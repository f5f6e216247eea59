"""DHC under the appendix's assumptions (Feitelson & Rudolph 1996): a fluid simulation.

The quantum is taken as much shorter than the time between arrivals and ends, so
between two events every gang progresses at its run fraction, the share of a round
the controller tree gives it (controller/policies/dhc.py ``run_fractions``). Gangs
arrive with exponential interarrival times; execution times are exponential with
mean 1; gang sizes are uniform, harmonic or uniform over powers of two on 1..P. The
generated load is (mean size x mean execution time) / (P x mean interarrival).

Collected as the paper collects (§3.1, appendix): slowdown (response / execution)
per gang, its median; the distribution of run fractions (execution / response);
run fraction by gang size and by execution time; the load per PE (threads mapped
to it, time-averaged: Feitelson & Rudolph 1996 Table 1); fairness as the time-averaged ratio of the
largest to the smallest instantaneous run fraction while two or more gangs coexist
(Fig. 11); and the utilization (share of PE-time running a thread).

The first ``warmup`` share of the gangs is left out of the statistics.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from controller.policies.dhc import DhcConfig, DhcTree

DISTRIBUTIONS = ("uniform", "harmonic", "pow2")


def size_sampler(dist: str, pes: int, rng: random.Random) -> tuple[list[int], list[float]]:
    """Sizes and their probabilities for ``dist`` on 1..pes."""
    if dist == "uniform":
        sizes = list(range(1, pes + 1))
        w = [1.0] * pes
    elif dist == "harmonic":
        sizes = list(range(1, pes + 1))
        w = [1.0 / s for s in sizes]
    elif dist == "pow2":
        sizes = [1 << k for k in range(pes.bit_length())]
        w = [1.0] * len(sizes)
    else:
        raise ValueError(f"gang sizes: one of {', '.join(DISTRIBUTIONS)}, got {dist!r}")
    tot = sum(w)
    return sizes, [x / tot for x in w]


def mean_size(dist: str, pes: int) -> float:
    sizes, p = size_sampler(dist, pes, random.Random(0))
    return sum(s * q for s, q in zip(sizes, p, strict=True))


@dataclass
class DhcRun:
    """Figures of one run (see the module docstring)."""

    config: DhcConfig
    dist: str
    load: float
    gangs: int
    median_slowdown: float
    mean_slowdown: float
    utilization: float
    load_per_pe: float
    fairness: float
    rf_hist: list[float]  # 10 bins of run fraction, share of gangs
    rf_by_size: dict[int, float]  # level (ceil lg size) -> mean run fraction
    rf_by_exec: dict[str, float]  # execution-time bucket -> mean run fraction
    saturated: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {
            "dist": self.dist,
            "load": self.load,
            "median_slowdown": self.median_slowdown,
            "mean_slowdown": self.mean_slowdown,
            "utilization": self.utilization,
            "load_per_pe": self.load_per_pe,
            "fairness": self.fairness,
            "saturated": self.saturated,
        }


def _rates(tree: DhcTree, size: dict[int, int]) -> tuple[dict[int, float], float]:
    """Each gang's share of the round (its slots' lengths added in the round's order) and
    the PE-shares busy (= sum(pe_busy(round)), added in the same order, without a per-PE
    pass: P = 4096). ``size`` holds the sizes of the tree's gangs."""
    rates = dict.fromkeys(tree.gangs, 0.0)
    busy = 0.0
    for _, _, g, _, length in tree.raw_round():  # sorted as round() sorts its slots
        rates[g] += length
        busy += length * size[g]
    return rates, busy


def simulate(
    config: DhcConfig,
    dist: str = "uniform",
    load: float = 0.5,
    gangs: int = 5000,
    seed: int = 1,
    warmup: float = 0.1,
    max_in_system: int = 400,
) -> DhcRun:
    """Run ``gangs`` arrivals through a DHC tree; stops early (``saturated``) when
    more than ``max_in_system`` gangs are in the system at once."""
    rng = random.Random(seed)
    tree = DhcTree(config, rng=random.Random(seed + 1))
    sizes, probs = size_sampler(dist, config.pes, rng)
    cum = list(itertools.accumulate(probs))  # once, not per arrival (P = 4096)
    ia_mean = mean_size(dist, config.pes) / (config.pes * load)
    now = 0.0
    next_arrival = rng.expovariate(1 / ia_mean)
    arrivals = 0
    work: dict[int, float] = {}
    info: dict[int, tuple[float, float, int]] = {}  # id -> arrival, execution, size
    size: dict[int, int] = {}  # id -> size, of the gangs in the tree
    done: list[tuple[int, float, float, int]] = []  # id, response, execution, size
    rates: dict[int, float] = {}
    busy_now = 0.0  # PE-shares running a thread under the current round
    busy_area = threads_area = fair_area = fair_time = 0.0
    saturated = False
    skip = int(gangs * warmup)
    t_start: float | None = None
    while arrivals < gangs or work:
        if rates:
            g_next, t_left = min(((g, work[g] / r) for g, r in rates.items() if r > 0),
                                 key=lambda x: x[1])  # fmt: skip
        else:
            g_next, t_left = -1, math.inf
        t_arr = next_arrival - now if arrivals < gangs else math.inf
        dt = min(t_left, t_arr)
        if t_start is not None:
            busy_area += dt * busy_now
            threads_area += dt * tree.sub_size.get(tree.root, 0)  # = sum(pe_load)
            if len(rates) >= 2:
                lo, hi = min(rates.values()), max(rates.values())
                fair_area += dt * (hi / lo if lo > 0 else 0.0)
                fair_time += dt
        for g, r in rates.items():
            work[g] -= r * dt
        now += dt
        if t_left <= t_arr:
            arr, ex, sz = info.pop(g_next)
            del size[g_next]
            del work[g_next]
            tree.remove(g_next)
            if g_next >= skip:
                done.append((g_next, now - arr, ex, sz))
        else:
            gid = arrivals
            arrivals += 1
            if gid == skip:
                t_start = now
            sz = rng.choices(sizes, cum_weights=cum)[0]  # = choices(sizes, probs)
            ex = rng.expovariate(1.0)
            tree.place(gid, sz)
            work[gid] = ex
            info[gid] = (now, ex, sz)
            size[gid] = sz
            next_arrival = now + rng.expovariate(1 / ia_mean)
            if len(work) > max_in_system:
                saturated = True
                break
        rates, busy_now = _rates(tree, size)
    span = (now - t_start) if t_start is not None else 0.0
    slow = [resp / ex for _, resp, ex, _ in done if ex > 0]
    rfs = [ex / resp for _, resp, ex, _ in done if resp > 0]
    hist = [0.0] * 10
    for r in rfs:
        hist[min(9, int(r * 10))] += 1
    by_size: dict[int, list[float]] = defaultdict(list)
    by_exec: dict[str, list[float]] = defaultdict(list)
    for _, resp, ex, sz in done:
        rf = ex / resp if resp > 0 else 1.0
        by_size[max(0, (sz - 1).bit_length())].append(rf)
        bucket = "<0.5" if ex < 0.5 else "0.5-1" if ex < 1 else "1-2" if ex < 2 else ">=2"
        by_exec[bucket].append(rf)
    return DhcRun(
        config=config,
        dist=dist,
        load=load,
        gangs=len(done),
        median_slowdown=statistics.median(slow) if slow else math.nan,
        mean_slowdown=statistics.fmean(slow) if slow else math.nan,
        utilization=busy_area / (span * config.pes) if span > 0 else math.nan,
        load_per_pe=threads_area / (span * config.pes) if span > 0 else math.nan,
        fairness=fair_area / fair_time if fair_time > 0 else math.nan,
        rf_hist=[h / len(rfs) for h in hist] if rfs else hist,
        rf_by_size={k: statistics.fmean(v) for k, v in sorted(by_size.items())},
        rf_by_exec={k: statistics.fmean(v) for k, v in by_exec.items()},
        saturated=saturated,
    )
