"""Fluid mode's whole_reps + past_queued against the default fluid mode, run by run.

Reads the 20-job runs of docs/results/cdc-paper-scale (default fluid) and of this folder
(both options on): the same streams (WL6 heavy, MPL 5, seeds 1-5, SB, HYBRID, CC-B).
Prints, per scheme, the options' error in mean response, BCR and MD over the seeds, and
the error they make in the claims' statistic (CC-B's change against SB and HYBRID, per
seed), beside the CPU they cost.

    python docs/results/cdc-paper-scale-subset-approx/compare.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "cdc-paper-scale" / "runs"
SCHEMES = ("sb", "hybrid", "cc-b")
SEEDS = (1, 2, 3, 4, 5)


def load(folder: Path, scheme: str, seed: int) -> dict:
    return json.loads((folder / f"WL6-heavy-j20-{scheme}-mpl5-s{seed}.json").read_text())


def pct(a: float, b: float) -> float:
    return (a - b) / b * 100.0


def line(xs: list[float], unit: str) -> str:
    m = statistics.fmean(abs(x) for x in xs)
    return (
        f"mean {statistics.fmean(xs):+.2f}{unit} (min {min(xs):+.2f}{unit}, "
        f"max {max(xs):+.2f}{unit}, mean |.| {m:.2f}{unit})"
    )


def main() -> None:
    print(
        "20-job WL6 heavy streams, MPL 5, seeds 1-5: both options (this folder) against "
        "the default fluid mode (docs/results/cdc-paper-scale)"
    )
    for s in SCHEMES:
        d = [load(BASE, s, k) for k in SEEDS]
        o = [load(HERE / "runs", s, k) for k in SEEDS]
        pairs = list(zip(d, o, strict=True))
        resp = [pct(b["response_s"], a["response_s"]) for a, b in pairs]
        md = [pct(b["md_s"], a["md_s"]) for a, b in pairs]
        print(f"{s:7} response {line(resp, ' %')}")
        print(f"{'':7} BCR      {line([b['bcr'] - a['bcr'] for a, b in pairs], '')}")
        print(f"{'':7} MD       {line(md, ' %')}")
        print(
            f"{'':7} wall s   default {sum(a['wall_s'] for a in d):.0f}, options "
            f"{sum(b['wall_s'] for b in o):.0f} over the five seeds"
        )
    print("\nthe claims' statistic, CC-B's change in mean response against X, per seed:")
    for x in ("sb", "hybrid"):
        dd, oo = [], []
        for k in SEEDS:
            dd.append(pct(load(BASE, "cc-b", k)["response_s"], load(BASE, x, k)["response_s"]))
            oo.append(
                pct(
                    load(HERE / "runs", "cc-b", k)["response_s"],
                    load(HERE / "runs", x, k)["response_s"],
                )
            )
        diff = [b - a for a, b in zip(dd, oo, strict=True)]
        print(
            f"vs {x:6}: default {' '.join(f'{v:+.1f}' for v in dd)} %; options "
            f"{' '.join(f'{v:+.1f}' for v in oo)} %; options - default {line(diff, ' points')}"
        )


if __name__ == "__main__":
    main()
