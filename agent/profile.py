"""A debug switch: profile the agent's loop thread between two SIGUSR2 (issue 32 item 2).

The first SIGUSR2 starts a :mod:`cProfile` profile of the thread the signal is handled
on (the main thread: the selectors loop, agent/daemon.py); the next one stops it and
writes ``profile-<pid>-<n>.pstats`` into the agent's run directory, logging the path.
A signal rather than a flag or an environment variable so that a running cluster's
agents can be profiled around one measured stretch and nothing else, with nothing to
restart (benchmarks/agent_boundary_cost.py reads the files). cProfile times every
Python call, so a profiled agent is slower than an unprofiled one: the profile says
where the loop's time goes, not how much there is (the benchmark measures that apart).
"""

from __future__ import annotations

import cProfile
import logging
import os
import pstats
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger("agent")


class LoopProfile:
    """Toggled by :meth:`toggle` (the SIGUSR2 handler); ``out_dir()`` where files go."""

    def __init__(self, out_dir: Callable[[], Path]) -> None:
        self.out_dir = out_dir
        self.prof: cProfile.Profile | None = None
        self.written: list[Path] = []

    def toggle(self, signum: int = 0, frame: FrameType | None = None) -> None:
        if self.prof is None:
            self.prof = cProfile.Profile()
            self.prof.enable()
            log.warning("profiling the agent's loop until the next SIGUSR2")
            return
        self.prof.disable()
        path = self.out_dir() / f"profile-{os.getpid()}-{len(self.written) + 1}.pstats"
        try:
            self.prof.dump_stats(str(path))
        except OSError as e:
            log.warning("cannot write the loop's profile to %s: %s", path, e)
        else:
            self.written.append(path)
            log.warning("loop profile written to %s", path)
        self.prof = None

    def install(self) -> None:
        signal.signal(signal.SIGUSR2, self.toggle)


# ---- reading the profiles: a switch's parts (benchmarks/agent_boundary_cost.py) ----------
# Each function's own time goes to the nearest enclosing function that names a part,
# split over its callers in proportion to the time it spent under each (pstats keeps
# callers, not stacks); what no part encloses is the loop's own Python ("loop, rest").
# Waiting (the selector's poll, the plan's wait for its instant, the freeze
# confirmation's sleeps) is left out of the busy total. cProfile times every Python
# call, so Python-heavy parts look dearer than system calls: the split says where the
# time goes, not how much there is.

Func = tuple[str, int, str]

WAIT = "waiting (poll, plan's instant, confirmation sleeps)"
#: (file suffix, function name or "*") -> part; the nearest enclosing one wins
PARTS: list[tuple[str, str, str]] = [
    ("selectors.py", "select", WAIT),
    ("agent/plan.py", "wait_until", WAIT),
    # the freeze confirmation's backed-off sleeps (common/cgroups/driver.py ``_wait``)
    ("~", "<built-in method time.sleep>", WAIT),
    # the ack's send() on the node's veth: the kernel's TCP path to the controller, and,
    # timed by the wall clock, the controller's wake-up if it preempts the agent there
    ("~", "<method 'send' of '_socket.socket' objects>", "ack: socket send()"),
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
    "network accounting", "ack: encode + send", "ack: socket send()", "switch bookkeeping",
    "metrics", "logging", "loop housekeeping (reap, sweep, fail-safe)", REST,
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
