"""DHC at P = 4096 (issue 12, "Targets"): how long Feitelson & Rudolph's fluid simulation
must run before independent runs agree within 1 % at low load, and how long that
takes.

For each number of gangs, two runs that differ only in their seed (arrivals,
sizes, execution times and the tree's random choices) are simulated side by
side, one per core, on 4,096 PEs with the paper's best design (cube balancing,
minimize fragmentation, selective disabling, weight/uniform) and uniform gang
sizes at generated load 0.2. Printed per row: seconds per run (wall, the slower
of the two), each run's utilization, threads per PE and mean slowdown, and the
relative difference of each pair. At low load utilization and threads per PE
mostly measure the sampled workload: work per gang (size times execution time)
has a coefficient of variation near 1.3, so their spread falls only as
1.3 / sqrt(gangs). Mean slowdown is the scheduler's own figure. The target row
is the first where all three agree within 1 %; the target is met when that row
took under a minute.

Also printed: the per-arrival cost at P = 32 and P = 4096 (ratio), and the cost
before this benchmark existed, from the issue's notes (0.73 s per arrival at
P = 4096 when a round scanned every controller and every PE of each gang).

    python benchmarks/dhc_scale.py                 # 4,000 .. 128,000 gangs
    python benchmarks/dhc_scale.py --gangs 4000,16000 --load 0.3
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

from controller.policies.dhc import DhcConfig
from testbed.sim.dhc import simulate


def one(args: tuple[int, str, float, int, int]) -> tuple[float, float, float, bool, float]:
    pes, dist, load, gangs, seed = args
    t0 = time.perf_counter()
    r = simulate(DhcConfig(pes=pes), dist=dist, load=load, gangs=gangs, seed=seed,
                 max_in_system=10_000)  # fmt: skip
    return time.perf_counter() - t0, r.utilization, r.load_per_pe, r.saturated, r.mean_slowdown


def rel(a: float, b: float) -> float:
    return abs(a - b) / ((a + b) / 2) if a + b else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pes", type=int, default=4096)
    ap.add_argument("--dist", default="uniform", choices=("uniform", "harmonic", "pow2"))
    ap.add_argument("--load", type=float, default=0.2, help="generated load (low: 0.2)")
    ap.add_argument("--gangs", default="4000,16000,64000,128000")
    ap.add_argument("--seeds", default="1,2", help="two seeds: the independent runs")
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    if len(seeds) != 2:
        ap.error("--seeds takes two seeds, e.g. 1,2")
    print(f"DHC fluid simulation, P = {a.pes}, {a.dist} sizes, load {a.load}; "
          f"runs with seeds {seeds[0]} and {seeds[1]} in parallel")  # fmt: skip
    # per-arrival cost at the appendix's 32 PEs and at P, same arrivals
    small = one((32, a.dist, a.load, 2000, seeds[0]))[0] / 2000
    big = one((a.pes, a.dist, a.load, 2000, seeds[0]))[0] / 2000
    print(f"per arrival: {small * 1e3:.3f} ms at 32 PEs, {big * 1e3:.3f} ms at {a.pes} PEs "
          f"({big / small:.1f}x); before: 730 ms at 4096 PEs "
          f"(the old code {0.73 / big:.0f}x slower)")  # fmt: skip
    print(f"{'gangs':>7} {'s/run':>7} {'util 1':>8} {'util 2':>8} {'diff':>7} "
          f"{'thr/PE 1':>9} {'thr/PE 2':>9} {'diff':>7} {'slow 1':>7} {'slow 2':>7} "
          f"{'diff':>7}")  # fmt: skip
    met: tuple[int, float] | None = None
    with ProcessPoolExecutor(max_workers=2) as pool:
        for g in (int(x) for x in a.gangs.split(",")):
            r1, r2 = pool.map(one, [(a.pes, a.dist, a.load, g, s) for s in seeds])
            secs = max(r1[0], r2[0])
            du, dl = rel(r1[1], r2[1]), rel(r1[2], r2[2])
            flag = " saturated" if r1[3] or r2[3] else ""
            ds = rel(r1[4], r2[4])
            print(f"{g:>7} {secs:>7.1f} {r1[1]:>8.4f} {r2[1]:>8.4f} {du:>7.2%} "
                  f"{r1[2]:>9.4f} {r2[2]:>9.4f} {dl:>7.2%} {r1[4]:>7.4f} {r2[4]:>7.4f} "
                  f"{ds:>7.2%}{flag}", flush=True)  # fmt: skip
            if met is None and max(du, dl, ds) <= a.target:
                met = (g, secs)
    if met is None:
        print(f"target: no row agreed within {a.target:.0%}: MISSED (give more --gangs)")
    else:
        ok = "met" if met[1] < a.budget else "MISSED"
        print(f"target: runs agree within {a.target:.0%} from {met[0]} gangs, "
              f"{met[1]:.1f} s per run (budget {a.budget:.0f} s): {ok}")  # fmt: skip


if __name__ == "__main__":
    main()
