"""One ``cosched simulate`` run from JSON parameters, for the sweep executor (testbed/sweep).

``cosched simulate`` with several policies or loads hands each (policy, load) pair to
:func:`testbed.sweep.run_sweep` as a run of :func:`run_policy`. A worker (a local
process or a Dask worker) builds the workload again from its description (paths made
absolute by the caller), runs the policy and returns what the command writes: the
summary, the per-job CSV and summary JSON as text, the rejected jobs and the
jobs-in-system series thinned as the plot thins it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

PLOT_POINTS = 20000  # testbed/sim/report.py plot_jobs_in_system thins to this


def run_policy(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    from controller.policies.registry import make_policy
    from testbed.sim.engine import simulate
    from testbed.sim.metrics import csv_text, job_table, json_text, summarize
    from testbed.sim.results import SimConfig
    from testbed.sim.workloads.spec import resolve_workload

    w = params["workload"]
    jobs, info = resolve_workload(
        w["arg"],
        nodes=params["nodes"],
        seed=seed,
        jobs=w["jobs"],
        load=w["load"],
        profile=w["profile"],
        skip_bad_lines=w["skip_bad_lines"],
    )
    policy = make_policy(params["policy"], params["nodes"], params["policy_params"])
    res = simulate(jobs, policy, SimConfig(**params["config"]))
    rows = job_table(res)
    summary = summarize(res, rows)
    summary.load = info.offered_load
    t, n = list(res.series_t), list(res.series_n)
    if len(t) > PLOT_POINTS:
        step = len(t) // PLOT_POINTS + 1
        t, n = t[::step], n[::step]
    doc = asdict(summary)
    doc["slot_matched_fraction"] = {str(k): v for k, v in summary.slot_matched_fraction.items()}
    return {
        "summary": doc,
        "csv": csv_text(rows),
        "json": json_text(summary, res),
        "rejected": [[j, why] for j, why in res.rejected],
        "series": [t, n],
    }
