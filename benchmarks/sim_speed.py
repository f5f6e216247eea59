"""Simulator speed: jobs simulated per second (issue 2, "Benchmark").

* FCFS, EASY, conservative and lookahead on the KTH SP2 trace (100
  processors, users' estimates). Targets: EASY < 1 s, conservative < 2 s,
  lookahead < 15 s of simulation; the issue quotes a well-known Python
  simulator at 3.2 s, 6.3 s and 242 s on this machine kind, printed beside
  ours as a ratio (that simulator is not run here).
* EASY on 1,000,000 Lublin jobs (128 nodes). Target < 60 s.
* Paired gang (fluid mode) on 100,000 Lublin jobs, heterogeneous profiles.

Workload loading/generation is timed apart from simulation.

    python benchmarks/sim_speed.py            # the full run
    python benchmarks/sim_speed.py --quick    # 1/10 of the Lublin sizes
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.policies.registry import make_policy  # noqa: E402
from testbed.sim.engine import simulate  # noqa: E402
from testbed.sim.metrics import summarize  # noqa: E402
from testbed.sim.results import SimConfig  # noqa: E402
from testbed.sim.workloads.lublin import generate_lublin  # noqa: E402
from testbed.sim.workloads.swf import read_swf  # noqa: E402
from testbed.sim.workloads.synthetic import apply_profile  # noqa: E402

KTH = ROOT.parent / "shared" / "traces" / "KTH-SP2-1996-2.1-filtered.swf"
TARGETS = {"fcfs": None, "easy": 1.0, "conservative": 2.0, "lookahead": 15.0}
PEER = {"fcfs": None, "easy": 3.2, "conservative": 6.3, "lookahead": 242.0}


def line(label: str, jobs: int, seconds: float, extra: str = "") -> None:
    print(f"{label:<40} {jobs:>9,} jobs {seconds:9.2f} s {jobs / seconds:>11,.0f} jobs/s  {extra}")


def kth() -> None:
    if not KTH.exists():
        print(f"KTH trace not found at {KTH}: skipped")
        return
    t0 = time.perf_counter()
    trace = read_swf(KTH)
    load_s = time.perf_counter() - t0
    print(f"KTH SP2: {len(trace.jobs):,} jobs loaded in {load_s:.2f} s")
    for name, target in TARGETS.items():
        policy = make_policy(name, 100)
        res = simulate(trace.jobs, policy, SimConfig(nodes=100))
        s = summarize(res)
        verdict = ""
        if target is not None:
            ok = "ok" if res.wall_seconds < target else "MISSED"
            peer = PEER[name]
            assert peer is not None
            verdict = (
                f"target < {target:g} s: {ok}; vs quoted peer {peer:g} s: "
                f"{peer / res.wall_seconds:.1f}x faster"
            )
        line(f"KTH {name}", len(trace.jobs), res.wall_seconds, verdict)
        print(
            f"    mean wait {s.mean_wait:,.0f} s, bounded slowdown {s.mean_bounded_slowdown:.2f}, "
            f"utilization {s.utilization:.3f}"
        )


def lublin_easy(n: int) -> None:
    t0 = time.perf_counter()
    jobs = generate_lublin(n, 128, seed=1)
    gen_s = time.perf_counter() - t0
    print(f"Lublin: {n:,} jobs generated in {gen_s:.2f} s")
    res = simulate(jobs, make_policy("easy", 128), SimConfig(nodes=128))
    ok = "ok" if res.wall_seconds < 60 else "MISSED"
    line("Lublin EASY", n, res.wall_seconds, f"target < 60 s (1M jobs): {ok}")


def lublin_paired(n: int) -> None:
    t0 = time.perf_counter()
    jobs = apply_profile(generate_lublin(n, 128, seed=2), "heterogeneous", seed=2)
    gen_s = time.perf_counter() - t0
    print(f"Lublin: {n:,} jobs with heterogeneous profiles generated in {gen_s:.2f} s")
    for name in ("gang", "paired-gang"):
        res = simulate(jobs, make_policy(name, 128), SimConfig(nodes=128, mode="fluid"))
        s = summarize(res)
        match = f", matching {s.matching_success_rate:.3f}" if s.matching_success_rate else ""
        line(
            f"Lublin {name} (fluid)", n, res.wall_seconds, f"slowdown {s.mean_slowdown:.2f}{match}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="1/10 of the Lublin sizes")
    ap.add_argument("--only", choices=["kth", "easy", "paired"], default=None)
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    if args.only in (None, "kth"):
        kth()
    if args.only in (None, "easy"):
        lublin_easy(1_000_000 // scale)
    if args.only in (None, "paired"):
        lublin_paired(100_000 // scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
