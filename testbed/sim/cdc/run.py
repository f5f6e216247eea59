"""One simulated CDC run as a sweep hands it out: ``run_cdc(params, seed) -> summary``.

``params`` (JSON-able, everything the result depends on besides the seed):

* ``scheme`` -- batch, local, dcs, pb, ib, sb, hybrid, cc-s or cc-b;
* ``mpl`` -- jobs per node at most (BATCH: 1);
* ``workload`` -- a Yu & Byun workload spec (``WL6:jobs=100,load=heavy``,
  testbed/sim/cdc/workload.py);
* ``speeds`` -- per-node speeds (a list, or ``"paper"``), ``nodes`` their count;
* ``platform`` -- ``paper`` or ``testbed`` with overrides (platform.py);
* ``fluid`` -- null (exact) or the fluid windows ``{settle_s, measure_s, tail_s,
  min_jump_s}``;
* ``record`` -- optional, true: the summary adds ``records``, per application the
  processes' records summed (engine.ProcRecord: CPU, boost, waits, contested
  decisions), on the fast (speed 1) and the slow nodes apart. Absent, the summary is
  as before it existed.

The summary holds the means the reports print (response = wait + execution,
the wait share of response, BCR, MD), per application, and the simulator's
own figures (events, decisions made and counted, wall seconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from testbed.sim.cdc.engine import CdcResult, CdcSim, Fluid, JobResult, SimJobSpec
from testbed.sim.cdc.platform import Platform, parse_platform, parse_speeds
from testbed.sim.cdc.workload import parse_workload, stream


def _mean(xs: Sequence[float]) -> float | None:
    v = [x for x in xs if not math.isnan(x)]
    return sum(v) / len(v) if v else None


def summarize(res: CdcResult) -> dict[str, Any]:
    done = [j for j in res.jobs if not math.isnan(j.end)]
    resp = _mean([j.response for j in done])
    wait = _mean([j.wait for j in done])
    by_app: dict[str, list[JobResult]] = {}
    for j in done:
        by_app.setdefault(j.app, []).append(j)
    total_resp = sum(j.response for j in done)
    return {
        "scheme": res.scheme,
        "mpl": res.mpl,
        "jobs": len(res.jobs),
        "done": len(done),
        "response_s": resp,
        "wait_s": wait,
        "execution_s": _mean([j.execution for j in done]),
        "wait_share": (sum(j.wait for j in done) / total_resp) if total_resp > 0 else None,
        "bcr": res.bcr,
        "md_s": res.md_mean_s,
        "decisions": res.decisions,
        "conflicts": res.conflicts,
        "boosts": res.boosts,
        "evaluated": res.evaluated,
        "md_count": res.md_count,
        "switches": res.switches,
        "makespan_s": res.makespan,
        "utilization": (res.busy_s / res.node_time_s) if res.node_time_s > 0 else None,
        "erl_mean_us": (res.erl_sum_us / res.erl_count) if res.erl_count else None,
        "events": res.events,
        "wall_s": res.wall_s,
        "by_app": {
            a: {
                "jobs": len(js),
                "response_s": _mean([j.response for j in js]),
                "execution_s": _mean([j.execution for j in js]),
                "wait_s": _mean([j.wait for j in js]),
            }
            for a, js in sorted(by_app.items())
        },
        "per_job": [
            [j.job_id, j.app, j.size, round(j.submit, 6), round(j.start, 6), round(j.end, 6)]
            for j in res.jobs
        ],
    }


RECORD_FIELDS = ("cpu_s", "spin_s", "held_s", "msg_wait_s", "pending_s", "contested", "won",
                 "w_r_sum", "msgs_sum", "w_r_top")  # fmt: skip


def records(res: CdcResult) -> dict[str, dict[str, dict[str, float]]]:
    """Per application and node class (``fast``: speed 1, ``slow``), the sums of its
    processes' records and of their lives (``life_s``: their job's execution each)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    top = max((r.speed for j in res.jobs for r in j.procs), default=1.0)
    for j in res.jobs:
        if math.isnan(j.end):
            continue
        app = out.setdefault(j.app, {})
        for r in j.procs:
            d = app.setdefault("fast" if r.speed >= top else "slow", {"procs": 0, "life_s": 0.0})
            d["procs"] += 1
            d["life_s"] += j.execution
            for k in RECORD_FIELDS:
                d[k] = d.get(k, 0) + getattr(r, k)
    return {a: dict(sorted(v.items())) for a, v in sorted(out.items())}


def fluid_of(spec: Mapping[str, Any] | None) -> Fluid | None:
    return None if spec is None else Fluid(**dict(spec))


def build(params: Mapping[str, Any], seed: int) -> tuple[CdcSim, list[SimJobSpec]]:
    platform: Platform = parse_platform(str(params.get("platform", "paper")))
    nodes = int(params.get("nodes", 16))
    sp = params.get("speeds", "paper")
    speeds = parse_speeds(sp, nodes) if isinstance(sp, str) else tuple(float(x) for x in sp)
    wl = parse_workload(str(params["workload"]))
    jobs = stream(wl, seed, speeds, platform)
    sim = CdcSim(
        str(params["scheme"]),
        int(params.get("mpl", 5)),
        speeds,
        platform,
        seed=seed,
        fluid=fluid_of(params.get("fluid")),
        record=bool(params.get("record")),
    )
    return sim, jobs


def run_cdc(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Run one (scheme, MPL, workload, machine) with ``seed``; the summary (module docstring)."""
    sim, jobs = build(params, seed)
    res = sim.run(jobs)
    out = summarize(res)
    out["jumps"] = sim.jumps
    out["jumped_s"] = sim.jumped_s
    if params.get("record"):
        out["records"] = records(res)
    return out
