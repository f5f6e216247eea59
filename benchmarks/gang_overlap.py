"""Do two jobs run at once on a node under strict gang? Raw freezer reads, sampled.

Brings up the 2-node cluster of tests/integration/test_controller_live.py (a core per
node), runs the real controller (strict gang, ``--quantum`` s, time-triggered with its
default lead) over three busy jobs (two of 2 ranks, one of 1), and reads every job
group's freezer state about every 2 ms for ``--seconds``: ``cgroup.events``' frozen and
``cgroup.freeze`` on cgroup2 (``freezer.state`` on v1). A job is THAWED when neither is
set, FREEZING when asked but not yet frozen. Printed: samples, samples with two jobs
THAWED on a node, and *violations*: such a pair in two consecutive samples, which is
what the live tests assert never happens; then the agents' SCHED_FIFO line and the
controller's freeze-confirmation and lateness percentiles.

Which code runs is the repository this file is in (the agents run its modules), so two
checkouts give an A/B comparison. Needs root and the host lock; on a v2-only host:

    flock /work/host.lock .venv/bin/python benchmarks/gang_overlap.py
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def read_state(version: int, d: str) -> str:
    """THAWED, FREEZING or FROZEN, read as the live tests' sampler reads it."""
    if version == 1:
        with open(f"{d}/freezer.state", encoding="ascii") as f:
            return f.read().strip()
    with open(f"{d}/cgroup.events", encoding="ascii") as f:
        ev = dict(line.split() for line in f.read().splitlines() if line)
    with open(f"{d}/cgroup.freeze", encoding="ascii") as f:
        asked = f.read().strip() == "1"
    return "FROZEN" if ev.get("frozen") == "1" else "FREEZING" if asked else "THAWED"


def sample(version: int, mount: str, seconds: float) -> tuple[int, int, int]:
    """(samples, samples with two THAWED on a node, violations)."""
    dirs = sorted(glob.glob(f"{mount}/cosched/n*/job-*"))
    prev: dict[str, set[str]] = {}
    n = pairs = violations = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        thawed: dict[str, set[str]] = {}
        for d in dirs:
            try:
                if read_state(version, d) == "THAWED":
                    thawed.setdefault(d.split("/")[-2], set()).add(d)
            except (OSError, ValueError):
                continue
        for node, jobs in thawed.items():
            if len(jobs) > 1:
                pairs += 1
                violations += len(prev.get(node, set()) & jobs) > 1
        prev = thawed
        n += 1
        time.sleep(0.002)
    return n, pairs, violations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--quantum", type=float, default=0.05)
    a = ap.parse_args()
    from tests.support.host import cgroups
    from tests.support.live import SPIN, Live

    with tempfile.TemporaryDirectory(prefix="gang-overlap-") as tmp:
        state = Path(tmp) / "state"
        os.environ["COSCHED_STATE_DIR"] = str(state)
        lv = Live(state, Path(tmp))
        try:
            lv.up()
            fz = cgroups().layout.controllers["freezer"]
            lv.start("gang", quantum=a.quantum)
            for name, size in (("a", 2), ("b", 2), ("c", 1)):
                lv.req("submit", spec={"size": size, "argv": SPIN, "name": name})
            time.sleep(0.5)
            n, pairs, violations = sample(fz.version, fz.mount, a.seconds)
            st = lv.req("status")
        finally:
            lv.stop()
            lv.down()
        fifo = [
            line.split(": ", 1)[-1]
            for log in sorted(state.glob("agent-*.log"))
            for line in log.read_text().splitlines()
            if "SCHED_FIFO" in line
        ]
    print(f"repo {REPO}; freezer v{fz.version} at {fz.mount}")
    print(f"samples {n}; with two jobs THAWED on a node {pairs}; violations {violations}")
    print(f"agents: {sorted(set(fifo))}")
    keys = ("quanta", "timed_quanta", "late_plans", "freeze_confirm_p50_s")
    keys += ("freeze_confirm_p99_s", "lateness_p50_s", "lateness_p99_s")
    print(json.dumps({k: st.get(k) for k in keys}))


if __name__ == "__main__":
    main()
