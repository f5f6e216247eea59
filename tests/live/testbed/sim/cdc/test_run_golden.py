"""The CDC simulator's figures, run for run, against those recorded before its speed-ups.

``cdc_sim_golden.json`` holds the summaries (testbed/sim/cdc/run.py) of a few
small runs -- every scheme on the paper's 16 nodes in fluid mode (seed 1), three
on 16 half-speed nodes of the testbed platform in exact mode (seed 2) -- made
by the engine as it was before its hot paths were rewritten (the commit is in
the file). A rewrite must leave every simulated figure exactly as it was: responses, waits, BCR,
MD, decisions, conflicts, boosts, switches, per job start and end. Only the
simulator's own costs (events, evaluated decisions, wall time) may change.

    # only for a deliberate model change:
    python -m tests.live.testbed.sim.cdc.test_run_golden --record
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from testbed.sim.cdc.run import run_cdc
from tests.support import golden

GOLDEN = Path(__file__).resolve().parents[4] / "support" / "data" / "cdc_sim_golden.json"
FLUID = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}
SCHEMES = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
# exact (not fluid) runs cost more: the schemes with distinct paths through the engine
EXACT_SCHEMES = ("local", "sb", "cc-b")
# the simulator's own costs: how it got there, not what it simulated
COSTS = ("events", "evaluated", "wall_s")


def cells() -> list[tuple[str, dict[str, Any], int]]:
    out: list[tuple[str, dict[str, Any], int]] = []
    for s in SCHEMES:
        paper = {
            "scheme": s,
            "mpl": 5,
            "workload": "WL6:jobs=3,load=heavy",
            "nodes": 16,
            "speeds": "paper",
            "platform": "paper",
            "fluid": FLUID,
        }
        out.append((f"paper-{s}-s1", paper, 1))
        if s not in EXACT_SCHEMES:
            continue
        testbed = {
            "scheme": s,
            "mpl": 3,
            "workload": "WL6:jobs=2,interarrival=0.3,job_seconds=0.5",
            "nodes": 16,
            "speeds": "16x0.5",
            "platform": "testbed",
            "fluid": None,
        }
        out.append((f"testbed-{s}-s2", testbed, 2))
    return out


def figures(params: dict[str, Any], seed: int) -> dict[str, Any]:
    out = run_cdc(params, seed)
    for k in COSTS:
        out.pop(k, None)
    # through JSON, as the file holds it (floats round-trip exactly)
    res: dict[str, Any] = json.loads(json.dumps(out))
    return res


def test_cdc_sim_figures_unchanged_by_speedups() -> None:
    golden = json.loads(GOLDEN.read_text())
    runs = golden["runs"]
    assert sorted(runs) == sorted(name for name, _p, _s in cells())
    for name, params, seed in cells():
        got = figures(params, seed)
        want = runs[name]
        diff = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
        assert not diff, (
            f"{name}: {diff[:5]} changed, e.g. {diff[0]}: "
            f"{want.get(diff[0])!r} -> {got.get(diff[0])!r}"
        )


def record() -> None:
    golden.record(GOLDEN, {name: figures(p, s) for name, p, s in cells()})


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.live.testbed.sim.cdc.test_run_golden --record")
    record()
