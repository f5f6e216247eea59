"""Simulator vs live (testbed/experiment/simvslive/: study.py, report.py): the pure parts.

The stream mapping, the load scaling, the dedicated-rate arithmetic, the spec's
checks, the saved result's round trip, the simulated side on hand-made runs
(the real engine), and the comparison table and verdict on runs whose figures
are known. The live side runs in tests/integration/test_studies_live.py.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path

import pytest

from testbed.cli import main as cli
from testbed.experiment.fields import SpecError
from testbed.experiment.harness import LiveError
from testbed.experiment.simvslive import report as vr
from testbed.experiment.simvslive.study import (
    Rates,
    SimVariant,
    ValidationResult,
    blend,
    job_argv,
    make_stream,
    map_runtimes,
    map_size,
    next_gcomp,
    plan_jobs,
    rate_sensitivity,
    run_sim,
    sensitivity_lines,
    simulate_all,
    split_overhead,
)
from testbed.experiment.simvslive.study import read_spec as load_spec
from testbed.sim.job import SimJob
from testbed.sim.workloads.load import offered_load
from tests.support.simvslive import SPEC, _rates, _result, _run

# ---- the stream --------------------------------------------------------------------------------


def test_serial_stays_serial_and_parallel_stays_parallel_on_two_nodes() -> None:
    assert map_size(1, 2) == 1
    assert [map_size(s, 2) for s in (2, 3, 4, 8, 9, 16)] == [2] * 6


def test_size_map_is_proportional_where_the_machine_allows() -> None:
    # 4 nodes: s of 16 -> ceil(s / 4), but a parallel job keeps >= 2 processes
    assert [map_size(s, 4) for s in (1, 2, 4, 5, 8, 12, 13, 16)] == [1, 2, 2, 2, 2, 3, 4, 4]
    assert map_size(128, 4, paper_nodes=128) == 4
    assert map_size(3, 1) == 1  # a 1-node machine: everything serial
    with pytest.raises(ValueError):
        map_size(0, 2)


def test_runtime_map_keeps_the_order_and_hits_the_mean() -> None:
    raw = [3.0, 12.0, 40.0, 900.0, 30_000.0, 0.0]
    out = map_runtimes(raw, 0.35, 2.5, 0.01, 1e6)
    values = [r for r, _ in out]
    assert not any(c for _, c in out)
    assert statistics.fmean(values) == pytest.approx(2.5)
    # rank kept; a 0 s Lublin job counts as 1 s, the shortest
    assert sorted(range(6), key=lambda k: values[k]) == [5, 0, 1, 2, 3, 4]
    # on the log scale the spread shrinks by the power
    assert math.log(values[4] / values[0]) == pytest.approx(0.35 * math.log(30_000 / 3))


def test_runtime_map_power_one_is_a_linear_scale_and_clips_are_flagged() -> None:
    lin = map_runtimes([1.0, 3.0], 1.0, 2.0, 0.1, 100.0)
    assert [r for r, _ in lin] == pytest.approx([1.0, 3.0])
    clipped = map_runtimes([1.0, 1000.0], 1.0, 10.0, 0.5, 15.0)
    assert clipped[0] == (0.5, True)  # 0.02 -> 0.5
    assert clipped[1] == (15.0, True)  # 19.98 -> 15
    assert map_runtimes([], 0.5, 1.0, 0.1, 1.0) == []
    with pytest.raises(ValueError):
        map_runtimes([1.0], 0.0, 1.0, 0.1, 1.0)


def test_the_committed_stream_is_seeded_and_mapped() -> None:
    spec = load_spec(SPEC)
    a, b = make_stream(spec), make_stream(spec)
    assert a == b and len(a) == spec.jobs
    assert {e.size for e in a} <= set(range(1, spec.nodes + 1))
    assert all((e.size == 1) == (e.lublin_size == 1) for e in a)
    assert sum(e.size == 2 for e in a) > len(a) // 2  # mostly gangs
    unclipped = [e.runtime for e in a if not e.clipped]
    assert len(unclipped) == len(a)  # seed 1 needs no clip
    assert statistics.fmean(unclipped) == pytest.approx(spec.mean_runtime)
    assert [e.lublin_submit for e in a] == sorted(e.lublin_submit for e in a)


# ---- dedicated rates and the plan -------------------------------------------------------------


def test_rates_average_the_repeats_and_split_off_the_overhead() -> None:
    r = _rates()
    one, two = r.sizes[1], r.sizes[2]
    assert one.rate == 200.0 and one.cpu_share == pytest.approx(0.47)
    assert one.overhead_s == pytest.approx(0.35)  # 2.35 s - 400 / 200
    assert two.overhead_s == pytest.approx(0.30)  # 2.80 - 400 / 160
    assert one.iterations(2.35) == 400 and one.dedicated(400) == pytest.approx(2.35)
    assert one.iterations(0.1) == 1  # never less than one iteration
    assert Rates.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_each_run_is_simulated_with_the_rates_measured_around_it() -> None:
    res = _result({"gang": 1.0, "paired-gang": 1.0})
    first = res.live[0]
    assert res.rates is not None
    assert res.run_rates(first) == res.rates.sizes  # nothing measured after it yet
    faster = _rates()
    for r in faster.sizes.values():
        r.rate *= 1.5
        r.overhead_s += 0.1
    first.rates_after = faster
    blended = res.run_rates(first)
    assert blended[1].rate == pytest.approx(250.0)  # (200 + 300) / 2
    assert blended[1].overhead_s == pytest.approx(0.40)
    assert len(blended[1].samples) == 4
    # the next run starts from what was measured after the first; nothing after it
    assert res.run_rates(res.live[1])[1].rate == pytest.approx(300.0)
    assert blend(_rates(), None) == _rates().sizes


@pytest.mark.parametrize("load", [0.5, 0.8])
def test_plan_meets_the_load_with_the_dedicated_times(load: float) -> None:
    spec = load_spec(SPEC)
    stream = make_stream(spec)
    rates = _rates()
    plan = plan_jobs(stream, rates, spec.nodes, load)
    assert plan[0].arrival_s == 0.0
    assert [p.index for p in sorted(plan, key=lambda p: p.arrival_s)] == list(range(len(plan)))
    for p, e in zip(plan, stream, strict=True):
        r = rates.sizes[e.size]
        assert p.iterations == max(1, round((e.runtime - r.overhead_s) * r.rate))
        assert p.dedicated_s == pytest.approx(r.overhead_s + p.iterations / r.rate)
    jobs = [SimJob(p.index + 1, p.arrival_s, p.size, p.dedicated_s, p.dedicated_s) for p in plan]
    assert offered_load(jobs, spec.nodes) == pytest.approx(load)
    # gaps keep Lublin's proportions: only stretched
    g_plan = [b.arrival_s - a.arrival_s for a, b in itertools.pairwise(plan)]
    g_lub = [b.lublin_submit - a.lublin_submit for a, b in itertools.pairwise(stream)]
    k = max(range(len(g_lub)), key=lambda i: g_lub[i])
    assert [x / g_plan[k] for x in g_plan] == pytest.approx([x / g_lub[k] for x in g_lub])


def test_next_gcomp_solves_the_share_for_the_compute_part() -> None:
    # 3 ms of compute beside 2 ms of waiting: 60 %; 45 % needs 2 ms * 0.45 / 0.55
    g = next_gcomp(30_000, 0.60, 0.45)
    assert g == round(30_000 * (0.45 / 0.55) * (0.40 / 0.60))
    c = 3.0 * g / 30_000
    assert c / (c + 2.0) == pytest.approx(0.45, abs=1e-4)
    assert next_gcomp(1000, 0.45, 0.45) == 1000
    assert next_gcomp(1000, 0.999, 0.45) == 250  # at most 4x per round
    assert next_gcomp(1000, 0.0, 0.45) == 4000
    with pytest.raises(ValueError):
        next_gcomp(1000, 0.5, 1.0)


def test_job_argv_is_the_fine_grain_program() -> None:
    spec = load_spec(SPEC)
    argv = job_argv(spec, 17857, 321, python="py")
    assert argv[:3] == ["py", "-m", "apps.synthetic"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--iterations"] == "321" and flags["--gcomp"] == "17857"
    assert flags["--gio"] == "1" and flags["--device-latency"] == "0.0025"
    assert flags["--wait"] == "block"


# ---- the spec ----------------------------------------------------------------------------------


def test_the_committed_spec_and_its_quick_version() -> None:
    spec = load_spec(SPEC)
    assert spec.policies == ("gang", "paired-gang") and spec.loads == (0.5, 0.8)
    assert spec.nodes == 2 and spec.cpu_mechanism == "cpuset" and spec.quantum == 0.2
    assert spec.sims[0] == SimVariant("full-quanta", "default", None, ("occupancy",))
    assert spec.sims[1] == SimVariant("calibrated", "default", None)
    q = spec.quick_version()
    assert q.jobs < 20 and len(q.loads) == 1 and q.policies == spec.policies


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[experiment]\nbogus = 1\n", "[experiment].bogus: unknown key"),
        ('[experiment]\npolicies = ["easy"]\n', "[experiment].policies: unknown 'easy'"),
        ("[experiment]\nloads = [0.0]\n", "loads must be in (0, 1.5)"),
        ("[experiment]\njobs = 1\n", "jobs must be >= 2"),
        ('[experiment]\njobs = "many"\n', "[experiment].jobs: expected a whole number"),
        ('[job]\nwait = "nap"\n', "wait must be one of"),
        ("[[sim]]\nlabel = 'a'\ncpu = 2.0\n", "[sim #1].cpu: must be > 0 and <= 1"),
        ("[[sim]]\nlabel = 'a'\n[[sim]]\nlabel = 'a'\n", "labels must be unique"),
        ("[quick]\njobs = 1\n", "[quick]: jobs must be >= 2"),
        ("[experiment\n", "not valid TOML"),
    ],
)
def test_bad_specs_give_one_line(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(p)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_missing_spec_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["experiment", "run", "/nonexistent/spec.toml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cosched: error: ") and err.count("\n") == 1 and "no such file" in err


# ---- the simulated side on hand-made runs ------------------------------------------------------


BUILTIN = SimVariant("built-in", "none", None)


def test_a_job_alone_takes_its_dedicated_time_in_the_simulator() -> None:
    spec = load_spec(SPEC)
    rates = _rates().sizes
    s = run_sim(_run("gang", [(2, 0.0, 3.0)]), spec, BUILTIN, rates)
    # 100 iterations at 160/s after 0.3 s of overhead: the dedicated time of its work
    assert s.jobs[0].runtime == pytest.approx(0.3 + 100 / 160)
    assert s.jobs[0].end_s == pytest.approx(s.jobs[0].runtime)
    assert s.calibration == "built-in" and s.context_switch == 0.0
    assert s.cpu == {2: pytest.approx(0.44)}  # the measured share of its size


def test_strict_gang_alternates_and_paired_gang_pairs_in_the_simulator() -> None:
    spec = load_spec(SPEC)
    jobs = [(2, 0.0, 4.0), (2, 0.0, 4.0)]
    rates = _rates().sizes
    rates[2].overhead_s = 0.0
    rates[2].rate = 25.0  # 100 iterations: 4 s of work
    gang = run_sim(_run("gang", jobs), spec, BUILTIN, rates)
    # two rows, one quantum each in turn: both end after about twice their work
    assert [j.end_s for j in gang.jobs] == pytest.approx([7.8, 8.0], abs=0.21)
    assert max(n for _, n in gang.rows) == 2 and gang.matching_success_rate is None
    paired = run_sim(_run("paired-gang", jobs), spec, BUILTIN, rates)
    # 0.44 + 0.44 < 1: matched, both run at (1 - interference) once the predictor knows them
    ends = [j.end_s for j in paired.jobs]
    assert all(e is not None and 4.0 / 0.95 <= e < 5.0 for e in ends), ends
    assert paired.matching_success_rate is not None and paired.matching_success_rate > 0.8
    # the paper's 45 % profile is the same here; a compute-bound share would not pair
    hog = run_sim(_run("paired-gang", jobs), spec, SimVariant("hog", "none", 0.9), rates)
    assert min(j.end_s or 0.0 for j in hog.jobs) > 7.0
    # full quanta: a quantum whose jobs ended early is not cut short; no job ends sooner
    full = run_sim(_run("gang", jobs), spec, SimVariant("f", "none", None, ("occupancy",)), rates)
    pairs = zip(full.jobs, gang.jobs, strict=True)
    assert all((a.end_s or 0) >= (b.end_s or 0) - 1e-9 for a, b in pairs)


def test_sim_variant_terms_are_checked(tmp_path: Path) -> None:
    text = SPEC.read_text().replace('terms = ["occupancy"]', 'terms = ["program"]')
    bad = tmp_path / "s.toml"
    bad.write_text(text)
    with pytest.raises(SpecError, match="terms"):
        load_spec(bad)


def test_simulate_all_needs_live_runs() -> None:
    spec = load_spec(SPEC)
    with pytest.raises(LiveError, match="no live runs"):
        simulate_all(ValidationResult(meta={}, stream=[]), spec, lambda _: None)


# ---- the comparison ----------------------------------------------------------------------------


def test_comparison_table_and_verdict() -> None:
    res = _result({"gang": 1.10, "paired-gang": 0.85})
    comps = vr.compare(res)
    assert [(c.policy, c.variant) for c in comps] == [("gang", "calibrated"),
                                                      ("paired-gang", "calibrated")]  # fmt: skip
    g, p = comps
    assert g.live.mean_response == pytest.approx((2.0 + 4.0 + 1.0) / 3)
    assert g.d_response == pytest.approx(0.10) and g.d_slowdown == pytest.approx(0.10)
    assert p.d_response == pytest.approx(-0.15) and g.met and p.met
    assert g.median_job_ratio == pytest.approx(1.10) and g.within == 1.0
    assert vr.verdict(comps) is True
    # the other variant is compared too, but does not decide
    assert all(c.d_response == pytest.approx(1.0) for c in vr.compare(res, "other"))
    missed = vr.compare(_result({"gang": 1.25, "paired-gang": 1.0}))
    assert vr.verdict(missed) is False
    assert vr.verdict([]) is None
    lines = vr.verdict_lines(_result({"gang": 1.25, "paired-gang": 1.0}))
    assert lines[-1].endswith("MISSED") and "+25.0%" in lines[0]


def test_in_system_and_rows_are_time_weighted() -> None:
    # [0, 2) and [1, 5): 6 job-seconds over 5 s
    assert vr.in_system([(0.0, 2.0), (1.0, 5.0)]) == pytest.approx(6.0 / 5.0)
    assert math.isnan(vr.in_system([]))
    # 1 row for 1 s, 2 rows for 4 s, 0 for 5 s
    assert vr.step_mean([(0.0, 1), (1.0, 2), (5.0, 0)], 10.0) == pytest.approx(0.9)
    assert vr.step_mean([], 3.0) is None
    c = vr.compare(_result({"gang": 1.0}))[0]
    assert c.live.mean_rows == pytest.approx((1 * 1 + 2 * 4 + 0 * 5 + 1 * 1) / 11)


def test_killed_jobs_are_left_out_of_both_sides() -> None:
    res = _result({"gang": 1.0})
    res.live[0].jobs[1].state = "killed"
    c = vr.compare(res)[0]
    assert c.live.jobs == c.sim.jobs == 2
    assert c.live.mean_response == pytest.approx(1.5)


def test_effective_load_and_cpu_per_iteration() -> None:
    res = _result({"gang": 1.0})
    live, sim = res.live[0], res.sim[0]
    # sizes 2, 2, 1 with 2, 4 and 1 s over submits 0..10 on 2 nodes: 13 / 20
    assert vr.effective_load(live, sim, 2) == pytest.approx(13 / 20)
    assert vr.cpu_per_iteration_ratio(res, live) is None  # no loop CPU recorded
    for r in res.rates.sizes.values() if res.rates else []:
        for smp in r.samples:
            smp["cpu0_per_iteration"] = 0.002
    for j in live.jobs:
        j.barriers, j.loop_cpu_s = 100, 0.25  # 2.5 ms per iteration: 1.25x alone
    assert vr.cpu_per_iteration_ratio(res, live) == pytest.approx(1.25)


def test_overhead_is_split_around_the_loop() -> None:
    # started at 10, loop of 2 s ended (report written) at 12.5, controller end at 12.6
    assert split_overhead(10.0, 12.6, 12.5, 2.0) == pytest.approx((0.5, 0.1))
    assert split_overhead(10.0, 12.6, None, 2.0) == (None, None)
    res = _result({"gang": 1.0})
    live = res.live[0]
    for j in live.jobs:
        assert j.start_s is not None and j.end_s is not None
        j.loop_s, j.report_s = 0.5, j.end_s - 0.1
    ph = vr.phases(res, live)
    assert ph.loop == pytest.approx(0.5) and ph.after == pytest.approx(0.1)
    assert ph.before == pytest.approx(((2 - 0.6) + (4 - 0.6) + (1 - 0.6)) / 3)
    assert ph.dedicated_loop == pytest.approx((100 / 160 * 2 + 100 / 200) / 3)


def test_rate_sensitivity_slower_rates_give_longer_simulated_responses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = _result({"gang": 1.0, "paired-gang": 1.0})
    spec = load_spec(SPEC)
    rows = rate_sensitivity(res, spec, factors=(0.5, 1.0, 2.0))
    assert len(rows) == len(res.live)
    for row in rows:
        sims = list(row["factors"].values())
        assert sims[0] > sims[1] > sims[2]  # half the rate: longer; double: shorter
    with pytest.raises(SpecError, match="no \\[\\[sim\\]\\] variant 'nope'"):
        rate_sensitivity(res, spec, variant="nope")
    res.sensitivity = rows
    assert all("with the first measurement" in line for line in sensitivity_lines(res))
