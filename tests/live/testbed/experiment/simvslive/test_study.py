"""The tests of tests/unit/testbed/experiment/simvslive/test_study.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path

from testbed.cli import main as cli
from testbed.experiment import results as results_mod
from testbed.experiment.simvslive import report as vr
from testbed.experiment.simvslive.study import (
    ValidationResult,
    read_result,
)
from testbed.experiment.simvslive.study import read_spec as load_spec
from tests.support.simvslive import SPEC, _rates, _result


def _save(res: ValidationResult, path: Path) -> None:
    made = results_mod.made_now("cosched experiment run experiments/sim-vs-live.toml")
    results_mod.write(path, results_mod.Results("sim-vs-live", res.to_dict(), made))


def test_result_round_trip_and_report(tmp_path: Path) -> None:
    res = _result({"gang": 1.1, "paired-gang": 0.9})
    res.live[0].rates_after = _rates()
    res.meta.update(started="then", finished="later", spec={"name": "t", "nodes": 2})
    _save(res, tmp_path / "results.json")
    back = read_result(tmp_path / "results.json")
    assert back.to_dict() == res.to_dict()
    written = vr.plots(back, tmp_path)
    assert {p.name for p in written} == {"summary.png", "scatter.png", "series.png"}
    md = vr.markdown(back)
    assert "| gang | 0.5 | 3 | 2.33 | 2.57 | +10.0% |" in md
    assert "**met**" in md and "| other | paired-gang |" in md


def test_sim_only_reruns_the_simulations_from_saved_live_data(tmp_path: Path) -> None:
    res = _result({"gang": 1.0, "paired-gang": 1.0})
    _save(res, tmp_path / "results.json")
    argv = ["experiment", "run", str(SPEC), "--resimulate", "--out", str(tmp_path)]
    assert cli(argv) == 0
    back = read_result(tmp_path / "results.json")
    spec = load_spec(SPEC)
    assert vr.variants(back) == [s.label for s in spec.sims]
    assert len(back.sim) == len(spec.sims) * 2 and "simulated" in back.meta
    assert all(j.end_s is not None for s in back.sim for j in s.jobs)
    assert [(s["policy"], s["load"]) for s in back.sensitivity] == [
        (r.policy, r.load) for r in back.live
    ]
    assert (
        "## The simulated response against the dedicated rate"
        in (tmp_path / "report.md").read_text()
    )
