"""Workloads for the discrete-event simulator: SWF traces, the Lublin-Feitelson
model, synthetic mixes and profiles (Wiseman & Feitelson 2003), load scaling and TOML specs.

The names below are imported on first use (PEP 562), not with the package:
the Lublin model needs numpy, which `cosched simulate` on an SWF trace never
uses (issue 11: start-up time). Import from the submodules in new code.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "offered_load": "load",
    "scale_time": "load",
    "scale_to_load": "load",
    "generate_lublin": "lublin",
    "generate_lublin_arrays": "lublin",
    "WorkloadError": "spec",
    "WorkloadInfo": "spec",
    "WorkloadSpec": "spec",
    "build_workload": "spec",
    "load_workload_spec": "spec",
    "resolve_workload": "spec",
    "SwfError": "swf",
    "SwfHeader": "swf",
    "SwfResult": "swf",
    "read_swf": "swf",
    "write_swf": "swf",
    "PROFILES": "synthetic",
    "apply_profile": "synthetic",
    "io_compute_mix": "synthetic",
    "qcrd_phases": "synthetic",
    "set_barrier": "synthetic",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
