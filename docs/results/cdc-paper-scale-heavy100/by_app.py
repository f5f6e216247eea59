"""Where CC-B loses to HYBRID at 100 jobs: each application's execution and wait, paired per seed.

Reads the run files in runs/ (WL6 heavy, MPL 5, seeds 1-5) and prints, per application,
the mean execution and wait time under SB, HYBRID and CC-B over the seeds, and CC-B's
change in execution time against HYBRID per seed. The response is wait + execution; at
this load the wait follows the execution of the jobs ahead in the queue, so the
application whose execution CC-B lengthens most is where the difference starts.

    python docs/results/cdc-paper-scale-heavy100/by_app.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "runs"
SCHEMES = ("sb", "hybrid", "cc-b")
SEEDS = (1, 2, 3, 4, 5)


def by_app(scheme: str, seed: int) -> dict[str, dict[str, float]]:
    doc = json.loads((RUNS / f"WL6-heavy-j100-{scheme}-mpl5-s{seed}.json").read_text())
    return doc["by_app"]


def main() -> None:
    apps = sorted(by_app("sb", 1))
    print("WL6 heavy, 100 jobs, MPL 5, seeds 1-5; mean over the seeds, seconds")
    print(f"{'app':4} {'jobs':>5}  " + "  ".join(f"{s + ' exec':>12} {s + ' wait':>12}"
                                                for s in SCHEMES))  # fmt: skip
    for a in apps:
        jobs = statistics.fmean(by_app("sb", k)[a]["jobs"] for k in SEEDS)
        cols = []
        for s in SCHEMES:
            ex = statistics.fmean(by_app(s, k)[a]["execution_s"] for k in SEEDS)
            wa = statistics.fmean(by_app(s, k)[a]["wait_s"] for k in SEEDS)
            cols.append(f"{ex:12.1f} {wa:12.1f}")
        print(f"{a:4} {jobs:5.1f}  " + "  ".join(cols))
    print("\nCC-B's execution time against HYBRID's, per seed (%), and the seconds of")
    print("execution it adds summed over the application's jobs (mean over the seeds):")
    for a in apps:
        ch, added = [], []
        for k in SEEDS:
            c, h = by_app("cc-b", k)[a], by_app("hybrid", k)[a]
            ch.append((c["execution_s"] / h["execution_s"] - 1) * 100)
            added.append(c["execution_s"] * c["jobs"] - h["execution_s"] * h["jobs"])
        print(
            f"{a:4} {', '.join(f'{x:+.1f} %' for x in ch)}; mean {statistics.fmean(ch):+.1f} %; "
            f"{statistics.fmean(added):+.0f} job-seconds"
        )
    tot_c = statistics.fmean(sum(v["execution_s"] * v["jobs"] for v in by_app("cc-b", k).values())
                             for k in SEEDS)  # fmt: skip
    tot_h = statistics.fmean(sum(v["execution_s"] * v["jobs"] for v in by_app("hybrid", k).values())
                             for k in SEEDS)  # fmt: skip
    print(
        f"all  execution summed over the jobs: CC-B {tot_c:.0f} s, HYBRID {tot_h:.0f} s "
        f"({(tot_c / tot_h - 1) * 100:+.1f} %)"
    )


if __name__ == "__main__":
    main()
