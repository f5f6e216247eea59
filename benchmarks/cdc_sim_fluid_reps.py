"""Fluid jumps that take whole repetitions against those that take body iterations only.

A job of Yu & Byun's WL6 repeats its NPB class-A run (prologue, iterations,
epilogue) many times; a fluid jump (testbed/sim/cdc/engine.py) takes body
iterations only, so every later repetition's prologue and epilogue still runs
in detail, with every other running job beside it (benchmarks/cdc_sim_scaling.py,
the "jumped" and "no jump" columns). ``Fluid(whole_reps=True)`` lets a jump
take them too. This runs one stream three ways -- exact (every event), fluid as
the study runs it, fluid with ``whole_reps`` -- and prints each run's CPU
seconds and events, and its figures beside the exact run's: mean response,
the largest per-job response error, BCR, MD. ``--past-queued`` adds a fourth
run, fluid with ``past_queued`` (jumps reach past arrivals that start no job);
``--interarrival`` shortens the gaps so that a short stream queues.

    python benchmarks/cdc_sim_fluid_reps.py --scheme cc-b --jobs 8
    python benchmarks/cdc_sim_fluid_reps.py --scheme hybrid --jobs 10 --interarrival 8 --past-queued
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdc_sim_scaling import FLUID, paper_params  # benchmarks/, beside this script

from testbed.sim.cdc.run import build


def run(
    scheme: str, jobs: int, seed: int, fluid: dict[str, Any] | None, gap: float | None = None
) -> tuple[float, Any]:
    params = paper_params(scheme, jobs, fluid)
    if gap is not None:
        params["workload"] += f",interarrival={gap:g}"
    sim, specs = build(params, seed)
    c0 = time.process_time()
    res = sim.run(specs)
    return time.process_time() - c0, res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scheme", default="cc-b")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interarrival", type=float, help="mean gap, s (default: heavy, 40.75)")
    ap.add_argument("--past-queued", action="store_true", help="add a past_queued run")
    args = ap.parse_args()
    load = "heavy" if args.interarrival is None else f"interarrival {args.interarrival:g} s"
    print(
        f"WL6 {load}, {args.jobs} jobs, 16 paper nodes, MPL 5, {args.scheme}, seed {args.seed}; "
        "fluid: settle 0.5 s, measure 1 s, tail 1 s, min jump 2 s"
    )
    print(
        f"{'run':<19}{'CPU s':>8}{'events':>11}{'resp s':>9}{'vs exact':>10}"
        f"{'worst job':>11}{'BCR':>8}{'MD ms':>8}{'wait s':>8}"
    )
    ref = None
    runs: list[tuple[str, dict[str, Any] | None]] = [
        ("exact", None),
        ("fluid body-only", FLUID),
        ("fluid whole_reps", {**FLUID, "whole_reps": True}),
    ]
    if args.past_queued:
        runs.append(("fluid past_queued", {**FLUID, "past_queued": True}))
    for label, fl in runs:
        cpu, res = run(args.scheme, args.jobs, args.seed, fl, args.interarrival)
        resp = [j.response for j in res.jobs]
        mean = sum(resp) / len(resp)
        if ref is None:
            ref = resp
        worst = max(abs(a / b - 1) for a, b in zip(resp, ref, strict=True))
        print(
            f"{label:<19}{cpu:>8.1f}{res.events:>11,}{mean:>9.1f}"
            f"{100 * (mean / (sum(ref) / len(ref)) - 1):>+9.1f}%{100 * worst:>10.1f}%"
            f"{res.bcr:>8.4f}{res.md_mean_s * 1e3:>8.2f}"
            f"{sum(j.wait for j in res.jobs) / len(res.jobs):>8.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
