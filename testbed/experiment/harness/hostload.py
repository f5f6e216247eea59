"""Was the host quiet? CPU used outside the experiment while it measured.

A live measurement on a shared 2-core host is only as good as the host's
quiet: a foreign process on one core halves what a node with a dedicated
core can run. Every run therefore records the CPU the host spent *outside*
the experiment over the run:

    other = host busy time (/proc/stat, all CPUs)
            - CPU of the cluster's cgroup (jobs and agents: ``cosched/``)
            - CPU of this process and of its waited-for children (the controller)

divided by the run's wall time, in cores. It is reported beside the figures
(report.md, results.json) and ``cosched calibrate`` refuses to start a
measurement until the host has been quiet for a moment (:func:`wait_quiet`).
The kernel's own work for the jobs (softirqs of the emulated links) is busy
time in no cgroup, so a quiet run still reads a few hundredths of a core.
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


@dataclass(frozen=True)
class CpuSample:
    """One reading of the host's and the experiment's CPU counters (seconds)."""

    wall: float
    host_busy: float
    mine: float
    cluster: float


def host_busy_seconds(stat_text: str | None = None) -> float:
    """Busy CPU seconds of all CPUs since boot: /proc/stat's ``cpu`` line less idle and iowait."""
    if stat_text is None:
        with open("/proc/stat") as f:
            stat_text = f.readline()
    fields = stat_text.split()
    if not fields or fields[0] != "cpu":
        raise ValueError("not a /proc/stat cpu line")
    ticks = [int(x) for x in fields[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice; guest time
    # is already counted in user, so only the first eight are summed.
    busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
    return busy / _TICK


def own_seconds() -> float:
    """CPU of this process and of the children it has waited for."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def sample(cluster_cpu: Callable[[], float] | None = None) -> CpuSample:
    """Read the counters now; ``cluster_cpu`` gives the cluster cgroup's CPU seconds."""
    return CpuSample(
        wall=time.monotonic(),
        host_busy=host_busy_seconds(),
        mine=own_seconds(),
        cluster=cluster_cpu() if cluster_cpu is not None else 0.0,
    )


def other_cores(before: CpuSample, after: CpuSample) -> float | None:
    """Cores the host spent outside the experiment between two samples."""
    wall = after.wall - before.wall
    if wall <= 0:
        return None
    other = (
        (after.host_busy - before.host_busy)
        - (after.mine - before.mine)
        - (after.cluster - before.cluster)
    )
    return max(0.0, other / wall)


def cluster_cpu_reader(state: object) -> Callable[[], float] | None:
    """A reader of the ``cosched/`` cgroup's CPU seconds for a cluster's state, or None."""
    from common.cgroups import CgroupError, Cgroups, Layout, base_join
    from testbed.cluster.names import CGROUP_ROOT

    layout_doc = getattr(state, "cgroup_layout", None)
    if not layout_doc:
        return None
    try:
        layout = Layout.from_dict(layout_doc)
        cg = Cgroups(layout)
        path = base_join(layout.base, CGROUP_ROOT)
        cg.cpu_usage_ns(path)
    except (CgroupError, OSError, KeyError, ValueError, TypeError):
        return None

    def read() -> float:
        try:
            return cg.cpu_usage_ns(path) / 1e9
        except (CgroupError, OSError):
            return 0.0

    return read


def wait_quiet(
    limit: float = 0.15,
    window: float = 2.0,
    timeout: float = 600.0,
    *,
    cluster_cpu: Callable[[], float] | None = None,
    say: Callable[[str], None] | None = None,
) -> float:
    """Wait until the host's CPU outside the experiment stays below ``limit`` cores
    for ``window`` seconds; returns the last reading (it may still exceed the limit
    when ``timeout`` ran out, which the caller records)."""
    deadline = time.monotonic() + timeout
    told = False
    while True:
        a = sample(cluster_cpu)
        time.sleep(window)
        load = other_cores(a, sample(cluster_cpu)) or 0.0
        if load <= limit or time.monotonic() >= deadline:
            return load
        if say is not None and not told:
            say(f"    waiting for a quiet host ({load:.2f} cores busy outside the cluster)")
            told = True


def host_record() -> dict[str, Any]:
    """Where and with what a measurement ran: date, kernel, cores, cosched's commit and
    whether the working tree differed from it (other work in progress shares the tree)."""
    repo = str(Path(__file__).resolve().parents[3])

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", repo, *args], capture_output=True, text=True, check=False
            )
        except OSError:
            return ""
        return done.stdout.strip()

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kernel": platform.release(),
        "cores": len(os.sched_getaffinity(0)),
        "cosched_commit": git("rev-parse", "HEAD") or "unknown",
        "working_tree_modified": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
