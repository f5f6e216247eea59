"""How fast the CDC simulator is (testbed/sim/cdc/), and what the paper-scale study would cost.

Prints, for each scheme, one run of a fixed sample of Yu & Byun's WL6 at
the paper's scale (16 nodes, 7 fast and 9 at 1.8/2.8, MPL 5, heavy load,
``--jobs`` jobs, fluid mode): simulated decision points per CPU second of this
process (the ticks and arrivals the agents' schemes decide at, counted or
evaluated), decisions the scheme code was actually asked per second, events
per second, and simulated seconds per CPU second; wall seconds beside them
(the host is shared). Then, interleaved (ABAB) on one
scheme, skipping repeated decisions against asking the scheme at every one.
Last, the paper-scale study (9 schemes x 2 loads x 5 seeds x 100 jobs, Fig. 9's
5 workloads x 7 schemes x 5 seeds x 50 jobs, Fig. 10's MPLs 2-4 x 7 schemes x
5 seeds x 100 jobs) projected from the sample's CPU seconds per job, against
the 15-minute target.

    python benchmarks/cdc_sim_speed.py              # 6 jobs per sample run
    python benchmarks/cdc_sim_speed.py --jobs 10 --schemes cc-b,sb,local
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.sim.cdc.engine import CdcSim, Fluid
from testbed.sim.cdc.platform import PAPER, parse_speeds
from testbed.sim.cdc.workload import parse_workload, stream

SCHEMES = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
FLUID = Fluid(settle_s=0.5, measure_s=1.0, tail_s=1.0, min_jump_s=2.0)


def one(scheme: str, jobs: int, seed: int, exact_ticks: bool = False) -> dict[str, float]:
    speeds = parse_speeds("paper", 16)
    wl = parse_workload(f"WL6:jobs={jobs},load=heavy")
    js = stream(wl, seed, speeds, PAPER)
    mpl = 1 if scheme == "batch" else 5
    sim = CdcSim(scheme, mpl, speeds, PAPER, seed=seed, fluid=FLUID, exact_ticks=exact_ticks)
    t0, c0 = time.perf_counter(), time.process_time()
    res = sim.run(js)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "wall": wall,
        "cpu": cpu,
        "decisions": res.decisions,
        "evaluated": res.evaluated,
        "events": res.events,
        "makespan": res.makespan,
        "detail": res.makespan - sim.jumped_s,
        "jobs": jobs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=6, help="jobs per sample run (default 6)")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--abab", type=int, default=2, help="ABAB rounds for the skip comparison")
    args = ap.parse_args()
    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    # warm the per-application repetition calibration (cached) outside the timings
    stream(parse_workload("WL6:jobs=1"), 1, parse_speeds("paper", 16), PAPER)
    print(
        f"WL6 heavy, {args.jobs} jobs, 16 paper nodes, MPL 5, fluid "
        f"(settle {FLUID.settle_s:g} s, measure {FLUID.measure_s:g} s, tail {FLUID.tail_s:g} s)"
    )
    print("rates per CPU second of this process (the host is shared: wall seconds beside them)")
    print(
        f"{'scheme':<8}{'wall s':>8}{'CPU s':>8}{'sim s':>8}{'detail s':>10}{'decisions/s':>14}"
        f"{'asked/s':>10}{'events/s':>11}{'sim s/CPU s':>13}{'CPU s/job':>11}"
    )
    per_job: dict[str, float] = {}
    for s in schemes:
        r = one(s, args.jobs, args.seed)
        per_job[s] = r["cpu"] / r["jobs"]
        print(
            f"{s:<8}{r['wall']:>8.1f}{r['cpu']:>8.1f}{r['makespan']:>8.0f}{r['detail']:>10.0f}"
            f"{r['decisions'] / r['cpu']:>14,.0f}{r['evaluated'] / r['cpu']:>10,.0f}"
            f"{r['events'] / r['cpu']:>11,.0f}{r['makespan'] / r['cpu']:>13.1f}"
            f"{per_job[s]:>11.2f}"
        )
    if args.abab and "cc-s" in SCHEMES:
        cpus: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.abab):
            for exact in (False, True):
                cpus[exact].append(one("cc-s", max(2, args.jobs // 2), args.seed, exact)["cpu"])
        a, b = min(cpus[False]), min(cpus[True])
        print(
            f"cc-s, {max(2, args.jobs // 2)} jobs, ABAB x{args.abab}: skipping repeated "
            f"decisions {a:.1f} CPU s, asking the scheme at every one {b:.1f} CPU s "
            f"({b / a:.2f}x)"
        )
    cdc = [s for s in schemes if s != "batch"] or schemes
    mean_job = sum(per_job[s] for s in cdc) / len(cdc)
    batch_job = per_job.get("batch", mean_job)
    fig7 = (len(cdc) * mean_job + batch_job) * 100 * 2 * 5
    fig9 = 7 * mean_job * 50 * 5 * 5
    fig10 = 7 * mean_job * 100 * 3 * 5
    total = fig7 + fig9 + fig10
    print(
        f"paper-scale study projected from {mean_job:.2f} CPU s per job ({len(cdc)} schemes): "
        f"Figs. 7-8 {fig7 / 3600:.1f} h, Fig. 9 {fig9 / 3600:.1f} h, Figs. 10-11 "
        f"{fig10 / 3600:.1f} h; total {total / 3600:.1f} h on one core, "
        f"{total / 7200:.1f} h on two; target 0.25 h: {'ok' if total / 2 <= 900 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
