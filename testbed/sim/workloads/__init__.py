"""Workloads for the discrete-event simulator: SWF traces, the Lublin-Feitelson
model, synthetic mixes and profiles (seed 000), load scaling and TOML specs."""

from testbed.sim.workloads.load import offered_load, scale_time, scale_to_load
from testbed.sim.workloads.lublin import generate_lublin, generate_lublin_arrays
from testbed.sim.workloads.spec import (
    WorkloadError,
    WorkloadInfo,
    WorkloadSpec,
    build_workload,
    load_workload_spec,
    resolve_workload,
)
from testbed.sim.workloads.swf import SwfError, SwfHeader, SwfResult, read_swf, write_swf
from testbed.sim.workloads.synthetic import (
    PROFILES,
    apply_profile,
    io_compute_mix,
    qcrd_phases,
    set_barrier,
)

__all__ = [
    "PROFILES",
    "SwfError",
    "SwfHeader",
    "SwfResult",
    "WorkloadError",
    "WorkloadInfo",
    "WorkloadSpec",
    "apply_profile",
    "build_workload",
    "generate_lublin",
    "generate_lublin_arrays",
    "io_compute_mix",
    "load_workload_spec",
    "offered_load",
    "qcrd_phases",
    "read_swf",
    "resolve_workload",
    "scale_time",
    "scale_to_load",
    "set_barrier",
    "write_swf",
]
