"""What the controller measures of its quanta: counters, skew windows, matching ratios.

The scheduler records each quantum's plan and round report here; the status
request reads the percentiles, and the exporter (controller/metrics.py) takes
what is new since its last scrape with :meth:`Telemetry.drain`. Skew is the
spread over the nodes of one quantum's apply instants (command skew) or thaw
instants (thaw skew); docs/cluster.md has the definitions and why they differ.
The windows are allocated once (controller/window.py). Matching ratios follow
Wiseman & Feitelson 2003 §4.1.2 (Fig. 7).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.policies.base import QuantumPlan
from controller.window import Window

SKEW_WINDOW = 10000


def command_skew_s(applied_ns: Mapping[str, int]) -> float | None:
    """Spread of the apply instants of one quantum over the nodes (None if < 2)."""
    if len(applied_ns) < 2:
        return None
    return (max(applied_ns.values()) - min(applied_ns.values())) / 1e9


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


@dataclass
class Counters:
    quanta: int = 0
    paired_quanta: int = 0
    planned_quanta: int = 0
    failed_commands: int = 0
    utilization: float = 0.0  # cluster CPU utilization in the last quantum (0..1)
    timed_quanta: int = 0  # quanta sent time-triggered (with an instant)
    late_plans: int = 0  # node plans whose instant had passed when the agent got them
    missed_boundaries: int = 0  # quantum boundaries skipped because the round ran past them


@dataclass
class Fresh:
    """Observations since the exporter's previous :meth:`Telemetry.drain`."""

    skews: list[float] = field(default_factory=list)
    thaw_skews: list[float] = field(default_factory=list)
    late_plans: int = 0


@dataclass
class Switches:
    """One round's switch figures (controller/quantum.py fills them from the acks)."""

    failed: int = 0  # nodes without an ack
    skew: float | None = None
    thaw_skew: float | None = None
    lateness: list[float] = field(default_factory=list)  # time-triggered acks only
    freeze_confirms: list[float] = field(default_factory=list)
    late: int = 0  # plans that reached their node after the instant
    utilization: float | None = None  # cluster CPU used / offered; None: nothing offered


class Telemetry:
    """Counters and fixed windows of the quanta run so far."""

    def __init__(self) -> None:
        self.counters = Counters()
        self.slot_runs: Counter[int] = Counter()
        self.skews = Window(SKEW_WINDOW)
        self.thaw_skews = Window(SKEW_WINDOW)
        self.lateness = Window(SKEW_WINDOW)  # per node and quantum
        self.freeze_confirms = Window(SKEW_WINDOW)
        # For the exporter; bounded, so a controller nobody scrapes (or one without
        # --metrics) keeps only the last window.
        self._new_skews: deque[float] = deque(maxlen=SKEW_WINDOW)
        self._new_thaw_skews: deque[float] = deque(maxlen=SKEW_WINDOW)
        self._new_late = 0

    # ---- recording ---------------------------------------------------------------
    def planned(self, plan: QuantumPlan | None) -> None:
        """A gang plan: count it, and its partner row (paired gang)."""
        if plan is not None and plan.slot is not None:
            self.counters.planned_quanta += 1
            if plan.partner is not None:
                self.counters.paired_quanta += 1
                self.slot_runs[plan.partner] += 1

    def switched(self, sw: Switches, *, timed: bool) -> None:
        """One quantum's round: its figures, whether it was sent time-triggered."""
        c = self.counters
        if timed:
            c.timed_quanta += 1
        c.failed_commands += sw.failed
        self.freeze_confirms.extend(sw.freeze_confirms)
        self.lateness.extend(sw.lateness)
        c.late_plans += sw.late
        self._new_late += sw.late
        if sw.skew is not None:
            self.skews.append(sw.skew)
            self._new_skews.append(sw.skew)
        if sw.thaw_skew is not None:
            self.thaw_skews.append(sw.thaw_skew)
            self._new_thaw_skews.append(sw.thaw_skew)
        if sw.utilization is not None:
            c.utilization = sw.utilization
        c.quanta += 1

    def drain(self) -> Fresh:
        """What was observed since the last call (the exporter's histograms and counter)."""
        out = Fresh(list(self._new_skews), list(self._new_thaw_skews), self._new_late)
        self._new_skews.clear()
        self._new_thaw_skews.clear()
        self._new_late = 0
        return out

    # ---- views -------------------------------------------------------------------
    def matching_success_ratio(self) -> float:
        c = self.counters
        return c.paired_quanta / c.planned_quanta if c.planned_quanta else 0.0

    def slot_matched_ratio(self) -> dict[int, float]:
        """Fraction of quanta in which each row was used as the partner (Wiseman & Feitelson 2003
        Fig. 7 bottom: "fraction of quanta in which jobs occupying different slots in the matrix
        were used for matching")."""
        total = self.counters.planned_quanta
        return {s: n / total for s, n in sorted(self.slot_runs.items())} if total else {}

    def skew_percentiles(self) -> dict[str, float | None]:
        v = list(self.skews)
        return {"p50": percentile(v, 50), "p99": percentile(v, 99), "max": max(v, default=None)}

    def switch_percentiles(self) -> dict[str, float | None]:
        """Thaw skew, lateness against the instant and freeze confirmation, p50/p99 (s)."""
        out: dict[str, float | None] = {}
        for name, window in (
            ("thaw_skew", self.thaw_skews),
            ("lateness", self.lateness),
            ("freeze_confirm", self.freeze_confirms),
        ):
            v = list(window)
            out[f"{name}_p50_s"] = percentile(v, 50)
            out[f"{name}_p99_s"] = percentile(v, 99)
        return out
