"""Issue 11, item 5: the simulator-vs-live validation's quick mode on a real cluster (root).

It brings a 2-node cluster up itself (a dedicated core per node where the host
has two), measures the job's dedicated rate, runs the quick stream live under
strict and paired gang, simulates the same jobs and writes the report. It
checks the report's structure and that every job ended -- never an absolute
timing, which depends on the host; the only figures checked are relative
(a job cannot finish in much less than its dedicated time).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from testbed.experiment.simvslive import report as vr
from testbed.experiment.simvslive.study import load_spec, read_result, run_validation

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.root
@pytest.mark.slow
def test_quick_validation_on_a_real_cluster(root_cluster_env: Path, tmp_path: Path) -> None:
    spec = load_spec(REPO / "experiments" / "sim-vs-live.toml").quick_version()
    spec = replace(spec, quiet_limit=0.0)  # never wait for a quiet host: a test must not hang
    if len(os.sched_getaffinity(0)) < 2:  # no second core to dedicate: share one
        spec = replace(spec, cpus_per_node=0.5, cpu_mechanism="shared")
    lines: list[str] = []
    result = run_validation(spec, tmp_path, quick=True, say=lines.append)
    assert any("[2/2]" in line for line in lines), lines

    # every job of every live run was submitted and ended normally
    assert {(r.policy, r.load) for r in result.live} == {(p, spec.loads[0]) for p in spec.policies}
    for run in result.live:
        assert len(run.jobs) == spec.jobs and run.killed == 0
        assert all(j.state == "done" for j in run.jobs), [(j.index, j.state) for j in run.jobs]
        assert run.quanta > 0 and run.rows
        for j in run.jobs:
            # not compared with dedicated_s: that is the planned time, and a short
            # job on a host that is quieter than when the rate was measured ends sooner
            assert j.response_s is not None and j.response_s > 0
            assert j.barriers == j.iterations  # the work was fixed: every iteration ran
    paired = next(r for r in result.live if r.policy == "paired-gang")
    assert paired.matching_success_ratio is not None

    # the dedicated measurement: both sizes, a fine-grain share of the CPU
    assert result.rates is not None and set(result.rates.sizes) == {1, 2}
    for s in result.rates.sizes.values():
        assert s.rate > 0 and s.overhead_s >= 0 and 0.1 < s.cpu_share < 0.9

    # every variant simulated every run, every simulated job ended
    assert len(result.sim) == len(spec.sims) * len(result.live)
    assert all(j.end_s is not None for s in result.sim for j in s.jobs)

    # saved, and the report has its table and verdict
    saved = read_result(tmp_path / "results.json")
    assert saved.to_json() == result.to_json()
    assert json.loads((tmp_path / "results.json").read_text())["meta"]["quick"] is True
    written = vr.write_report(saved, tmp_path)
    assert {p.name for p in written} == {"report.md", "summary.png", "scatter.png", "series.png"}
    md = (tmp_path / "report.md").read_text()
    for policy in spec.policies:
        assert f"| {policy} | {spec.loads[0]:g} | {spec.jobs} |" in md
    assert "**Target**" in md
    comps = vr.compare(saved)
    assert len(comps) == 2 and all(c.live.jobs == spec.jobs for c in comps)
