"""Wiseman & Feitelson 2003 §4.1 (Figs. 7 and 8) in the simulator, calibrated from the live
cluster: the simulated counterpart of the live mixes (issue 25).

Mix ``i`` has ``4 - i`` compute-bound and ``i`` I/O-bound jobs of the synthetic program,
each as wide as the cluster, all started at once and measured while all run. Each job
type is what ``cosched calibrate`` measured of it alone on the live cluster
(experiments/calibration.toml, ``[measured.alone]``): its barriers per second ``R``, its
CPU share ``u``, and its share of the node's I/O device ``d = G_IO x device latency x R``
(the time its barrier's writes occupy the disk). Sharing a node costs the interference
measured for a compute job beside an I/O job (``[measured.derived]``), and the device
term makes two I/O jobs on one node queue at its disk (testbed/sim/execution.py). A
job's barriers per second in the mix = ``R x`` the dedicated seconds it progressed per
second of the run.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.sweep import RunSpec

STUDY = "paired-mixes-sim"
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "gang": ("gang", {}),
    "paired-fig4": ("paired-gang", {"matching": "fig4"}),
    "paired-fig4-prose": ("paired-gang", {"matching": "fig4-prose"}),
    "paired-best-fit": ("paired-gang", {"matching": "best-fit"}),
}


def job_types(
    calibration: Path, io_files: int, io_latency: float, sharing: str = "compute_io"
) -> dict[str, Any]:
    """Each job type's alone figures from a calibration file, and the interference."""
    doc = tomllib.loads(calibration.read_text())
    m = doc["measured"]
    alone = m["alone"]
    out: dict[str, Any] = {}
    for kind in ("compute", "io"):
        rate = float(alone[kind][f"{kind}_rate"]["mean"])
        cpu = float(alone[kind][f"{kind}_cpu"]["mean"])
        device = min(1.0, io_files * io_latency * rate) if kind == "io" else 0.0
        out[kind] = {"rate": rate, "cpu": min(1.0, cpu), "device": device}
    d = m["derived"]
    out["interference"] = max(0.0, float(d.get(f"interference_{sharing}", 0.0)))
    out["source"] = str(calibration)
    return out


def simulate_mix(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One mix under one configuration for ``duration`` seconds (a sweep run)."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate
    from testbed.sim.job import Phase, SimJob
    from testbed.sim.results import EARLY_END, FULL, SimConfig

    mix, nodes, duration = int(params["mix"]), int(params["nodes"]), float(params["duration"])
    types = params["types"]
    policy_name, pparams = CONFIGS[str(params["config"])]
    policy = make_policy(policy_name, nodes, parse_params(lookup(policy_name), dict(pparams)))
    kinds = ["compute"] * (4 - mix) + ["io"] * mix
    jobs = [
        SimJob(
            k + 1, 0.0, nodes, duration * 10, duration * 10,
            phases=(Phase(1.0, types[kind]["cpu"], types[kind]["device"]),),
        )
        for k, kind in enumerate(kinds)
    ]  # fmt: skip
    cfg = SimConfig(
        nodes=nodes,
        quantum=float(params["quantum"]),
        interference=float(types["interference"]),
        occupancy=FULL if params.get("full", True) else EARLY_END,
        device=bool(params.get("device", True)),
    )
    res = simulate(jobs, policy, cfg, until=duration)
    rates: dict[str, list[float]] = {}
    for job, done in zip(res.jobs, res.done, strict=True):
        kind = kinds[job.job_id - 1]
        rates.setdefault(kind, []).append(types[kind]["rate"] * done / duration)
    m = res.matching
    partner = {str(s): v / m.quanta for s, v in m.slot_partner.items()} if m and m.quanta else {}
    return {
        "config": params["config"],
        "mix": mix,
        "nodes": nodes,
        "device": bool(params.get("device", True)),
        "rates": {k: sum(v) / len(v) for k, v in rates.items()},
        "slot_partner": partner,
        "matching": (m.matched / m.quanta) if m and m.quanta else None,
    }


def plan(
    types: Mapping[str, Any],
    *,
    mixes: tuple[int, ...] = (0, 1, 2, 3, 4),
    configs: tuple[str, ...] = ("gang", "paired-fig4-prose", "paired-best-fit"),
    nodes: int = 2,
    quantum: float = 1.0,
    duration: float = 40.0,
    device: bool = True,
) -> list[RunSpec]:
    return [
        RunSpec(
            STUDY,
            {
                "mix": mix,
                "config": config,
                "nodes": nodes,
                "quantum": quantum,
                "duration": duration,
                "device": device,
                "types": dict(types),
            },
            0,
            simulate_mix,
        )
        for config in configs
        for mix in mixes
    ]
