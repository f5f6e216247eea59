"""Issue 25's execution-model terms, each on hand-computed cases.

* launch and teardown (testbed/sim/engine.py, SimConfig.launch/teardown);
* quantum occupancy: early end against ParPar's full quanta;
* the barrier cost over gang sizes and the program's run time from it
  (testbed/sim/program.py);
* the calibration file's new keys and the term switches (testbed/sim/calibration.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from testbed.sim.calibration import (
    BUILTIN,
    CalibrationError,
    load_calibration,
    model_config,
    parse_terms,
    program_model,
)
from testbed.sim.engine import simulate
from testbed.sim.job import Phase, SimJob
from testbed.sim.metrics import job_metrics
from testbed.sim.program import BarrierCost, ProgramModel, realise
from testbed.sim.results import SimConfig
from tests.support.sim_fakes import OneSlotEach, job

# ---------------------------------------------------------------- launch, teardown


def test_two_job_quantum_with_launch_cost() -> None:
    # Two jobs of 1 s at 40 % CPU paired on one node from t = 0 (0.8 <= 1: both at
    # full speed). Each first spends 0.3 s of its scheduled time launching, using 50 %
    # of a CPU for it; then 1 s of work: both end at 0.3 + 1.0 = 1.3 s.
    cfg = SimConfig(nodes=1, quantum=1.0, interference=0.0, launch=0.3, launch_cpu=0.5)
    pol = OneSlotEach(1, pair=True)
    res = simulate([job(1, 0, 1, 1.0, 0.4), job(2, 0, 1, 1.0, 0.4)], pol, cfg)
    assert list(res.end) == pytest.approx([1.3, 1.3])
    # CPU: 0.3 x 0.5 of launch + 1.0 x 0.4 of work
    assert list(res.cpu) == pytest.approx([0.55, 0.55])
    # the first quantum's measured utilization: (0.15 + 0.7 x 0.4) / 1 s
    assert pol.seen[0] == {1: pytest.approx(0.43), 2: pytest.approx(0.43)}
    # slowdown counts the launch as part of the job's dedicated life: exactly 1
    assert [m.slowdown for m in job_metrics(res)] == pytest.approx([1.0, 1.0])


def test_launch_runs_only_in_the_jobs_own_slots() -> None:
    # Two jobs alternate on one node (own slots). Launch 0.5 s: job 1 launches in
    # quantum 0 and works 0.5 s; job 2 likewise in quantum 1; job 1 needs 0.5 s more
    # in quantum 2 (ends 2.5), job 2 in quantum 3 (starts at 2.5: early end, ends 3.0).
    cfg = SimConfig(nodes=1, quantum=1.0, interference=0.0, launch=0.5)
    res = simulate([job(1, 0, 1, 1.0), job(2, 0, 1, 1.0)], OneSlotEach(1), cfg)
    assert list(res.end) == pytest.approx([2.5, 3.0])
    # without the term: 1.0 and 2.0
    res0 = simulate([job(1, 0, 1, 1.0), job(2, 0, 1, 1.0)], OneSlotEach(1), SimConfig(nodes=1))
    assert list(res0.end) == pytest.approx([1.0, 2.0])


def test_teardown_holds_the_slot_after_the_last_barrier() -> None:
    # Job 1 ends its work at 0.4 s, then 0.3 s of teardown: it ends at 0.7 s and its
    # quantum lasts until then (early end waits for it); job 2 starts at 0.7.
    cfg = SimConfig(nodes=1, quantum=1.0, interference=0.0, teardown=0.3)
    res = simulate([job(1, 0, 1, 0.4), job(2, 0, 1, 0.4)], OneSlotEach(1), cfg)
    assert list(res.start) == pytest.approx([0.0, 0.7])
    assert list(res.end) == pytest.approx([0.7, 1.4])


def test_zero_length_job_still_launches() -> None:
    cfg = SimConfig(nodes=1, quantum=1.0, launch=0.2)
    res = simulate([job(1, 0, 1, 0.0)], OneSlotEach(1), cfg)
    assert list(res.end) == pytest.approx([0.2])


# ---------------------------------------------------------------- occupancy


def test_full_quanta_do_not_end_early() -> None:
    # Job 1 (0.4 s) and job 2 (0.4 s) in their own slots. Early end: job 2 starts
    # at 0.4 and ends at 0.8. ParPar's full quanta: job 2 waits for the second
    # quantum at 1.0 and ends at 1.4.
    jobs = [job(1, 0, 1, 0.4), job(2, 0, 1, 0.4)]
    early = simulate(jobs, OneSlotEach(1), SimConfig(nodes=1, quantum=1.0))
    assert list(early.end) == pytest.approx([0.4, 0.8])
    full = simulate(jobs, OneSlotEach(1), SimConfig(nodes=1, quantum=1.0, occupancy="full"))
    assert list(full.end) == pytest.approx([0.4, 1.4])
    assert list(full.start) == pytest.approx([0.0, 1.0])


def test_full_quantum_utilization_is_over_the_whole_quantum() -> None:
    # two jobs of 2 s in their own slots: a job's quantum runs the whole 1 s; CPU
    # over the quantum's 1 s (what cpuacct gives live), not over the work done
    pol = OneSlotEach(1)
    simulate([job(1, 0, 1, 2.0, 0.5), job(2, 0, 1, 2.0, 0.5)], pol,
             SimConfig(nodes=1, quantum=1.0, occupancy="full"))  # fmt: skip
    assert pol.seen[0] == {1: pytest.approx(0.5)}


def test_fluid_mode_refuses_the_new_terms() -> None:
    with pytest.raises(ValueError, match="fluid mode"):
        SimConfig(nodes=1, mode="fluid", occupancy="full")
    with pytest.raises(ValueError, match="fluid mode"):
        SimConfig(nodes=1, mode="fluid", launch=1.0)


def test_work_backlog_series() -> None:
    # one job of 2 nodes x 3 s: 6 node-seconds admitted, 2 done per quantum
    res = simulate([job(1, 0, 2, 3.0)], OneSlotEach(2), SimConfig(nodes=2, quantum=1.0))
    assert list(res.series_w) == pytest.approx([4.0, 2.0, 0.0])


# ---------------------------------------------------------------- device


def test_two_io_jobs_share_the_nodes_device() -> None:
    # Two I/O jobs (3 % CPU, on the device 95 % of their time) paired on one node for
    # 1 s of work each. Without the device term both run at full speed (0.06 of CPU):
    # done at 1.0 s. With it the device is asked for 1.9: each runs at 1 / 1.9 and
    # ends at 1.9 s. A compute job (no device) beside one of them is not slowed.
    io = (Phase(1.0, 0.03, 0.95),)
    jobs = [SimJob(1, 0, 1, 1.0, 1.0, phases=io), SimJob(2, 0, 1, 1.0, 1.0, phases=io)]
    off = simulate(jobs, OneSlotEach(1, pair=True), SimConfig(nodes=1, interference=0.0))
    assert list(off.end) == pytest.approx([1.0, 1.0])
    cfg = SimConfig(nodes=1, quantum=5.0, interference=0.0, device=True)
    on = simulate(jobs, OneSlotEach(1, pair=True), cfg)
    assert list(on.end) == pytest.approx([1.9, 1.9])
    mixed = [SimJob(1, 0, 1, 1.0, 1.0, phases=(Phase(1.0, 0.9),)), jobs[1]]
    res = simulate(mixed, OneSlotEach(1, pair=True), cfg)
    assert list(res.end) == pytest.approx([1.0, 1.0])


# ---------------------------------------------------------------- barrier, program


def test_barrier_cost_grows_with_size() -> None:
    b = BarrierCost(wall_base=1.0e-3, wall_per_rank=0.5e-3, cpu_base=0.2e-3, cpu_per_rank=0.1e-3)
    # b(n) = 1 ms + 0.5 ms x (n - 1): 1.5 ms at 2, 4.5 ms at 8; none at 1
    assert b.wall(2) == pytest.approx(1.5e-3)
    assert b.wall(8) == pytest.approx(4.5e-3)
    assert b.wall(1) == 0.0 and b.cpu(1) == 0.0
    assert b.cpu(8) == pytest.approx(0.9e-3)


def test_barrier_fit_recovers_a_line_and_a_constant() -> None:
    pts = {2: (1.5e-3, 0.3e-3), 4: (2.5e-3, 0.5e-3), 8: (4.5e-3, 0.9e-3)}
    b = BarrierCost.fit(pts)
    assert b.wall_base == pytest.approx(1.0e-3) and b.wall_per_rank == pytest.approx(0.5e-3)
    assert b.cpu_base == pytest.approx(0.2e-3) and b.cpu_per_rank == pytest.approx(0.1e-3)
    one = BarrierCost.fit({2: (2e-3, 1e-4)})
    assert one.wall(16) == pytest.approx(2e-3)
    with pytest.raises(ValueError):
        BarrierCost.fit({1: (0.0, 0.0)})


def test_program_run_time_at_2_and_8_nodes() -> None:
    # b(2) = 1.5 ms, b(8) = 4.5 ms, no CPU in the barrier. 45 % at the reference size 2:
    # t_comp = 0.45 x 1.5 / 0.55 = 1.2273 ms; N = sec / 2.7273 ms.
    b = BarrierCost(1.0e-3, 0.5e-3)
    m = ProgramModel(b)
    t_comp = 0.45 * 1.5e-3 / 0.55
    assert m.compute_time(0.45) == pytest.approx(t_comp)
    at2 = realise(SimJob(1, 0, 2, 10.0, 10.0, phases=(Phase(1.0, 0.45),)), m)
    assert at2.runtime == pytest.approx(10.0)
    assert at2.phases[0].cpu == pytest.approx(0.45)
    at8 = realise(SimJob(2, 0, 8, 10.0, 10.0, phases=(Phase(1.0, 0.45),)), m)
    # 8 nodes: 10 s x (t_comp + 4.5 ms) / (t_comp + 1.5 ms) = 21.0 s at 21.4 % CPU
    assert at8.runtime == pytest.approx(10.0 * (t_comp + 4.5e-3) / (t_comp + 1.5e-3))
    assert at8.runtime == pytest.approx(21.0)
    assert at8.phases[0].cpu == pytest.approx(t_comp / (t_comp + 4.5e-3))
    assert at8.barrier == pytest.approx(t_comp + 4.5e-3)
    # one process: no barrier, compute-bound, t_comp / (t_comp + b_ref) of the time
    at1 = realise(SimJob(3, 0, 1, 10.0, 10.0, phases=(Phase(1.0, 0.45),)), m)
    assert at1.runtime == pytest.approx(10.0 * t_comp / (t_comp + 1.5e-3))
    assert at1.phases[0].cpu == 1.0
    # without growth every parallel job pays the reference barrier: 10 s at 8 nodes
    flat = realise(
        SimJob(2, 0, 8, 10.0, 10.0, phases=(Phase(1.0, 0.45),)), ProgramModel(b, grow=False)
    )
    assert flat.runtime == pytest.approx(10.0)


def test_program_keeps_compute_bound_and_phased_jobs() -> None:
    m = ProgramModel(BarrierCost(1.0e-3, 0.5e-3))
    cb = SimJob(1, 0, 8, 10.0, 10.0)
    assert realise(cb, m).runtime == 10.0
    qcrd = SimJob(2, 0, 8, 10.0, 10.0, phases=(Phase(0.5, 0.1), Phase(0.5, 0.9)))
    assert realise(qcrd, m) is qcrd


def test_barrier_cpu_enters_the_compute_time() -> None:
    # c(2) = 0.3 ms of a 1.5 ms barrier: (t + 0.3) / (t + 1.5) = 0.45 -> t = 0.6818 ms
    m = ProgramModel(BarrierCost(1.0e-3, 0.5e-3, 0.2e-3, 0.1e-3))
    assert m.compute_time(0.45) == pytest.approx((0.45 * 1.5e-3 - 0.3e-3) / 0.55)


# ---------------------------------------------------------------- calibration file


def _cal_file(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "cal.toml"
    p.write_text("[model]\ninterference = 0.1\ncontext_switch = 0.0\n" + extra)
    return p


def test_calibration_reads_the_new_terms(tmp_path: Path) -> None:
    p = _cal_file(
        tmp_path,
        "launch = 1.2\nlaunch_cpu = 0.4\nteardown = 0.3\n"
        "barrier_wall_base = 0.001\nbarrier_wall_per_rank = 0.0005\n",
    )
    cal = load_calibration(p)
    cfg = model_config(cal, parse_terms("launch,occupancy"), nodes=16, quantum=1.0)
    assert (cfg.launch, cfg.teardown, cfg.launch_cpu, cfg.occupancy) == (1.2, 0.3, 0.4, "full")
    off = model_config(cal, parse_terms("none"), nodes=16, quantum=1.0)
    assert (off.launch, off.teardown, off.occupancy, off.device) == (0, 0, "early-end", False)
    assert model_config(cal, {"device"}, nodes=2, quantum=1.0).device
    m = program_model(cal, parse_terms("all"))
    assert m is not None and m.grow and m.barrier.wall(8) == pytest.approx(4.5e-3)
    flat = program_model(cal, parse_terms("program"))
    assert flat is not None and not flat.grow
    assert program_model(cal, parse_terms("launch")) is None


def test_missing_terms_and_bad_names_are_one_line(tmp_path: Path) -> None:
    cal = load_calibration(_cal_file(tmp_path))
    with pytest.raises(CalibrationError, match="no launch cost"):
        model_config(cal, {"launch"}, nodes=4, quantum=1.0)
    with pytest.raises(CalibrationError, match="no barrier cost"):
        program_model(cal, {"program"})
    with pytest.raises(CalibrationError, match="unknown model term"):
        parse_terms("launch,warp")
    with pytest.raises(CalibrationError, match="needs program"):
        parse_terms("barrier")
    with pytest.raises(CalibrationError, match="both"):
        load_calibration(_cal_file(tmp_path, "barrier_wall_base = 0.001\n"))
    assert program_model(BUILTIN, set()) is None
    assert math.isinf(ProgramModel(BarrierCost(1e-3, 0.0)).compute_time(1.0))


def test_until_stops_and_reports_progress() -> None:
    # two jobs of 10 s alternating 1 s quanta: by t = 4 each has done 2 s; none ended
    jobs = [job(1, 0, 1, 10.0), job(2, 0, 1, 10.0), job(3, 50.0, 1, 1.0)]
    res = simulate(jobs, OneSlotEach(1), SimConfig(nodes=1, quantum=1.0), until=4.0)
    assert list(res.done) == pytest.approx([2.0, 2.0, 0.0])
    assert all(math.isnan(e) for e in res.end)
    with pytest.raises(ValueError, match="exact"):
        simulate(jobs, OneSlotEach(1), SimConfig(nodes=1, mode="fluid"), until=4.0)


# ---------------------------------------------------------------- resident jobs


def test_frozen_resident_jobs_slow_the_running_one() -> None:
    # Strict gang, 2 nodes, three 2-node jobs of 4 s in their own rows from t = 0, 1 s
    # quanta, cost 0.1 per frozen resident job. While all three are placed, each quantum
    # runs one with two frozen beside it: rate 1 - 0.1 x 2 = 0.8. After 12 quanta each
    # has done 3.2 s; quantum 12 finishes job 1 (t = 13). Then one frozen resident: job 2
    # needs 0.8 s at 0.9 (t = 13 + 0.8 / 0.9, the quantum ends early); then job 3 alone
    # at rate 1 needs 0.8 s more.
    from controller.policies.registry import lookup, make_policy, parse_params

    jobs = [SimJob(i, 0.0, 2, 4.0, 4.0) for i in (1, 2, 3)]

    def ends(cost: float) -> list[float]:
        pol = make_policy("gang", 2, parse_params(lookup("gang"), {}))
        cfg = SimConfig(nodes=2, quantum=1.0, interference=0.0, resident_cost=cost)
        return list(simulate(jobs, pol, cfg).end)

    assert ends(0.0) == pytest.approx([10.0, 11.0, 12.0])
    assert ends(0.1) == pytest.approx([13.0, 13.0 + 0.8 / 0.9, 13.0 + 0.8 / 0.9 + 0.8])


def test_resident_cost_is_per_node_and_the_gang_takes_its_slowest_node() -> None:
    from testbed.sim.execution import gang_rates

    # job 1 on nodes 0-1; node 1 also runs job 2 (40 % + 40 %: no CPU sharing); node 0
    # has a factor 0.7 (three frozen residents at 0.1), node 1 0.9
    rates = gang_rates([[1], [1, 2]], lambda j: 0.4, 0.0, node_factor=[0.7, 0.9])
    assert rates == {1: pytest.approx(0.7), 2: pytest.approx(0.9)}
    # factor 1 everywhere is the model without the term
    assert gang_rates([[1], [1, 2]], lambda j: 0.6, 0.1, node_factor=[1.0, 1.0]) == gang_rates(
        [[1], [1, 2]], lambda j: 0.6, 0.1
    )


def test_resident_cost_from_the_calibration_and_its_bounds(tmp_path: Path) -> None:
    cal = load_calibration(_cal_file(tmp_path, "resident_cost = 0.004\n"))
    assert model_config(cal, {"resident"}, nodes=2, quantum=1.0).resident_cost == 0.004
    assert model_config(cal, set(), nodes=2, quantum=1.0).resident_cost == 0.0
    with pytest.raises(CalibrationError, match="no resident_cost"):
        model_config(load_calibration(_cal_file(tmp_path)), {"resident"}, nodes=2, quantum=1.0)
    with pytest.raises(CalibrationError, match="resident_cost"):
        load_calibration(_cal_file(tmp_path, "resident_cost = 1.5\n"))
    with pytest.raises(ValueError, match="resident_cost"):
        SimConfig(nodes=2, resident_cost=-0.1)
    with pytest.raises(ValueError, match="fluid"):
        SimConfig(nodes=2, mode="fluid", resident_cost=0.01)
