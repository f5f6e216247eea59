"""Cross-node quantum command skew of the live controller (prints figures; needs root).

Brings up a local cluster of N nodes, starts ``python -m controller`` with
strict gang at a 10 ms quantum, submits two full-width busy jobs (so every
quantum freezes one gang and thaws the other on every node), lets it run,
and prints the skew percentiles the controller measured from the agents'
``applied_monotonic_ns`` (one host: one CLOCK_MONOTONIC).

    sudo .venv/bin/python benchmarks/quantum_skew.py --nodes 2 4 --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from controller.client import ControllerClient
from testbed.cluster import cluster as cluster_mod
from testbed.cluster.profiles import parse_profile

SPIN = ["python3", "-c", "while True: pass"]


def run(nodes: int, seconds: float, quantum: float) -> dict[str, float | None]:
    tmp = Path(tempfile.mkdtemp(prefix="cosched-skew-"))
    env = cluster_mod.Env(state_dir=str(tmp / "state"))
    import os

    cpus = len(os.sched_getaffinity(0)) / nodes
    cluster_mod.up(
        cluster_mod.ClusterConfig(nodes=nodes, profile=parse_profile("gige"), cpus_per_node=cpus),
        env,
    )
    proc = None
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "controller",
                "--policy",
                "gang",
                "--quantum",
                str(quantum),
                "--cluster-state",
                str(tmp / "state" / "cluster.json"),
                "--run-dir",
                str(tmp),
                "--log-level",
                "WARNING",
            ]
        )
        with ControllerClient(str(tmp / "controller.sock"), retry=20) as c:
            for _ in range(2):
                c.request("submit", spec={"size": nodes, "argv": SPIN})
            time.sleep(seconds)
            st = c.request("status")
            for j in c.request("jobs"):
                c.request("kill", job_id=j["job_id"])
        return {"p50": st["skew_p50_s"], "p99": st["skew_p99_s"], "quanta": st["quanta"]}
    finally:
        if proc is not None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        cluster_mod.down(env)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--quantum", type=float, default=0.01)
    a = p.parse_args()
    print(f"{'nodes':>5} {'quanta':>7} {'skew p50 (us)':>14} {'skew p99 (us)':>14}")
    for n in a.nodes:
        r = run(n, a.seconds, a.quantum)
        p50 = (r["p50"] or 0) * 1e6
        p99 = (r["p99"] or 0) * 1e6
        print(f"{n:>5} {r['quanta']:>7} {p50:>14.1f} {p99:>14.1f}")


if __name__ == "__main__":
    main()
