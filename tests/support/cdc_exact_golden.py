"""The CDC simulator's exact figures on small runs, bit for bit (data/cdc_sim_exact.json).

The speed work on testbed/sim/cdc/engine.py must not change what it simulates.
Each cell here is one small run -- the nine schemes (spinning, blocking and
spin-block receivers), exact stepping and fluid mode, MPL 5 and 3, two seeds --
and its figures are kept at full precision: every job's submit, start and end
as ``float.hex`` (so responses are compared to the last bit), BCR, MD, the
counters and the ERL statistics. The file was recorded by the engine before
the rewrite (its commit is in the file); only the simulator's own costs (events,
evaluated decisions, wall time) may differ.

    # only for a deliberate model change:
    python -m tests.support.cdc_exact_golden --record
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from testbed.sim.cdc.run import build, summarize
from tests.support import golden

GOLDEN = Path(__file__).resolve().parent / "data" / "cdc_sim_exact.json"
FLUID = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}
ALL = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
# the simulator's own costs: how it got there, not what it simulated
COSTS = ("events", "evaluated", "wall_s")


def cells() -> list[tuple[str, dict[str, Any], int]]:
    out: list[tuple[str, dict[str, Any], int]] = []
    base = {"nodes": 16, "speeds": "paper", "platform": "paper"}
    for s in ALL:  # exact stepping at 1 ms, short jobs arriving close together
        p = {**base, "scheme": s, "mpl": 5, "fluid": None,
             "workload": "WL6:jobs=3,interarrival=0.5,job_seconds=1"}  # fmt: skip
        out.append((f"exact-{s}-mpl5-s1", p, 1))
    for s in ("pb", "sb", "cc-s", "cc-b"):  # MPL 3, another seed and stream
        p = {**base, "scheme": s, "mpl": 3, "fluid": None,
             "workload": "WL6:jobs=3,interarrival=0.3,job_seconds=1"}  # fmt: skip
        out.append((f"exact-{s}-mpl3-s2", p, 2))
    for s in ("sb", "hybrid", "cc-s", "cc-b"):  # fluid mode, the paper-scale study's
        p = {**base, "scheme": s, "mpl": 5, "fluid": FLUID, "workload": "WL6:jobs=3,load=heavy"}
        out.append((f"fluid-{s}-mpl5-s1", p, 1))
    return out


def figures(params: dict[str, Any], seed: int) -> dict[str, Any]:
    sim, jobs = build(params, seed)
    res = sim.run(jobs)
    out = summarize(res)
    for k in COSTS:
        out.pop(k, None)
    out["jobs_exact"] = [
        [j.job_id, j.submit.hex(), j.start.hex(), j.end.hex(), j.cpu_s.hex()] for j in res.jobs
    ]
    out["md_sum_s"] = res.md_sum_s.hex()
    out["busy_s"] = res.busy_s.hex()
    out["erl"] = [res.erl_sum_us.hex(), res.erl_count]
    out["per_node"] = [
        [n["decisions"], n["conflicts"], n["boosts"], float(n["busy_s"]).hex(),
         float(n["erl_us"]).hex(), float(n["ed_us"]).hex()]
        for n in res.per_node
    ]  # fmt: skip
    out["jumps"] = [sim.jumps, sim.jumped_s.hex()]
    # through JSON, as the file holds it (floats round-trip exactly)
    got: dict[str, Any] = json.loads(json.dumps(out))
    return got


def record() -> None:
    golden.record(GOLDEN, {name: figures(p, s) for name, p, s in cells()})


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.support.cdc_exact_golden --record")
    record()
