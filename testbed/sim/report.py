"""Text tables and plots for simulation runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.sim.metrics import RunSummary
from testbed.sim.results import SimResult

_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # header, attribute, format
    ("policy", "policy", "{}"),
    ("load", "load", "{:.2f}"),
    ("jobs", "completed", "{}"),
    ("rej", "rejected", "{}"),
    ("wait s", "mean_wait", "{:.1f}"),
    ("resp s", "mean_response", "{:.1f}"),
    ("slowdn", "mean_slowdown", "{:.2f}"),
    ("med sd", "median_slowdown", "{:.2f}"),
    ("bsld", "mean_bounded_slowdown", "{:.2f}"),
    ("util", "utilization", "{:.3f}"),
    ("makespan s", "makespan", "{:.0f}"),
    ("in sys", "mean_jobs_in_system", "{:.1f}"),
    ("match", "matching_success_rate", "{:.3f}"),
    ("sim s", "sim_seconds", "{:.2f}"),
    ("jobs/s", "jobs_per_second", "{:.0f}"),
)


def _cell(fmt: str, value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def table(summaries: Sequence[RunSummary]) -> str:
    """A fixed-width table, one row per run."""
    head = [h for h, _, _ in _COLUMNS]
    rows = [[_cell(f, getattr(s, a)) for _, a, f in _COLUMNS] for s in summaries]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class JobsSeries:
    """A run's jobs-in-system series (a :class:`SimResult` has the same three fields)."""

    policy: str
    series_t: Sequence[float]
    series_n: Sequence[float]


def plot_jobs_in_system(path: Path, results: Sequence[SimResult | JobsSeries]) -> None:
    """Jobs in the system over time, one line per run (Wiseman & Feitelson 2003 Fig. 11)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for res in results:
        t = list(res.series_t)
        n = list(res.series_n)
        if len(t) > 20000:  # plotting a million points teaches nothing; thin evenly
            step = len(t) // 20000 + 1
            t, n = t[::step], n[::step]
        ax.step(t, n, where="post", label=res.policy, linewidth=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("jobs in system")
    ax.set_title("Jobs in the system over time")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_slowdown_vs_load(path: Path, summaries: Sequence[RunSummary]) -> None:
    """Mean slowdown against offered load, one line per policy (Wiseman & Feitelson 2003 Fig.
    10)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_policy: dict[str, list[tuple[float, float]]] = {}
    for s in summaries:
        if s.load is not None:
            by_policy.setdefault(s.policy, []).append((s.load, s.mean_slowdown))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for policy, pts in by_policy.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=policy)
    ax.set_xlabel("offered load")
    ax.set_ylabel("mean slowdown")
    ax.set_yscale("log")
    ax.set_title("Slowdown vs load")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
