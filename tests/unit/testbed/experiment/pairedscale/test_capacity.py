"""The capacity study's pure parts (testbed/experiment/pairedscale/capacity.py): work
served per node-second from a backlog series, the what-if's slowed jobs, where a ratio
curve crosses the paper's figure, the control's exponential run times and the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import registry
from testbed.experiment.fields import SpecError
from testbed.experiment.pairedscale import capacity, study
from testbed.sim.job import SimJob


def test_served_work_is_arrivals_plus_the_backlogs_fall() -> None:
    # 2 nodes; 10 node-s waiting at t=0, 6 more arrive at t=2, 4 left at t=4: served 12
    t, w = [0.0, 1.0, 2.0, 3.0, 4.0], [10.0, 8.0, 12.0, 8.0, 4.0]
    arrivals = [(0.0, 10.0), (2.0, 6.0)]
    assert capacity.served_per_node_second(t, w, arrivals, 0.0, 4.0, 2) == pytest.approx(1.5)
    # the arrival at t0 itself is in the backlog at t0, not counted twice
    assert capacity.served_per_node_second(t, w, arrivals, 2.0, 4.0, 2) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="t1 > t0"):
        capacity.served_per_node_second(t, w, arrivals, 4.0, 4.0, 2)


def test_a_policy_at_capacity_c_runs_each_job_1_over_c_as_long() -> None:
    jobs = [SimJob(1, 0.0, 2, 3.0, 3.0), SimJob(2, 1.0, 1, 0.5, 0.5)]
    assert capacity.slowed(jobs, 1.0) == jobs
    half = capacity.slowed(jobs, 0.5)
    assert [j.runtime for j in half] == [6.0, 1.0]
    assert [(j.submit, j.size) for j in half] == [(0.0, 2), (1.0, 1)]
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        capacity.slowed(jobs, 1.5)


def test_crossing_interpolates_where_the_ratio_reaches_the_target() -> None:
    cs, ratios = [1.0, 0.8, 0.6], [2.0, 4.0, 8.0]
    assert capacity.crossing(cs, ratios, 6.0) == pytest.approx(0.7)
    assert capacity.crossing(cs, ratios, 2.0) == 1.0
    assert capacity.crossing(cs, ratios, 8.0) == 0.6
    assert capacity.crossing(cs, ratios, 9.0) is None


def test_exponential_runtimes_keep_sizes_arrivals_and_are_seeded() -> None:
    jobs = [SimJob(i, float(i), 1 + i % 4, 1.0 + 10.0 * (i % 3), 5.0) for i in range(1, 400)]
    a = study.exponential_runtimes(jobs, 3)
    assert a == study.exponential_runtimes(jobs, 3)
    assert a != study.exponential_runtimes(jobs, 4)
    assert [(j.submit, j.size) for j in a] == [(j.submit, j.size) for j in jobs]
    mean = sum(j.runtime for j in jobs) / len(jobs)
    got = sum(j.runtime for j in a) / len(a)
    assert 0.8 * mean < got < 1.2 * mean  # 399 draws: the mean within 20 %
    assert all(j.estimate == j.runtime > 0 for j in a)


def test_the_spec_needs_capacity_1_and_known_streams(tmp_path: Path) -> None:
    p = tmp_path / "cap.toml"
    base = 'kind = "paired-capacity"\n[study]\nseeds = [1]\n'
    p.write_text(base + "capacities = [0.8, 0.6]\n")
    with pytest.raises(SpecError, match=r"include 1\.0"):
        registry.load(p)
    p.write_text(base + 'streams = ["poisson"]\n')
    with pytest.raises(SpecError, match="streams"):
        registry.load(p)
    p.write_text(base + "capacities = [1, 0.5]\n[quick]\nseeds = [2]\n")
    st, spec = registry.load(p)
    assert spec["capacities"] == [1.0, 0.5] and st.quick(spec)["seeds"] == [2]
    assert len(capacity.plan(spec)) == 13 + 2 * (1 + 2)  # overload; per load paired + 2 c
