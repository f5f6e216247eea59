"""What a receive's waiting action does to the utilization paired gang sees (pure).

Wiseman & Feitelson 2003 §5: busy waiting "may mask I/O activity and make it look like
CPU activity". A rank that waits W for each message uses, per receive,

* ``block``: none of W (it sleeps in poll());
* ``spin``: all of W;
* ``spinblock`` with spin time s: min(W, s), then it sleeps.

So with the CPU a rank uses outside its waits, C per second of wall, and λ receives per
second, its utilization under spin-block is

    u(s) = C + λ · E[min(W, s)]                              (for s = 0: u_block = C)

which is the brief's (compute + E[min(W, s)]) / (compute + E[W]) per receive, with the
wall time per receive (compute + E[W]) as 1 / λ. Paired gang (§2.4) runs a job beside a
partner of utilization y only if x + y + m < 100 %, so pairing returns below the spin
time s* at which u(s*) = 1 − y − m. W's distribution comes from the message library's
report (apps/mp/stats.py: every percentile of the MD samples, ``md_quantiles_us``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

ACTIONS = ("block", "spin", "spinblock")


@dataclass(frozen=True)
class WaitAction:
    """A receive's waiting action as the spec names it: block, spin or spinblock:<µs>."""

    recv: str
    spin_us: float = 0.0  # spinblock only

    @property
    def label(self) -> str:
        return f"spinblock:{self.spin_us:g}" if self.recv == "spinblock" else self.recv

    @property
    def spin_time_us(self) -> float:
        """How long a wait spins: 0 (block), the spin time, or inf (spin)."""
        if self.recv == "block":
            return 0.0
        if self.recv == "spin":
            return math.inf
        return self.spin_us

    def argv(self) -> list[str]:
        """The synthetic program's flags for it."""
        args = ["--wait", self.recv]
        if self.recv == "spinblock":
            args += ["--spin-us", f"{self.spin_us:g}"]
        return args


def parse_action(text: str) -> WaitAction:
    """``block``, ``spin`` or ``spinblock:<µs>``; ValueError with what is valid."""
    if text in ("block", "spin"):
        return WaitAction(text)
    name, sep, value = text.partition(":")
    if name == "spinblock" and sep:
        try:
            us = float(value)
        except ValueError:
            us = -1.0
        if 0 <= us <= 1e7:
            return WaitAction("spinblock", us)
    raise ValueError(f"waiting action {text!r}: block, spin or spinblock:<µs in 0..1e7>")


def truncated_mean_us(quantiles: Sequence[float], s_us: float) -> float:
    """E[min(W, s)] (µs) from W's percentiles 0, 1, ..., 100 (equally spaced; any count ≥ 2):
    the trapezoid rule over the quantile function, each value capped at s."""
    if len(quantiles) < 2:
        return 0.0
    capped = [min(q, s_us) for q in quantiles]
    n = len(capped) - 1
    return sum((a + b) / 2 for a, b in itertools.pairwise(capped)) / n


@dataclass(frozen=True)
class RankWaits:
    """One rank's waits, from its report in a run where it never shared its core."""

    cpu_ratio: float  # CPU / wall (under block: C)
    receives_per_s: float  # λ
    quantiles_us: tuple[float, ...]  # W at every percentile

    def utilization(self, s_us: float, base: float | None = None) -> float:
        """u(s) = C + λ · E[min(W, s)]; ``base`` is C when this rank's own ratio is not it."""
        c = self.cpu_ratio if base is None else base
        return min(1.0, c + self.receives_per_s * truncated_mean_us(self.quantiles_us, s_us) / 1e6)


def predicted_utilization(ranks: Sequence[RankWaits], s_us: float) -> float:
    """The job's utilization as the agents sum it (CPU used / CPU offered over its nodes,
    equal offers): the ranks' mean."""
    return sum(r.utilization(s_us) for r in ranks) / len(ranks) if ranks else 0.0


def threshold(partner_utilization: float, margin: float) -> float:
    """The largest utilization that still pairs beside the partner (§2.4)."""
    return 1.0 - partner_utilization - margin


def predicted_crossing_us(ranks: Sequence[RankWaits], limit: float) -> float | None:
    """The spin time (µs) at which u(s) reaches ``limit``: pairing holds below it.

    None: even blocking reads at or above the limit (never pairs); inf: even spinning reads
    below it (always pairs). u is non-decreasing in s, so bisection finds it."""
    if not ranks or predicted_utilization(ranks, 0.0) >= limit:
        return None
    top = max(max(r.quantiles_us, default=0.0) for r in ranks)
    if predicted_utilization(ranks, top) < limit:
        return math.inf
    lo, hi = 0.0, top
    for _ in range(60):
        mid = (lo + hi) / 2
        if predicted_utilization(ranks, mid) < limit:
            lo = mid
        else:
            hi = mid
    return hi


def measured_crossing(
    points: Sequence[tuple[float, float]], reference: float, share: float = 0.5
) -> tuple[float, float] | None:
    """Where pairing stops along a spin-time sweep: ``points`` are (spin time µs, matching
    rate); a point pairs if its rate is at least ``share`` of ``reference`` (block's).
    Returns (the longest spin time below the first that does not pair, that first one);
    None if every point pairs or none does below it (no crossing inside the sweep)."""
    pts = sorted(points)
    if reference <= 0:
        return None
    no = [s for s, rate in pts if rate < share * reference]
    if not no:
        return None
    yes = [s for s, rate in pts if rate >= share * reference and s < no[0]]
    if not yes:
        return None
    return yes[-1], no[0]
