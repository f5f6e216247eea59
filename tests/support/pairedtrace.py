"""Shared by the paired-trace tests: a calibration with the alone runs job_types()
reads, a four-quantum trace, recorded live Fig. 13 runs, and the study spec pointed at
them."""

from __future__ import annotations

import json
import re
from pathlib import Path

SPEC = Path("experiments/paired-trace-fig3-13.toml")

# a calibration with the alone runs job_types() reads
CAL = """[model]
quantum = 0.2
interference = 0.17
context_switch = 0.0
launch = 0.5
launch_cpu = 0.5
teardown = 0.1
barrier_wall_base = 0.0004
barrier_wall_per_rank = 0.0001
barrier_cpu_base = 0.00005
barrier_cpu_per_rank = 0.00001

[measured.alone.compute.compute_rate]
mean = 20.0
[measured.alone.compute.compute_cpu]
mean = 0.95
[measured.alone.io.io_rate]
mean = 24.0
[measured.alone.io.io_cpu]
mean = 0.03
[measured.derived]
interference_compute_io = 0.01
"""


def entries() -> list[dict[str, object]]:
    # job 1 alone at 0.9, then paired with new job 2 (0.1)
    return [
        {"q": 1, "utilization": {"1": 0.9}, "slot": 0, "partner": None},
        {"q": 2, "utilization": {"1": 0.88, "2": 0.1}, "slot": 0, "partner": 1},
        {"q": 3, "utilization": {"1": 0.9, "2": 0.12}, "slot": 1, "partner": 0},
        {"q": 4, "utilization": {"1": 0.45, "2": 0.5}, "slot": 0, "partner": 1},
    ]


def fig13_record(none: float, sc: float, *, sharp_first: bool = False,
                 ended: int = 4) -> dict[str, object]:  # fmt: skip
    """A recorded live Fig. 13 run (``trace fig13``): four jobs responding ``none`` s
    without detection and ``sc`` s with it, both over entries(); ``ended`` of the four
    jobs with detection ended by themselves."""

    def run(sc_param: str, resp: float, done: int) -> dict[str, object]:
        jobs = [{"job": j, "submit": 10.0, "end": 10.0 + resp,
                 "state": "done" if j <= done else "killed"} for j in range(1, 5)]  # fmt: skip
        return {"policy": "paired-gang", "params": {"sharp_change": sc_param},
                "host_busy_outside_cores": 0.05, "trace": entries(), "jobs": jobs}  # fmt: skip

    runs = [run("none", none, 4), run("0.2", sc, ended)]
    return {"kind": "fig13", "nodes": 2, "runs": runs[::-1] if sharp_first else runs}


def study_spec(tmp_path: Path, fig13_live: bool = False) -> Path:
    """The paired-trace spec rewritten to read CAL and a live trace of entries(); with
    ``fig13_live``, two recorded live Fig. 13 runs too (+1 % and +1.5 %)."""
    cal = tmp_path / "cal.toml"
    cal.write_text(CAL)
    jobs = [{"job": 1, "submit": 0.0, "end": 100.0, "target": 0.9},
            {"job": 2, "submit": 5.0, "end": 115.0, "target": 0.1}]  # fmt: skip
    fig3 = {
        "kind": "fig3",
        "nodes": 2,
        "gap": 6,
        "runs": [{"trace": entries(), "jobs": jobs, "params": {}}],
    }
    live = tmp_path / "fig3-live.json"
    live.write_text(json.dumps(fig3))
    text = SPEC.read_text()
    text = text.replace('calibration = "default"', f'calibration = "{cal}"')
    text = re.sub(r'(?m)^fig3_live = ".*"$', f'fig3_live = "{live}"', text)
    text = re.sub(r"(?ms)^fig13_live = \[.*?\]\n", "", text)
    if fig13_live:
        paths = []
        for k, (a, b) in enumerate(((200.0, 202.0), (200.0, 203.0)), 1):
            path = tmp_path / f"fig13-live-{k}.json"
            path.write_text(json.dumps(fig13_record(a, b, sharp_first=k == 2)))
            paths.append(f'"{path}"')
        text = text.replace("[study]\n", f"[study]\nfig13_live = [{', '.join(paths)}]\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    return spec
