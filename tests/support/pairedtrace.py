"""Shared by the paired-trace tests: a calibration with the alone runs job_types()
reads, and a four-quantum trace."""

from __future__ import annotations

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
