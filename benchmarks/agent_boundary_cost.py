"""Where an agent's loop spends its time per quantum boundary, from its SIGUSR2 profiles.

An agent's loop thread profiled between two SIGUSR2 (agent/profile.py) leaves a pstats
file; benchmarks/gang_quantum_loss.py ``--profile`` takes one per agent during a 10 ms
strict-gang run. This reads such files and splits the loop's time into the parts of a
switch (issue 32 item 2): each function's own time goes to the nearest enclosing
function that names a part (below), split over its callers in proportion to the time
it spent under each (pstats keeps callers, not stacks). What no part encloses is the
loop's own Python ("loop, rest"). Waiting (the selector's poll, the plan's wait for its
instant) is left out of the busy total.

cProfile times every Python call, so a profiled loop runs slower than an unprofiled
one and Python-heavy parts look dearer than system calls: the split says where the
time goes, the unprofiled agents' CPU in the same benchmark says how much there is.

    .venv/bin/python benchmarks/agent_boundary_cost.py profile-*.pstats
"""

from __future__ import annotations

import pstats
import sys
from collections.abc import Iterable
from typing import Any

Func = tuple[str, int, str]

WAIT = "waiting (poll, plan's instant)"
#: (file suffix, function name or "*") -> part; the nearest enclosing one wins
PARTS: list[tuple[str, str, str]] = [
    ("selectors.py", "select", WAIT),
    ("agent/plan.py", "wait_until", WAIT),
    ("agent/daemon.py", "_freeze", "freeze: write + confirm"),
    ("agent/daemon.py", "write_thaws", "thaw: write + confirm"),
    ("agent/daemon.py", "_thaw", "thaw: write + confirm"),
    ("agent/daemon.py", "_prepare_thaw", "thaw: write + confirm"),
    ("agent/daemon.py", "_confirm_thaw", "thaw: write + confirm"),
    ("agent/daemon.py", "_set_weights", "weight writes"),
    ("agent/daemon.py", "_cpu_deltas", "CPU accounting"),
    ("agent/daemon.py", "_io_deltas", "block I/O accounting"),
    ("agent/daemon.py", "_net_deltas", "network accounting"),
    ("agent/metrics.py", "*", "metrics"),
    ("prometheus_client/", "*", "metrics"),
    ("logging/__init__.py", "*", "logging"),
    ("agent/server.py", "send", "ack: encode + send"),
    ("agent/server.py", "send_event", "ack: encode + send"),
    ("agent/server.py", "ready", "frame: receive + decode"),
    ("agent/api.py", "dispatch", "plan receipt (dispatch)"),
    ("agent/daemon.py", "submit_plan", "plan receipt (dispatch)"),
    ("agent/daemon.py", "apply_now", "switch bookkeeping"),
    ("agent/daemon.py", "apply", "switch bookkeeping"),
    ("agent/daemon.py", "apply_at", "switch bookkeeping"),
    ("agent/daemon.py", "_finish", "switch bookkeeping"),
    ("agent/daemon.py", "_fire_due_plan", "switch bookkeeping"),
    ("agent/daemon.py", "reap", "loop housekeeping (reap, sweep, fail-safe)"),
    ("agent/server.py", "sweep", "loop housekeeping (reap, sweep, fail-safe)"),
    ("agent/failsafe.py", "*", "loop housekeeping (reap, sweep, fail-safe)"),
    ("agent/local.py", "*", "loop housekeeping (reap, sweep, fail-safe)"),
]
REST = "loop, rest"
ORDER = [
    "frame: receive + decode", "plan receipt (dispatch)", "freeze: write + confirm",
    "thaw: write + confirm", "weight writes", "CPU accounting", "block I/O accounting",
    "network accounting", "ack: encode + send", "switch bookkeeping", "metrics", "logging",
    "loop housekeeping (reap, sweep, fail-safe)", REST,
]  # fmt: skip


def part_of(f: Func) -> str | None:
    path, _, name = f
    for suffix, fn, part in PARTS:
        if (suffix in path or path.endswith(suffix)) and fn in ("*", name):
            return part
    return None


def breakdown(stats: dict[Func, Any]) -> tuple[dict[str, float], int]:
    """Seconds per part (WAIT included) and the boundaries (calls of ``Agent._finish``)."""
    memo: dict[Func, dict[str, float]] = {}

    def share(f: Func, seen: frozenset[Func]) -> dict[str, float]:
        """How ``f``'s own time divides over the parts enclosing it (fractions)."""
        part = part_of(f)
        if part is not None:
            return {part: 1.0}
        if f in memo:
            return memo[f]
        callers = stats[f][4] if f in stats else {}
        weights = {c: float(v[3]) for c, v in callers.items() if c not in seen}
        total = sum(weights.values())
        out: dict[str, float] = {}
        if total <= 0:
            out = {REST: 1.0}
        else:
            for c, w in weights.items():
                for p, x in share(c, seen | {f}).items():
                    out[p] = out.get(p, 0.0) + x * w / total
        memo[f] = out
        return out

    parts: dict[str, float] = {}
    for f, (_, _, tt, _, _) in stats.items():
        for p, x in share(f, frozenset()).items():
            parts[p] = parts.get(p, 0.0) + tt * x
    finishes = sum(
        int(v[1]) for f, v in stats.items() if f[2] == "_finish" and f[0].endswith("daemon.py")
    )
    return parts, finishes


def load(paths: Iterable[str]) -> dict[Func, Any]:
    st = pstats.Stats(*paths)
    return st.stats  # type: ignore[attr-defined,no-any-return]


def report(parts: dict[str, float], boundaries: int, label: str = "") -> list[str]:
    busy = sum(v for k, v in parts.items() if k != WAIT)
    n = max(1, boundaries)
    lines = [f"{label}{boundaries} boundaries (applies), loop busy {busy * 1e6 / n:.0f} us "
             f"per boundary under the profiler"]  # fmt: skip
    lines.append(f"  {'part':44} {'us/boundary':>11} {'share':>7}")
    for p in ORDER:
        v = parts.get(p, 0.0)
        lines.append(f"  {p:44} {v * 1e6 / n:11.1f} {v / busy * 100 if busy else 0:6.1f}%")
    lines.append(f"  {'(' + WAIT + ', not counted)':44} {parts.get(WAIT, 0.0) * 1e6 / n:11.1f}")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print("agent_boundary_cost: give one or more .pstats files (agent/profile.py)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        stats = load(argv)
    except (OSError, TypeError, ValueError, EOFError) as e:
        print(f"agent_boundary_cost: cannot read {' '.join(argv)}: {e}", file=sys.stderr)
        return 2
    parts, n = breakdown(stats)
    print("\n".join(report(parts, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
