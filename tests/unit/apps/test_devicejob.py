"""The device-bound job's pure parts (apps/devicejob.py): the pause that makes a device
busy ``duty`` of the time alone, the unit loop's counts, the arguments it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps import devicejob


def test_the_pause_keeps_the_device_busy_duty_of_the_time() -> None:
    for best, duty in ((0.008, 0.8), (0.01, 0.9), (0.042, 0.5)):
        pause = devicejob.pause_for(best, duty)
        assert best / (best + pause) == pytest.approx(duty)
    assert devicejob.pause_for(0.01, 1.0) == 0.0
    with pytest.raises(ValueError, match="duty"):
        devicejob.pause_for(0.01, 0.0)


def test_a_fixed_number_of_units_is_done_and_counted() -> None:
    calls: list[int] = []
    res = devicejob.run_units(lambda: calls.append(1), 1.0, 7, None)
    assert len(calls) == 7 and res["units"] == 7
    assert res["elapsed_s"] >= 0 and res["best_unit_s"] >= 0


def test_the_shortest_unit_sets_the_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.0, 0.5, 0.5, 0.6, 0.6, 1.6, 1.6])  # units of 0.5, 0.1, 1.0 s
    monkeypatch.setattr(devicejob.time, "perf_counter", lambda: next(clock))
    pauses: list[float] = []
    monkeypatch.setattr(devicejob.time, "sleep", pauses.append)
    res = devicejob.run_units(lambda: None, 0.5, 3, None)
    # duty 0.5: pause = the best unit so far; a 1.0 s unit (stretched) does not lengthen it
    assert pauses == pytest.approx([0.5, 0.1, 0.1]) and res["best_unit_s"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    "argv",
    [
        ["--kind", "cpu"],  # neither --units nor --seconds
        ["--kind", "cpu", "--units", "3", "--seconds", "1"],
        ["--kind", "cpu", "--units", "3", "--duty", "1.5"],
        ["--kind", "disk", "--units", "0"],
        ["--kind", "tape", "--units", "1"],
    ],
)
def test_bad_arguments_are_one_usage_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        devicejob.main(argv)
    assert e.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_cpu_job_reports_its_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert devicejob.main(["--kind", "cpu", "--units", "2", "--loops", "10"]) == 0
    out = capsys.readouterr().out
    assert '"kind": "cpu"' in out and '"units": 2' in out


def test_a_disk_dir_it_cannot_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-dir"
    assert devicejob.main(["--kind", "disk", "--units", "1", "--dir", str(missing)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(missing) in err and "--dir" in err
