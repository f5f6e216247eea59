"""Synthetic mixes and profiles (Wiseman & Feitelson 2003) and load scaling (synthetic.py,
load.py)."""

from __future__ import annotations

import math

import pytest

from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob
from testbed.sim.workloads.load import offered_load, scale_time, scale_to_load
from testbed.sim.workloads.lublin import generate_lublin
from testbed.sim.workloads.synthetic import (
    HETEROGENEOUS_BARRIER_COST,
    HOMOGENEOUS_BARRIER,
    apply_profile,
    io_compute_mix,
    qcrd_phases,
    set_barrier,
)


@pytest.mark.parametrize("i", range(5))
def test_io_compute_mix(i: int) -> None:
    jobs = io_compute_mix(i, 8, runtime=100.0)
    assert len(jobs) == 4
    assert all(j.size == 8 and j.submit == 0.0 for j in jobs)
    cpus = [j.phases[0].cpu for j in jobs]
    assert cpus == [0.95] * (4 - i) + [0.0] * i  # compute jobs take the lower slots
    assert all(j.barrier == pytest.approx(100.0 / 250) for j in jobs)
    assert len({j.job_id for j in jobs}) == 4


def test_io_compute_mix_parameters_and_errors() -> None:
    jobs = io_compute_mix(2, 4, runtime=50, io_cpu=0.1, compute_cpu=0.9, barriers=10)
    assert [j.phases[0].cpu for j in jobs] == [0.9, 0.9, 0.1, 0.1]
    assert jobs[0].barrier == 5.0
    with pytest.raises(ValueError):
        io_compute_mix(5, 8)


def test_homogeneous_profile() -> None:
    jobs = apply_profile(generate_lublin(50, 16, seed=1), "homogeneous")
    assert all(j.phases == (Phase(1.0, 0.45),) for j in jobs)
    assert all(j.barrier == HOMOGENEOUS_BARRIER for j in jobs)


def test_heterogeneous_profile_is_uniform_seeded_and_finer_when_less_cpu() -> None:
    base = generate_lublin(4000, 16, seed=1)
    a = apply_profile(base, "heterogeneous", seed=3)
    assert a == apply_profile(base, "heterogeneous", seed=3)
    assert a != apply_profile(base, "heterogeneous", seed=4)
    cpus = [j.phases[0].cpu for j in a]
    assert abs(sum(cpus) / len(cpus) - 0.5) < 0.03
    assert sum(c < 0.25 for c in cpus) / len(cpus) == pytest.approx(0.25, abs=0.03)
    for j in a:
        c = j.phases[0].cpu
        want = min(HETEROGENEOUS_BARRIER_COST / (1 - c), j.runtime)
        assert j.barrier == pytest.approx(want)
    # Job fields other than the profile are untouched.
    assert [(j.job_id, j.size, j.runtime) for j in a] == [
        (j.job_id, j.size, j.runtime) for j in base
    ]


def test_qcrd_phases() -> None:
    ph = qcrd_phases()
    assert len(ph) == 25
    assert math.isclose(sum(p.fraction for p in ph), 1.0, abs_tol=1e-12)
    io, cpu = ph[0::2], ph[1::2]
    assert all(p.cpu < 0.5 for p in io) and all(p.cpu > 0.5 for p in cpu)
    assert len(cpu) == 12 and len(io) == 13
    assert all(c.fraction > i.fraction for c, i in zip(cpu, io[:12], strict=True))
    assert io[-1].fraction > cpu[0].fraction  # relatively long final I/O phase


def test_qcrd_profile_scales_with_each_job() -> None:
    jobs = apply_profile(
        [SimJob(job_id=1, submit=0, size=2, runtime=1000, estimate=1000),
         SimJob(job_id=2, submit=0, size=2, runtime=10, estimate=10)],
        "qcrd",
    )  # fmt: skip
    for j in jobs:
        assert j.cpu_at(0.0) < 0.5  # starts in I/O
        assert j.cpu_at(0.02 * j.runtime) > 0.5  # then computes
        assert j.cpu_at(0.95 * j.runtime) < 0.5  # ends in I/O


def test_compute_profile_and_unknown_profile() -> None:
    jobs = apply_profile(apply_profile(generate_lublin(5, 8), "homogeneous"), "compute")
    assert all(j.phases == COMPUTE_BOUND for j in jobs)
    with pytest.raises(ValueError, match="unknown profile"):
        apply_profile(jobs, "bursty")


def test_set_barrier() -> None:
    jobs = generate_lublin(20, 8, seed=2)
    assert all(j.barrier == 0.5 for j in set_barrier(jobs, interval=0.5))
    per = set_barrier(jobs, count=100)
    assert all(j.barrier == pytest.approx(j.runtime / 100) for j in per)
    with pytest.raises(ValueError):
        set_barrier(jobs)
    with pytest.raises(ValueError):
        set_barrier(jobs, interval=1.0, count=3)


# --- load.py -------------------------------------------------------------------


def test_offered_load_formula() -> None:
    jobs = [
        SimJob(job_id=1, submit=0, size=2, runtime=10, estimate=10),
        SimJob(job_id=2, submit=50, size=4, runtime=5, estimate=5),
        SimJob(job_id=3, submit=100, size=1, runtime=20, estimate=20),
    ]
    # (2*10 + 4*5 + 1*20) / (4 nodes * 100 s) = 60 / 400
    assert offered_load(jobs, 4) == pytest.approx(0.15)
    assert offered_load(io_compute_mix(2, 8), 8) == math.inf


@pytest.mark.parametrize("target", [0.3, 0.5, 0.8, 0.95, 1.2])
def test_scale_to_load_hits_target(target: float) -> None:
    jobs = generate_lublin(1000, 16, seed=1)
    scaled = scale_to_load(jobs, 16, target)
    assert abs(offered_load(scaled, 16) - target) <= 0.01 * target
    assert [(j.size, j.runtime, j.job_id) for j in scaled] == [
        (j.size, j.runtime, j.job_id) for j in jobs
    ]
    assert scaled[0].submit == jobs[0].submit
    # Inter-arrival gaps are all multiplied by one factor.
    ratios = [
        (b.submit - a.submit) / (y.submit - x.submit)
        for a, b, x, y in zip(scaled, scaled[1:], jobs, jobs[1:], strict=False)
        if y.submit > x.submit
    ]
    assert max(ratios) - min(ratios) < 1e-9 * max(ratios)


def test_scale_to_load_rejects_degenerate_input() -> None:
    with pytest.raises(ValueError):
        scale_to_load(io_compute_mix(1, 8), 8, 0.5)
    with pytest.raises(ValueError):
        scale_to_load(generate_lublin(10, 8), 8, 0.0)


def test_scale_time_keeps_load() -> None:
    jobs = apply_profile(generate_lublin(300, 16, seed=6), "homogeneous")
    small = scale_time(jobs, 1 / 40)
    assert offered_load(small, 16) == pytest.approx(offered_load(jobs, 16))
    assert small[5].runtime == pytest.approx(jobs[5].runtime / 40)
    assert small[5].barrier == pytest.approx(jobs[5].barrier / 40)
