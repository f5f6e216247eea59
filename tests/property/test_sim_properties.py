"""Every registered policy, driven by the real engine, on random workloads.

Properties: every job that fits completes; nobody starts before it arrives;
no job finishes faster than on a dedicated machine; batch policies never use
more nodes than exist at any instant; the same workload gives the same result.
The space-sharing (cdc) policies run at MPL 1, where they are batch policies;
above it the simulator has no model of them (it refuses).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.policies.registry import REGISTRY, make_policy
from testbed.sim.engine import simulate
from testbed.sim.job import Phase, SimJob
from testbed.sim.results import SimConfig

NODES = 8


@st.composite
def workloads(draw: st.DrawFn) -> list[SimJob]:
    n = draw(st.integers(1, 14))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.5]))
        size = draw(st.integers(1, NODES + 1))  # sometimes too large: must be rejected
        runtime = draw(st.sampled_from([0.5, 1.0, 2.0, 4.0, 9.0]))
        over = draw(st.sampled_from([1.0, 1.0, 1.5, 3.0]))
        cpu = draw(st.sampled_from([1.0, 0.1, 0.45, 0.8]))
        jobs.append(SimJob(i + 1, t, size, runtime, runtime * over, phases=(Phase(1.0, cpu),)))
    return jobs


def _params(name: str) -> dict[str, object]:
    return {"mpl": 1} if REGISTRY[name].family == "cdc" else {}


def _check(jobs: list[SimJob], name: str, mode: str) -> None:
    policy = make_policy(name, NODES, _params(name))
    res = simulate(jobs, policy, SimConfig(nodes=NODES, quantum=0.5, mode=mode))
    rejected = {j for j, _ in res.rejected}
    assert rejected == {j.job_id for j in jobs if j.size > NODES}
    intervals = []
    for k, job in enumerate(res.jobs):
        if job.job_id in rejected:
            assert math.isnan(res.end[k])
            continue
        start, end = res.start[k], res.end[k]
        assert not math.isnan(end), f"{name}: job {job.job_id} never completed"
        assert start >= job.submit - 1e-9
        assert end - start >= job.runtime - 1e-6
        intervals.append((start, end, job.size))
    if REGISTRY[name].family in ("batch", "cdc"):
        # batch jobs run exactly their run time and never overlap beyond capacity
        for s, _end, _ in intervals:
            in_use = sum(sz for s2, e2, sz in intervals if s2 <= s < e2)
            assert in_use <= NODES, f"{name}: {in_use} nodes in use at t={s}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_batch_policies_complete_everything(jobs: list[SimJob]) -> None:
    for name, entry in REGISTRY.items():
        if entry.family in ("batch", "cdc"):
            _check(jobs, name, "exact")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(["exact", "fluid"]))
def test_gang_policies_complete_everything(jobs: list[SimJob], mode: str) -> None:
    for name, entry in REGISTRY.items():
        if entry.family == "gang":
            _check(jobs, name, mode)


# one item per policy: the live tier's two workers share them (scripts/test.sh)
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_same_workload_same_result(name: str) -> None:
    from testbed.sim.workloads.lublin import generate_lublin
    from testbed.sim.workloads.synthetic import apply_profile

    jobs = apply_profile(generate_lublin(150, 16, seed=3), "heterogeneous", seed=3)
    # Lublin's tail (one job of 44 h) only lengthens the run: capped at 30 min, up to 9
    # jobs still share the machine and every policy's two runs cost ~1 s, not ~10-20 s
    jobs = [replace(j, runtime=min(j.runtime, 1800.0), estimate=min(j.estimate, 1800.0))
            for j in jobs]  # fmt: skip
    a = simulate(jobs, make_policy(name, 16, _params(name)), SimConfig(nodes=16))
    b = simulate(jobs, make_policy(name, 16, _params(name)), SimConfig(nodes=16))
    assert list(a.end) == list(b.end), name


def test_the_simulator_refuses_time_shared_space_sharing() -> None:
    with pytest.raises(ValueError, match="no execution model for space sharing at MPL 5"):
        simulate([], make_policy("cc-b", NODES), SimConfig(nodes=NODES))
