"""What tests/unit/testbed/experiment/paired/test_report.py
and tests/live/testbed/experiment/paired/test_report.py share."""

from __future__ import annotations

from testbed.experiment.paired.run import (
    ExperimentResult,
    JobResult,
    RunResult,
)

CONFIGS = ("gang", "paired-fig4", "paired-fig4-prose", "paired-best-fit")


# mix 1 rates (compute, io) per config
MIX1 = {
    "gang": (2.0, 5.0),
    "paired-fig4": (1.9, 10.0),
    "paired-fig4-prose": (1.95, 16.0),
    "paired-best-fit": (1.7, 18.0),
}


def _run(config: str, mix: int, nodes: int = 2) -> RunResult:
    compute, io = MIX1[config] if mix == 1 else (2.0, 5.0)
    jobs = []
    for i in range(4):
        kind = "compute" if i < 4 - mix else "io"
        rate = compute if kind == "compute" else io
        jobs.append(JobResult(i + 1, f"{kind}{i}", kind, i, "done", 30, rate, 0.2, [0.2, 0.21]))
    partner = {3: 0.75, 0: 0.08} if config != "gang" and mix == 1 else {}
    return RunResult(
        config=config,
        mix=mix,
        jobs=jobs,
        quanta=75,
        skew_p50_s=0.0005,
        skew_p99_s=0.002,
        matching_success_ratio=None if config == "gang" else 0.8,
        slot_partner_ratio=partner,
        wall_seconds=16.0,
        rows=4,
        other_cores=0.03,
    )


def _result(nodes: int = 2, mech: str = "cpuset", cpus: float = 1.0) -> ExperimentResult:
    spec = {
        "name": "t",
        "nodes": nodes,
        "link": "myrinet",
        "cpus_per_node": cpus,
        "cpu_mechanism": mech,
        "quantum": 0.2,
        "duration": 15.0,
        "compute": {
            "gcomp": 600000,
            "gio": 0,
            "nbytes": 8193,
            "device_latency": 0.0,
            "wait": "block",
        },
        "io": {"gcomp": 0, "gio": 8, "nbytes": 8193, "device_latency": 0.005, "wait": "block"},
    }
    cluster = {"nodes": [f"n{i}" for i in range(nodes)], "cpu": {"mechanism": mech}}
    runs = [_run(c, m, nodes) for c in CONFIGS for m in (0, 1, 4)]
    return ExperimentResult(spec=spec, cluster=cluster, runs=runs)
