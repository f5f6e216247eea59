"""The program's costs by gang size (testbed/experiment/execmodel/programcal.py): the figures
derived from given rank reports and controller records, the fit, the merge into a
calibration file."""

from __future__ import annotations

import tomllib

import pytest

from testbed.experiment.execmodel.calibrate import merge_sizes
from testbed.experiment.execmodel.programcal import (
    SizeCalibration,
    SizeRun,
    fine_check,
    model_terms,
    run_from,
    summarise,
)
from testbed.experiment.harness import LiveError
from testbed.sim.calibration import load_calibration


def _report(started: float, ended: float, barriers: int, seconds: float, cpu: float) -> dict:
    return {
        "barriers": barriers,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "started_wall": started,
        "ended_wall": ended,
        "startup_cpu_seconds": 0.4,
    }


def test_run_from_reports_and_record() -> None:
    # controller started the job at 100.0 and ended it at 108.5; the ranks began at
    # 100.9 and 101.0 (the last one counts), ended at 108.1 and 108.2
    record = {"start_time": 100.0, "end_time": 108.5}
    reports = [_report(100.9, 108.1, 1000, 7.2, 0.72), _report(101.0, 108.2, 1000, 7.2, 0.36)]
    r = run_from(2, "barrier", 0, record, reports)
    assert r.launch == pytest.approx(1.0)
    assert r.teardown == pytest.approx(0.3)
    assert r.barrier_wall == pytest.approx(7.2e-3)
    assert r.barrier_cpu == pytest.approx((0.72e-3 + 0.36e-3) / 2)
    assert r.cpu_share == pytest.approx((0.1 + 0.05) / 2)
    assert r.launch_cpu == pytest.approx(0.4)
    # run-queue waits on the barrier's critical path: rank 0's and the others' mean
    busy = [dict(reports[0], runq_seconds=0.5), dict(reports[1], runq_seconds=0.3)]
    rb = run_from(2, "barrier", 0, record, busy)
    assert rb.runq == pytest.approx(0.8e-3)
    assert rb.quiet_wall == pytest.approx(6.4e-3)
    with pytest.raises(LiveError, match="incomplete"):
        run_from(2, "barrier", 0, record, [{"barriers": 3}])
    with pytest.raises(LiveError, match="no start"):
        run_from(2, "barrier", 0, {}, reports)


def _runs() -> list[SizeRun]:
    out = []
    for size, wall, cpu, launch in ((2, 1.5e-3, 0.3e-3, 1.0), (4, 2.5e-3, 0.5e-3, 1.4),
                                    (8, 4.5e-3, 0.9e-3, 2.6)):  # fmt: skip
        for k, d in enumerate((-1e-5, 1e-5)):
            out.append(SizeRun(size, "barrier", k, wall + d, cpu, cpu / wall, launch, 0.5, 0.2))
        # the fine job: 1.2 ms of compute per barrier on every size
        out.append(
            SizeRun(size, "fine", 0, 1.2e-3 + wall, 1.2e-3 + cpu, 0.0, launch, 0.5, 0.2, gcomp=9)
        )
    return out


def test_fit_takes_every_size_and_launch_from_the_smallest() -> None:
    sums = summarise(_runs())
    assert [(s.kind, s.size, s.n) for s in sums] == [
        ("barrier", 2, 2), ("barrier", 4, 2), ("barrier", 8, 2),
        ("fine", 2, 1), ("fine", 4, 1), ("fine", 8, 1),
    ]  # fmt: skip
    t = model_terms(sums)
    assert t["barrier_wall_base"] == pytest.approx(1.0e-3)
    assert t["barrier_wall_per_rank"] == pytest.approx(0.5e-3)
    assert t["barrier_cpu_per_rank"] == pytest.approx(0.1e-3)
    assert t["launch"] == pytest.approx(1.0) and t["teardown"] == pytest.approx(0.2)


def test_fine_check_predicts_from_the_barrier_runs() -> None:
    rows = fine_check(summarise(_runs()))
    assert [int(r["size"]) for r in rows] == [2, 4, 8]
    for r in rows:
        assert r["predicted_barrier_s"] == pytest.approx(r["measured_barrier_s"])
    # CPU share falls with the size: (1.2 + 0.9) / (1.2 + 4.5) at 8 nodes
    assert rows[2]["predicted_cpu_share"] == pytest.approx(2.1 / 5.7)


def test_merge_keeps_the_file_and_adds_the_terms() -> None:
    existing = (
        "[model]\nquantum = 0.2\ninterference = 0.17\ncontext_switch = 0.0\n\n"
        "[measured]\nrepeats = 3\n\n[measured.alone.io.io_rate]\nmean = 23.8\n\n"
        '[host]\ndate = "2026-11-24"\n'
    )
    text = merge_sizes(existing, SizeCalibration(_runs(), 75.0, 2), {"date": "2026-12-01"})
    doc = tomllib.loads(text)
    assert doc["model"]["interference"] == 0.17
    assert doc["measured"]["alone"]["io"]["io_rate"]["mean"] == 23.8
    assert doc["model"]["barrier_wall_per_rank"] == pytest.approx(0.5e-3)
    assert doc["measured"]["sizes"]["barrier_n8"]["launch"] == pytest.approx(2.6)
    assert doc["host"]["date"] == "2026-11-24" and doc["host"]["sizes"]["date"] == "2026-12-01"


def test_merged_file_loads_as_a_calibration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    existing = "[model]\nquantum = 0.2\ninterference = 0.17\ncontext_switch = 0.0\n"
    p = tmp_path / "cal.toml"
    p.write_text(merge_sizes(existing, SizeCalibration(_runs(), 75.0, 2), {}))
    cal = load_calibration(p)
    assert cal.launch == pytest.approx(1.0) and cal.barrier is not None
    assert cal.barrier.wall(16) == pytest.approx(8.5e-3)
