"""DHC's round in the fluid simulation (issue 27): why the full DHC spec was slow, and how
much faster the round is now, on the designs that make it slow.

With requests from PE #1 and no load balancing (Feitelson & Rudolph 1996 Fig. 3) every gang
is controlled on the leftmost spine of the tree, and selective disabling runs, in each slot
of a controller's gang, the untouched subtrees below it, which hold the other spine
controllers' gangs: the slots of one round multiply, and every arrival and departure
recomputes the round. Printed per design: slots per round (mean and max), the simulation's
wall time with the round as first written (the plain recursion of §3.3 making a Slot per
slot, sorted with a key) and as built now (``DhcTree.raw_round``), interleaved, the ratio,
and whether the two gave the same figures (they must: the same floats in the same order).

    python benchmarks/dhc_round.py                  # load 0.6, 1,000 gangs, 3 designs
    python benchmarks/dhc_round.py --load 0.7 --gangs 1500 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.policies.dhc import DhcConfig, DhcTree, reference_round
from testbed.sim.dhc import simulate

DESIGNS = {
    "PE #1, no balancing (Fig. 3)": ("none", "pe0", "harmonic"),
    "PE #1, cube": ("cube", "pe0", "harmonic"),
    "any thread, cube (the defaults)": ("cube", "any", "uniform"),
}


def plain_round(t: DhcTree) -> list[tuple[float, int, int, int, float]]:
    """The round as first written, as raw_round's tuples (for the simulation to use)."""
    out = reference_round(t)
    pes = t.cfg.pes
    return [(s.start, s.controller[0] * pes + s.controller[1], s.gang_id, 0, s.length)
            for s in out]  # fmt: skip


def run(
    cfg: DhcConfig, dist: str, load: float, gangs: int, plain: bool
) -> tuple[float, Any, list[int]]:
    fast = DhcTree.raw_round
    sizes: list[int] = []

    def counted(t: DhcTree) -> list[tuple[float, int, int, int, float]]:
        out = plain_round(t) if plain else fast(t)
        sizes.append(len(out))
        return out

    DhcTree.raw_round = counted  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        r = simulate(cfg, dist, load, gangs=gangs, seed=1)
        return time.perf_counter() - t0, r, sizes
    finally:
        DhcTree.raw_round = fast  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=float, default=0.6)
    ap.add_argument("--gangs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(f"fluid simulation, 32 PEs, load {args.load}, {args.gangs} gangs, seed 1; "
          f"{args.repeats} repetitions, plain and now interleaved")  # fmt: skip
    for name, (bal, origin, dist) in DESIGNS.items():
        cfg = replace(DhcConfig(), balancing=bal, origin=origin)
        plain: list[float] = []
        now: list[float] = []
        same = True
        for rep in range(args.repeats):
            order = (True, False) if rep % 2 == 0 else (False, True)
            got = {p: run(cfg, dist, args.load, args.gangs, p) for p in order}
            plain.append(got[True][0])
            now.append(got[False][0])
            same &= got[True][1] == got[False][1]
            sizes = got[False][2]
        ratio = [a / b for a, b in zip(plain, now, strict=True)]
        print(f"{name}: {statistics.fmean(sizes):,.0f} slots per round (max {max(sizes):,}); "
              f"plain {min(plain):.1f}-{max(plain):.1f} s, now {min(now):.1f}-{max(now):.1f} s, "
              f"{min(ratio):.1f}-{max(ratio):.1f}x; figures identical: {same}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
