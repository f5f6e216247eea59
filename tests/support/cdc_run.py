"""What tests/unit/testbed/experiment/cdc/test_run.py
and tests/live/testbed/experiment/cdc/test_run.py share."""

from __future__ import annotations

from typing import Any


def _job(i: int, app: str, wait: float, run: float, state: str = "done") -> dict[str, Any]:
    return {"index": i, "name": f"{i:03d}-{app}", "app": app, "size": 2, "job_id": i + 1,
            "state": state, "nodes": ["n0", "n1"], "wait_s": wait, "exec_s": run,
            "response_s": wait + run, "cpu_s": run, "report": {}}  # fmt: skip


def _run(scheme: str, load: str, mpl: int, exec_s: float, conflicts: int) -> dict[str, Any]:
    cdc = None
    if scheme != "batch":
        cdc = {"decisions": 1000, "conflicts": conflicts, "boosts": 1, "md_count": 100,
               "md_sum_s": conflicts / 1000.0, "md_buckets": [], "md_bounds_s": [],
               "schemes": {"n0": scheme}}  # fmt: skip
    return {
        "scheme": scheme, "load": load, "mpl": mpl,
        "jobs": [_job(0, "cg", 1.0, exec_s), _job(1, "bt", 3.0, exec_s + 2.0),
                 _job(2, "ft", 0.0, 0.0, state="killed")],
        "cdc": cdc, "utilization": 0.5, "local_policy": {"n0": scheme, "n1": scheme},
        "killed": 1, "wall_seconds": 30.0,
    }  # fmt: skip


CANNED: dict[str, Any] = {
    "spec": {"name": "canned", "nodes": 2, "loads": ["heavy"], "jobs": 3, "seed": 1,
             "load_means_s": {"heavy": 5.55}, "load_means_paper_s": {"heavy": 40.75},
             "size_map": {"4": 2}, "apps": []},
    "cluster": {"nodes": ["n0", "n1"], "delay_mechanism": "userspace"},
    "ns_per_iteration": 77.0,
    "runs": [
        _run("batch", "heavy", 1, 9.0, 0),
        _run("sb", "heavy", 5, 10.0, 200),
        _run("hybrid", "heavy", 5, 8.0, 150),
        _run("pb", "heavy", 5, 12.0, 300),
        _run("cc-s", "heavy", 5, 11.0, 250),
        _run("cc-b", "heavy", 5, 6.0, 100),
        _run("sb", "heavy", 3, 10.0, 100),
        _run("cc-b", "heavy", 3, 7.0, 50),
    ],
}  # fmt: skip
