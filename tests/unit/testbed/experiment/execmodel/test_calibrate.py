"""`cosched calibrate`: the derivations from given rates, the TOML it writes, its errors."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.experiment.execmodel.calibrate import (
    MEASUREMENTS,
    Calibration,
    CalibrationConfig,
    JobRun,
    Run,
    context_switch,
    derive,
    eq1,
    fit_fraction,
    interference,
    node_ns_per_iteration,
    pairing,
    stats,
    summary,
    tables,
    to_toml,
)
from testbed.experiment.harness import hostload
from testbed.experiment.paired.spec import read_experiment as load_experiment

REPO = Path(__file__).resolve().parents[5]


# -- the model's factors solved for their parameters ----------------------------------------


def test_interference_of_a_pair_that_fits_is_the_lost_fraction() -> None:
    # demands 0.45 + 0.45 fit in the CPU: any slow-down is interference
    assert interference(90.0, 100.0, 0.9) == pytest.approx(0.10)
    assert interference(100.0, 100.0, 0.9) == pytest.approx(0.0)


def test_interference_of_an_oversubscribed_pair_first_charges_cpu_sharing() -> None:
    # demands sum to 1.25: the model already slows each job to 1/1.25 = 0.8,
    # so a job at 0.8 of its alone rate had no interference beyond that
    assert interference(80.0, 100.0, 1.25) == pytest.approx(0.0)
    assert interference(72.0, 100.0, 1.25) == pytest.approx(0.10)


def test_interference_round_trips_through_the_execution_model() -> None:
    from testbed.sim.execution import gang_rates

    for i, u in ((0.07, 0.45), (0.0, 0.3), (0.12, 0.8)):
        rates = gang_rates([(1, 2)], lambda _j, u=u: u, i)  # type: ignore[misc]
        assert interference(rates[1] * 50.0, 50.0, 2 * u) == pytest.approx(i)


def test_context_switch_from_two_jobs_alternating() -> None:
    # q = 0.2 s, 4 ms lost per switched-in quantum: each job runs (0.2 - 0.004) / 0.4
    alone = 20.0
    gang = alone * (0.2 - 0.004) / (2 * 0.2)
    assert context_switch(gang, alone, 0.2, 2) == pytest.approx(0.004)
    assert context_switch(alone / 2, alone, 0.2, 2) == pytest.approx(0.0)
    # faster than half its alone rate: no cost, and a negative figure says so
    assert context_switch(alone * 0.55, alone, 0.2, 2) < 0


def test_bad_rates_are_refused() -> None:
    with pytest.raises(ValueError):
        interference(1.0, 0.0, 0.5)
    with pytest.raises(ValueError):
        context_switch(1.0, 2.0, 0.0, 2)


def test_stats_mean_sd_and_spread() -> None:
    s = stats([9.0, 10.0, 11.0])
    assert (s.mean, s.lo, s.hi, s.n) == (10.0, 9.0, 11.0, 3)
    assert s.sd == pytest.approx(1.0)
    assert s.spread == pytest.approx(0.2)
    assert stats([5.0]).sd == 0.0


# -- derive() from runs ---------------------------------------------------------------------


ALONE = {"compute": 20.0, "io": 22.0, "fine": 200.0}
U = {"compute": 0.98, "io": 0.04, "fine": 0.46}


def _runs(
    fine_paired: float = 184.0,
    compute_paired: float = 19.0,
    io_paired: float = 21.0,
    gang: float = 9.6,
    jitter: tuple[float, ...] = (-0.01, 0.0, 0.01),
) -> list[Run]:
    runs = []
    for r, e in enumerate(jitter):
        f = 1 + e
        for m in MEASUREMENTS:
            if m.mode == "alone":
                k = m.kinds[0]
                jobs = [JobRun(k, ALONE[k] * f, U[k], 100)]
            elif m.key == "paired.fine_fine":
                jobs = [JobRun("fine", fine_paired * f, 0.45, 900) for _ in range(2)]
            elif m.key == "paired.compute_io":
                jobs = [
                    JobRun("compute", compute_paired * f, 0.95, 90),
                    JobRun("io", io_paired * f, 0.04, 100),
                ]
            else:
                jobs = [JobRun("compute", gang * f, 0.49, 48) for _ in range(2)]
            runs.append(Run(m.key, r, jobs, 0.02, 0.01, 5.5))
    return runs


def test_derive_gives_the_model_its_parameters() -> None:
    rates, cpus = tables(_runs())
    d = derive(rates, cpus, 0.2)
    assert d.utilization == pytest.approx(U)
    assert d.interference_fine_fine == pytest.approx(1 - 184.0 / 200.0)
    sum_ci = U["compute"] + U["io"]
    assert d.interference_compute_io_jobs["compute"] == pytest.approx(1 - 19.0 / 20.0 * sum_ci)
    assert d.interference_compute_io_jobs["io"] == pytest.approx(1 - 21.0 / 22.0 * sum_ci)
    assert d.context_switch_raw == pytest.approx(0.2 * (1 - 2 * 9.6 / 20.0))
    assert d.interference == d.interference_fine_fine  # the model's choice
    # one figure per repeat, spread around the mean
    assert len(d.per_repeat["interference_fine_fine"]) == 3
    assert min(d.per_repeat["context_switch"]) < d.context_switch_raw
    assert max(d.per_repeat["context_switch"]) > d.context_switch_raw


def test_negative_raw_figures_become_zero_in_the_model_and_stay_raw_in_measured() -> None:
    rates, cpus = tables(_runs(fine_paired=205.0, gang=10.5))
    d = derive(rates, cpus, 0.2)
    assert d.interference_fine_fine < 0 and d.interference == 0.0
    assert d.context_switch_raw < 0 and d.context_switch == 0.0


def _calibration() -> Calibration:
    runs = _runs()
    rates, cpus = tables(runs)
    cfg = CalibrationConfig(spec_path="experiments/paired-vs-gang-2node.toml")
    host = {"date": "2026-01-01T00:00:00Z", "kernel": "6.1", "nodes": 2, "cgroups": "v1"}
    return Calibration(cfg, 110.0, runs, derive(rates, cpus, 0.2), host)


def test_toml_has_the_shape_the_simulator_reads() -> None:
    cal = _calibration()
    doc = tomllib.loads(to_toml(cal))
    assert set(doc) == {"model", "measured", "host"}
    assert set(doc["model"]) == {
        "quantum",
        "interference",
        "context_switch",
        "fine_grain_utilization",
    }
    assert doc["model"]["quantum"] == 0.2
    assert doc["model"]["interference"] == pytest.approx(cal.derived.interference, abs=1e-6)
    assert doc["model"]["context_switch"] == pytest.approx(cal.derived.context_switch, abs=1e-6)
    m = doc["measured"]
    assert m["repeats"] == 3
    assert m["alone"]["fine"]["fine_rate"]["values"] == pytest.approx([198.0, 200.0, 202.0])
    assert m["paired"]["compute_io"]["io_rate"]["mean"] == pytest.approx(21.0)
    assert m["gang"]["compute_compute"]["compute_rate"]["spread"] > 0
    assert m["derived"]["per_repeat"]["context_switch"]
    assert m["jobs"]["fine"]["gio"] == 1
    assert doc["host"]["nodes"] == 2


def test_summary_names_every_measurement_and_the_model() -> None:
    text = summary(_calibration())
    for m in MEASUREMENTS:
        assert m.name in text
    assert "[model] interference" in text and "context switch" in text


def test_fine_grain_job_is_sized_from_the_loop_cost() -> None:
    cfg = CalibrationConfig(fine_compute_ms=2.0, fine_wait_ms=2.5, wait="block")
    app = cfg.fine(100.0)  # 100 ns per iteration: 2 ms = 20,000 iterations
    assert (app.gcomp, app.gio, app.device_latency, app.wait) == (20_000, 1, 0.0025, "block")
    assert "--wait" in app.argv(5.0)


def test_config_from_the_2node_spec() -> None:
    spec = load_experiment(REPO / "experiments/paired-vs-gang-2node.toml")
    cfg = CalibrationConfig.from_spec(spec, repeats=4)
    assert (cfg.nodes, cfg.cpus_per_node, cfg.cpu_mechanism) == (2, 1.0, "cpuset")
    assert cfg.quantum == spec.quantum and cfg.repeats == 4
    assert cfg.compute.gcomp == spec.compute.gcomp and cfg.io.gio == spec.io.gio


# -- the command's one-line errors ----------------------------------------------------------


def test_too_few_repeats_is_one_line(capsys: Any) -> None:
    assert main(["calibrate", "--repeats", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--repeats 2: at least 3" in err


def test_without_root_is_one_line(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["calibrate"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs root" in err


def test_a_sweep_spec_is_refused(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert main(["calibrate", "--spec", str(REPO / "experiments/fig9-granularity.toml")]) == 2
    assert "is a sweep" in capsys.readouterr().err


# -- hostload -------------------------------------------------------------------------------


def test_host_busy_counts_all_but_idle_and_iowait() -> None:
    tick = hostload._TICK
    line = "cpu  100 10 50 1000 40 5 5 0 0 0"
    assert hostload.host_busy_seconds(line) == pytest.approx(170 / tick)
    with pytest.raises(ValueError):
        hostload.host_busy_seconds("intr 1 2 3")


def test_other_cores_subtracts_ours_and_the_clusters() -> None:
    a = hostload.CpuSample(wall=0.0, host_busy=10.0, mine=1.0, cluster=2.0)
    b = hostload.CpuSample(wall=2.0, host_busy=14.0, mine=1.5, cluster=4.5)
    assert hostload.other_cores(a, b) == pytest.approx((4.0 - 0.5 - 2.5) / 2.0)
    assert hostload.other_cores(b, b) is None
    c = hostload.CpuSample(wall=2.0, host_busy=10.0, mine=5.0, cluster=2.0)
    assert hostload.other_cores(a, c) == 0.0  # never negative
    assert math.isfinite(hostload.sample().host_busy)


# -- how often the pairing test passes (explains Fig. 7's matching) -------------------------


def test_eq1_weights_the_last_four_quanta() -> None:
    assert eq1([1.0, 0.0, 0.0, 0.0]) == pytest.approx([0.1])
    assert eq1([0.0, 0.0, 0.0, 1.0, 0.5]) == pytest.approx([0.4, 0.3 + 0.2])
    assert eq1([0.9, 0.9]) == []  # fewer than four quanta: no full prediction


def test_fit_fraction_against_a_series_or_a_constant() -> None:
    assert fit_fraction([0.90, 0.95, 0.92], 0.05) == pytest.approx(2 / 3)  # 0.95 + 0.06 >= 1
    assert fit_fraction([0.4, 0.7], [0.5, 0.3], 0.01) == pytest.approx(1 / 2)
    assert fit_fraction([], 0.1) is None


def test_pairing_from_runs() -> None:
    steady = JobRun("compute", 20.0, 0.9, 100, [0.9] * 10)
    jumpy = JobRun("compute", 20.0, 0.95, 100, [0.99] * 5 + [0.85] * 5)
    io = JobRun("io", 22.0, 0.05, 100, [0.05] * 10)
    runs = [
        Run("alone.compute", 0, [steady], 0.0, 0.0, 5.0),
        Run("alone.compute", 1, [jumpy], 0.0, 0.0, 5.0),
        Run("alone.io", 0, [io], 0.0, 0.0, 5.0),
        Run("paired.compute_io", 0, [steady, io], 0.0, 0.0, 5.0),
    ]
    got = pairing(runs)
    # steady: 0.9 + 0.05 + 0.01 < 1 in all 7 predictions; jumpy only once eq. (1)
    # has come down below 0.94: 0.99, 0.99, then 0.934, 0.892, ... (5 of 7)
    assert got["compute_io_alone"] == pytest.approx((7 + 5) / 14)
    assert got["compute_io_paired"] == 1.0
    assert "fine_fine_paired" not in got


def test_loop_cost_in_a_node_from_cpu_per_barrier() -> None:
    job = JobRun("compute", 10.0, 0.9, 100)  # 90 ms of CPU per barrier
    assert node_ns_per_iteration(job, 900_000) == pytest.approx(100.0)
    assert node_ns_per_iteration(JobRun("compute", 0.0, 0.9, 0), 1) is None
