"""Issue 11: a very short `cosched calibrate` on a real 2-node cluster (root; skips otherwise).

It brings the cluster up itself (dedicated core per node where the host has
two), runs every measurement three times for 1 s (five quanta of 0.2 s), and
checks the file's shape and that the figures are sane *relative to each
other*: never an absolute figure, which depends on the host.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from testbed.experiment.execmodel.calibrate import CalibrationConfig, run_calibration, to_toml


def test_short_calibration_on_a_real_cluster(root_cluster_env: Path, tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    cpu = (1.0, "cpuset") if cores >= 2 else (0.5, "shared")
    cfg = CalibrationConfig(
        nodes=2,
        cpus_per_node=cpu[0],
        cpu_mechanism=cpu[1],
        duration=1.0,  # 5 quanta: strict gang's two jobs still alternate 2-3 times each
        repeats=3,
        quiet_limit=100.0,  # never wait: a test must not hang on a busy host
        quiet_window=0.2,  # and read the load briefly (2 s before each of 18 runs: 36 s)
        sizes=(),  # the costs by gang size (--only sizes) are measured apart
    )
    lines: list[str] = []
    cal = run_calibration(cfg, say=lines.append)
    assert any("[18/18]" in line for line in lines)  # 6 measurements x 3 repeats, each said

    doc = tomllib.loads(to_toml(cal))
    assert set(doc) == {"model", "measured", "host"}
    model = doc["model"]
    assert set(model) == {"quantum", "interference", "context_switch", "fine_grain_utilization"}
    assert model["quantum"] == cfg.quantum
    assert 0.0 <= model["interference"] < 1.0
    assert 0.0 <= model["context_switch"] < cfg.quantum
    m = doc["measured"]
    for mode, pair in (("alone", "fine"), ("paired", "fine_fine"), ("gang", "compute_compute")):
        assert len(m[mode][pair][f"{pair.split('_')[0]}_rate"]["values"]) == 3
    assert doc["host"]["nodes"] == 2 and doc["host"]["cosched_commit"]

    alone = {k: m["alone"][k][f"{k}_rate"]["mean"] for k in ("compute", "io", "fine")}
    cpu_alone = {k: m["alone"][k][f"{k}_cpu"]["mean"] for k in ("compute", "io", "fine")}
    # Rates measured minutes apart on a host others may use: these catch a
    # mixed-up measurement (pairing never makes a job half again faster than
    # alone; strict gang with two jobs runs each about half the quanta), not noise.
    assert m["paired"]["fine_fine"]["fine_rate"]["mean"] <= 1.5 * alone["fine"]
    assert m["paired"]["compute_io"]["compute_rate"]["mean"] <= 1.5 * alone["compute"]
    assert m["gang"]["compute_compute"]["compute_rate"]["mean"] < 0.9 * alone["compute"]
    # the job types are what they claim: compute-bound > fine-grain > I/O-bound
    assert cpu_alone["compute"] > cpu_alone["fine"] > cpu_alone["io"]
    assert model["fine_grain_utilization"] == pytest.approx(cpu_alone["fine"], abs=1e-6)
    out = tmp_path / "calibration.toml"
    out.write_text(to_toml(cal))
    assert tomllib.loads(out.read_text())["model"] == model
