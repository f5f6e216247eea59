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


# ---------------------------------------------------------------- the resident-cost study


def test_resident_costs_run_are_zero_measured_multiples_and_absolute() -> None:
    from testbed.experiment.pairedscale import resident

    got = resident.costs_to_run(0.002, [3, 10], [0.01, 0.02])
    assert [c for c, _ in got] == pytest.approx([0.0, 0.002, 0.006, 0.01, 0.02])
    labels = dict(got)
    assert labels[0.002] == "measured" and labels[0.01] == "what-if"
    assert labels[0.02] == "10 × measured (what-if)"  # asked twice, run once
    # a measured cost of 0: its multiples are 0 too, run once
    assert [c for c, _ in resident.costs_to_run(0.0, [3], [])] == [0.0]


def test_unfinished_jobs_respond_at_the_stop() -> None:
    from testbed.experiment.pairedscale import resident

    mean, left = resident.mean_response_until([0.0, 10.0], [5.0, float("nan")], 30.0)
    assert (mean, left) == (pytest.approx((5.0 + 20.0) / 2), 1)


def test_the_resident_spec_and_its_quick_variant(tmp_path: Path) -> None:
    p = tmp_path / "res.toml"
    p.write_text('kind = "paired-resident"\n[study]\nseeds = [1, 2]\ncosts = [1.5]\n')
    with pytest.raises(SpecError, match="costs"):
        registry.load(p)
    p.write_text('kind = "paired-resident"\n[study]\nseeds = [1, 2]\ncosts = [0.05]\n')
    st, spec = registry.load(p)
    assert spec["loads"] == [0.5, 0.95] and spec["horizon_h"] == 12.0
    q = st.quick(spec)
    assert q["seeds"] == [1] and q["loads"] == [0.95] and q["costs"] == [0.05]
