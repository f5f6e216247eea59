"""Cross-node quantum skew of the live controller (prints figures; needs root).

Brings up a local cluster of N nodes, starts ``python -m controller`` with
strict gang at a 10 ms quantum, submits two full-width busy jobs (so every
quantum freezes one gang and thaws the other on every node), lets it run,
and prints what the controller measured, for each ``--lead-ms`` given (0 =
immediate mode, > 0 = time-triggered switches, docs/cluster.md): the skew of
the agents' switch completions (``applied_monotonic_ns``), the thaw skew (their
``thawed_realtime_ns``; one host: one clock), and, time-triggered, the lateness
of the thaws against their instant and the plans that arrived late.

    sudo .venv/bin/python benchmarks/quantum_skew.py --nodes 2 4 --seconds 10 --lead-ms 0 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.client import ControllerClient
from testbed.cluster import cluster as cluster_mod
from testbed.cluster.profiles import parse_profile

SPIN = ["python3", "-c", "while True: pass"]


def run(nodes: int, seconds: float, quantum: float, lead_ms: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cosched-skew-"))
    env = cluster_mod.Env(state_dir=str(tmp / "state"))
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
                "--lead-ms",
                str(lead_ms),
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
        return dict(st)
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
    p.add_argument("--lead-ms", type=float, nargs="+", default=[0.0, 5.0])
    a = p.parse_args()

    def us(v: float | None) -> str:
        return f"{v * 1e6:9.1f}" if v is not None else f"{'-':>9}"

    print(
        f"{'nodes':>5} {'lead ms':>7} {'mode':>14} {'quanta':>7} | {'skew p50':>9} {'skew p99':>9}"
        f" | {'thaw p50':>9} {'thaw p99':>9} | {'late p50':>9} {'late p99':>9} | late plans"
    )
    for n in a.nodes:
        for lead in a.lead_ms:
            r = run(n, a.seconds, a.quantum, lead)
            print(
                f"{n:>5} {r['lead_ms']:>7.1f} {r['switch_mode']:>14} {r['quanta']:>7} |"
                f" {us(r['skew_p50_s'])} {us(r['skew_p99_s'])} |"
                f" {us(r['thaw_skew_p50_s'])} {us(r['thaw_skew_p99_s'])} |"
                f" {us(r['lateness_p50_s'])} {us(r['lateness_p99_s'])} | {r['late_plans']}"
            )
    print("us; skew = spread of the agents' switch completions, thaw = of their thaw instants,")
    print("late = lateness of each thaw against its instant (time-triggered only).")


if __name__ == "__main__":
    main()
