"""Freeze and thaw through the cgroup layer, v1 against cgroup2, on this host.

For k busy processes in one group, the time from the request until the kernel
confirms it (v1: freezer.state reads FROZEN; v2: cgroup.events says frozen 1,
awaited with poll(POLLPRI)), over many switches, for each cgroup version this
host has. Both run in the same invocation and the ratio v2/v1 is printed, as
this machine is shared and noisy. Root only; leaves nothing behind.

    sudo .venv/bin/python benchmarks/freeze_latency.py [--procs 1,8] [--switches 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.realtime import set_realtime  # noqa: E402
from common.cgroups import CgroupError, Cgroups, open_cgroups  # noqa: E402

BUSY = [sys.executable, "-c", "while True: pass"]
GROUP = "cosched/bench-freeze"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] if s else float("nan")


def measure(cg: Cgroups, procs: int, switches: int) -> tuple[list[float], list[float]]:
    cg.ensure_parent("cosched", ())
    cg.create(GROUP)
    children: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(procs):
            p = subprocess.Popen(BUSY)
            children.append(p)
            cg.add_pid(GROUP, p.pid)
        time.sleep(0.2)
        freeze, thaw = [], []
        for _ in range(switches):
            freeze.append(cg.freeze(GROUP) * 1e3)
            time.sleep(0.002)
            thaw.append(cg.thaw(GROUP) * 1e3)
            time.sleep(0.002)
        return freeze, thaw
    finally:
        with contextlib.suppress(CgroupError, OSError):
            cg.kill_all(GROUP)
        for p in children:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()
        with contextlib.suppress(CgroupError, OSError):
            cg.remove(GROUP)
        cg.remove_if_empty("cosched")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--procs", default="1,8", help="busy processes per group")
    ap.add_argument("--switches", type=int, default=200)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("freeze_latency: needs root (it writes cgroups)", file=sys.stderr)
        return 2
    # As the agent runs: SCHED_FIFO, so woken hogs do not delay the confirmation.
    fifo = set_realtime(10, "figures include run-queue waits")
    layers: dict[str, Cgroups] = {}
    for prefer in ("v1", "v2"):
        try:
            cg = open_cgroups(prefer, base="")
        except CgroupError as err:
            print(f"{prefer}: not on this host ({err})")
            continue
        if cg.layout.hierarchy("freezer") is not None and cg.layout.version("freezer") == int(
            prefer[1]
        ):
            layers[prefer] = cg
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"host: {os.cpu_count()} CPUs, kernel {os.uname().release}, load {load}")
    print(f"measuring thread: {'SCHED_FIFO 10' if fifo else 'SCHED_OTHER'} (children: SCHED_OTHER)")
    print(f"{args.switches} freeze+thaw switches per row; latency to kernel confirmation, ms")
    print(
        f"{'freezer':>7} {'procs':>5} | {'freeze p50':>10} {'p99':>7} | {'thaw p50':>8} {'p99':>7}"
    )
    rows: dict[tuple[str, int], tuple[float, float]] = {}
    for procs in (int(x) for x in args.procs.split(",")):
        for name, cg in layers.items():
            f, t = measure(cg, procs, args.switches)
            rows[(name, procs)] = (pct(f, 50), pct(t, 50))
            print(
                f"{name:>7} {procs:>5} | {pct(f, 50):>10.3f} {pct(f, 99):>7.3f} |"
                f" {pct(t, 50):>8.3f} {pct(t, 99):>7.3f}"
            )
        if ("v1", procs) in rows and ("v2", procs) in rows:
            (f1, t1), (f2, t2) = rows[("v1", procs)], rows[("v2", procs)]
            print(f"{'':>7} {procs:>5} | v2/v1 freeze p50 {f2 / f1:.2f}x, thaw p50 {t2 / t1:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
