"""The simulated Figs. 10-12 study: spec parsing, a quick run, the report, calibration files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.experiment.fields import SpecError
from testbed.experiment.pairedsim import study as simstudy  # the paired-sim study
from testbed.sim.calibration import (
    BUILTIN,
    CalibrationError,
    load_calibration,
    resolve_calibration,
)
from testbed.sweep.errors import RunsFailed
from tests.support.pairedsim import SPEC, _cal


def test_calibration_file_is_read_and_checked(tmp_path: Path) -> None:
    cal = load_calibration(_cal(tmp_path))
    assert (cal.interference, cal.context_switch, cal.quantum) == (0.1, 0.01, 0.2)
    assert "interference 0.100" in cal.describe()
    assert resolve_calibration("none") is BUILTIN
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\ninterference = 1.5\ncontext_switch = 0\n")
    with pytest.raises(CalibrationError, match=r"interference = 1.5 is outside"):
        load_calibration(bad)
    bad.write_text("[measured]\n")
    with pytest.raises(CalibrationError, match="no \\[model\\]"):
        load_calibration(bad)
    with pytest.raises(CalibrationError, match="cosched calibrate"):
        load_calibration(tmp_path / "missing.toml")


def test_the_committed_calibration_if_any_is_valid() -> None:
    cal = resolve_calibration(None)
    assert 0 <= cal.interference < 1 and cal.context_switch >= 0


def test_quick_study_runs_and_reports(tmp_path: Path) -> None:
    spec_path = tmp_path / "study.toml"
    spec_path.write_text(SPEC.format(cal=_cal(tmp_path)))
    spec = simstudy.read_study(spec_path)
    assert [r.label for r in spec.runs] == ["gang", "paired", "paired-hetero"]
    results, meta = simstudy.run_study(spec, quick=True)
    assert len(results) == 6 and meta["calibration"]["interference"] == 0.1
    for r in results:
        assert r.mean_response > 0 and r.series and r.series[-1][1] == 0  # all jobs ended
    text = simstudy.markdown(results, meta)
    assert "| load | gang | paired | paired-hetero | gang ÷ paired | paper |" in text
    assert "nearly 6" not in text  # 0.95 was not run in quick mode
    out = tmp_path / "out"
    out.mkdir()
    assert {p.name for p in simstudy.plots(results, out)} == {"fig10.png", "fig11.png", "fig12.png"}
    again, _ = simstudy.from_data(json.loads(simstudy.dump(results, meta)))
    assert [r.mean_response for r in again] == [r.mean_response for r in results]
    verdicts = {what: ok for what, ok, _ in simstudy.targets(results)}
    assert verdicts["gang ÷ paired response ≥ 4.0 at load 0.95"] is None  # not run


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("loads = [0.5, 0.9]", "loads = [2.0]"),
        ('mode = "fluid"', 'mode = "warp"'),
        ('policy = "gang"', 'policy = "nope"'),
    ],
)
def test_bad_study_specs_give_one_line(tmp_path: Path, change: str, message: str) -> None:
    spec_path = tmp_path / "study.toml"
    spec_path.write_text(SPEC.format(cal=_cal(tmp_path)).replace(change, message))
    with pytest.raises(SpecError) as e:
        simstudy.read_study(spec_path)
    assert "\n" not in str(e.value)


def test_a_run_that_fails_is_one_line(tmp_path: Path) -> None:
    spec_path = tmp_path / "study.toml"
    spec_path.write_text(
        SPEC.format(cal=_cal(tmp_path)).replace('workload = "lublin"', 'workload = "nope.swf"')
    )
    spec = simstudy.read_study(spec_path)
    with pytest.raises(RunsFailed, match="runs failed") as e:
        simstudy.run_study(spec, quick=True)
    assert "\n" not in str(e.value)  # each failed run is listed on stderr, one line each


def test_simulate_takes_the_execution_model_from_the_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import main

    base = ["simulate", "--policy", "paired-gang", "--nodes", "8", "--jobs", "30"]
    base += ["--mode", "fluid", "--quiet", "--out", str(tmp_path / "o")]
    cal = _cal(tmp_path, interference=0.2, cs=0.05)
    assert main([*base, "--calibration", str(cal)]) == 0
    out = capsys.readouterr().out
    assert f"execution model from {cal}: interference 0.200, context switch 50.0 ms" in out
    assert main([*base, "--calibration", str(cal), "--interference", "0.1"]) == 0
    assert "interference 0.100, context switch 50.0 ms (flags over" in capsys.readouterr().out
    assert main([*base, "--calibration", "none"]) == 0
    assert "from built-in: interference 0.050" in capsys.readouterr().out
    assert main([*base, "--calibration", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cosched calibrate" in err
