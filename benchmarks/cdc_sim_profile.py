"""Where the CDC simulator's time goes: cProfile of one paper-scale fluid run (issue 24).

One sample of Yu & Byun's WL6 (heavy load, 16 paper nodes, MPL 5, fluid mode as
the study runs it, seed 1) under one scheme, profiled; prints the run's CPU
seconds and events, then the functions by their own time. cProfile's own cost
per call inflates functions that make many calls: read the order, not the
seconds.

    python benchmarks/cdc_sim_profile.py --scheme cc-b --jobs 8 --top 25
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.sim.cdc.run import build

FLUID = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scheme", default="cc-b")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    params = {
        "scheme": args.scheme, "mpl": 5, "workload": f"WL6:jobs={args.jobs},load=heavy",
        "nodes": 16, "speeds": "paper", "platform": "paper", "fluid": FLUID,
    }  # fmt: skip
    sim, jobs = build(params, args.seed)
    prof = cProfile.Profile()
    c0 = time.process_time()
    prof.enable()
    res = sim.run(jobs)
    prof.disable()
    print(
        f"WL6 heavy, {args.jobs} jobs, 16 paper nodes, MPL 5, fluid, {args.scheme}, seed "
        f"{args.seed}: {time.process_time() - c0:.1f} CPU s under cProfile, {res.events} events"
    )
    st = pstats.Stats(prof, stream=sys.stdout)
    st.strip_dirs().sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
