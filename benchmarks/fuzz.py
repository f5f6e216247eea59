"""Fuzz every input surface with 10,000 generated inputs each (issue 13).

The targets are tests/support/fuzz_targets.py (the CI runs them with a small budget):
the agent/controller wire decoder, the controller's API, job specs, experiment
TOML specs and SWF lines. For each, the number of inputs, how many were accepted
and rejected, crashes (any exception other than the surface's own error, a daemon
reply that says "internal error", or a rejection that does not name its field or
file:line), and the time taken.

    .venv/bin/python benchmarks/fuzz.py [--examples 10000] [--only "SWF lines"]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fuzz_targets import TARGETS, Target


def fuzz(t: Target, examples: int) -> tuple[dict[str, int], str | None]:
    """Run ``t`` on ``examples`` inputs: outcome counts and the crash, if any."""
    seen = {"accepted": 0, "rejected": 0}

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(t.strategy)
    def run(value: Any) -> None:
        seen[t.run(value)] += 1

    try:
        run()
    except Exception as e:  # hypothesis re-raises the shrunk failing input: a crash
        return seen, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return seen, None


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--only", default=None, help="one target by name")
    a = ap.parse_args()
    print(f"{'target':<18} {'inputs':>7} {'accepted':>9} {'rejected':>9} {'crashes':>8} {'s':>7}")
    total_crashes = 0
    for t in TARGETS:
        if a.only and t.name != a.only:
            continue
        t0 = time.perf_counter()
        seen, crash = fuzz(t, a.examples)
        dt = time.perf_counter() - t0
        n = seen["accepted"] + seen["rejected"]
        crashes = 1 if crash else 0
        total_crashes += crashes
        print(f"{t.name:<18} {n:>7} {seen['accepted']:>9} {seen['rejected']:>9} {crashes:>8} "
              f"{dt:>7.1f}")  # fmt: skip
        if crash:
            print(f"  crash: {crash}")
    print(f"target: 0 crashes over all inputs: {'met' if total_crashes == 0 else 'MISSED'}")
    return 1 if total_crashes else 0


if __name__ == "__main__":
    sys.exit(main())
