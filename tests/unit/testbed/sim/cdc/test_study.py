"""The paper-scale CDC study (seeds, intervals, verdicts) and the sim-vs-live validation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from testbed.sim.cdc import study, studyreport, validate
from tests.support.cdc_study import REPO, SPEC

LIVE = REPO / "docs" / "results" / "cdc-policies" / "results.json"


def test_mean_ci_by_hand() -> None:
    m, h = study.mean_ci([1.0, 2.0, 3.0])
    # sd 1, t(0.975, 2) = 4.3027
    assert m == pytest.approx(2.0)
    assert h == pytest.approx(4.3027 / math.sqrt(3), rel=1e-4)
    assert math.isnan(study.mean_ci([5.0])[1])


@pytest.mark.parametrize(
    ("mean", "half", "verdict"),
    [
        (-10.0, 3.0, "direction reproduced"),
        (-10.0, 15.0, "not resolved (within the seed-to-seed spread)"),
        (4.0, 3.0, "refuted (opposite direction)"),
        (-10.0, math.nan, "one seed: no verdict"),
    ],
)
def test_verdict_respects_the_interval(mean: float, half: float, verdict: str) -> None:
    assert study.verdict(mean, half, -36.6) == verdict


def test_the_spec_lists_the_paper_study() -> None:
    s = study.load_spec(SPEC)
    cs = study.cells(s)
    fig7 = [c for c in cs if c["part"] == "fig7-8"]
    assert len(fig7) == 9 * 2 * 5  # 9 schemes x 2 loads x 5 seeds
    assert {c["mpl"] for c in fig7 if c["scheme"] == "batch"} == {1}
    fig10 = [c for c in cs if c["part"] == "fig10-11"]
    assert {c["mpl"] for c in fig10} == {1, 2, 3, 4}
    assert all(c["jobs"] == 20 for c in study.cells(s, 20))
    p = study.params_of(s, fig7[0])
    assert p["workload"] == "WL6:jobs=100,load=heavy" and p["speeds"] == "paper"


def test_a_bad_scheme_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[[parts]]\nname = "x"\nworkloads = ["WL6"]\nschemes = ["cc-x"]\n')
    with pytest.raises(study.StudyError, match="scheme 'cc-x' unknown; valid: batch"):
        study.load_spec(f)


def test_fluid_options_reach_the_runs(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    parts = '[[parts]]\nname = "x"\nworkloads = ["WL6"]\nschemes = ["sb"]\n'
    f.write_text("[cdc]\nfluid = {past_queued = true, whole_reps = true}\n" + parts)
    s = study.load_spec(f)
    p = study.params_of(s, study.cells(s)[0])
    assert p["fluid"] == {**study.FLUID, "whole_reps": True, "past_queued": True}
    f.write_text("[cdc]\nfluid = true\n" + parts)
    assert study.params_of(study.load_spec(f), study.cells(s)[0])["fluid"] == study.FLUID
    f.write_text("[cdc]\nfluid = false\n" + parts)
    assert study.params_of(study.load_spec(f), study.cells(s)[0])["fluid"] is None


def test_runs_made_with_other_fluid_options_are_not_mixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "s.toml"
    parts = '[[parts]]\nname = "x"\nworkloads = ["WL6"]\nschemes = ["sb"]\njobs = 2\n'
    f.write_text("[cdc]\nfluid = {whole_reps = true}\n" + parts)
    s = study.load_spec(f)
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    c = study.cells(s)[0]
    run = {"cell": c, "params": study.params_of(s, c)}
    study.run_file(out, c).write_text(json.dumps(run))
    study.check_out(s, out)  # the same options: resumed, no complaint
    f.write_text('kind = "cdc-sim"\n[cdc]\nfluid = true\n' + parts)
    with pytest.raises(study.StudyError, match=r"ran with fluid = .*whole_reps.*another --out"):
        study.run(study.load_spec(f), [], out, progress=False)
    capsys.readouterr()
    assert study.main([str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "ran with fluid" in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in (out / "runs").iterdir()) == [study.run_file(out, c).name]


@pytest.mark.parametrize("value", ["{jump_far = true}", '"yes"', '{whole_reps = "on"}'])
def test_a_bad_fluid_option_is_one_line(tmp_path: Path, value: str) -> None:
    f = tmp_path / "s.toml"
    f.write_text(f'[cdc]\nfluid = {value}\n[[parts]]\nname = "x"\nworkloads = ["WL6"]\n')
    with pytest.raises(study.StudyError, match=r"\[cdc\] fluid.*whole_reps, past_queued"):
        study.load_spec(f)


def _run(scheme: str, seed: int, response: float, bcr: float) -> dict[str, Any]:
    cell = {"part": "fig7-8", "wl": "WL6", "load": "heavy", "scheme": scheme, "mpl": 5,
            "seed": seed, "jobs": 20}  # fmt: skip
    return {"cell": cell, "response_s": response, "bcr": bcr, "md_s": 0.01, "wait_s": 1.0,
            "execution_s": response - 1.0, "wait_share": 1.0 / response, "wall_s": 1.0}  # fmt: skip


def test_claims_are_paired_per_seed_with_a_verdict(tmp_path: Path) -> None:
    runs = [
        _run("sb", 1, 100.0, 0.5), _run("cc-b", 1, 80.0, 0.4),
        _run("sb", 2, 200.0, 0.5), _run("cc-b", 2, 170.0, 0.4),
        _run("sb", 3, 150.0, 0.5), _run("cc-b", 3, 123.0, 0.4),
    ]  # fmt: skip
    xs = studyreport.paired_change(runs, ("WL6", "heavy", 20), "cc-b", "sb", 5, "response_s", None)
    assert xs == pytest.approx([-0.20, -0.15, -0.18])
    rows = studyreport.claims(runs)
    resp = next(r for r in rows if r["text"].startswith("CC-B vs SB, avg. response"))
    (o,) = resp["ours"]
    assert o["mean_pct"] == pytest.approx(-17.6667, rel=1e-4)
    assert o["verdict"] == "direction reproduced"  # -17.7 +- 6.3 % lies below 0
    hyb = next(r for r in rows if "HYBRID, avg. response" in r["text"])
    assert hyb["ours"] == []  # no HYBRID runs: not run
    # the report is built from run files only and says what it holds
    (tmp_path / "runs").mkdir()
    for r in runs:
        study.run_file(tmp_path, r["cell"]).write_text(json.dumps(r))
    doc = studyreport.build(study.load_spec(SPEC), tmp_path, SPEC)
    (tmp_path / "report.md").write_text(studyreport.markdown(doc))
    cov = next(c for c in doc["coverage"] if c["part"] == "fig7-8")
    assert cov["present_full_size"] == 0 and cov["present_smaller"] == 6
    md = (tmp_path / "report.md").read_text()
    assert "| -36.6 % | -17.7 ± 6.3 % | 3 | direction reproduced |" in md
    assert "| §5.3, Fig. 7(a) | CC-B vs HYBRID, avg. response time, heavy load | -24.7 % | " \
           "not run |" in md  # fmt: skip


def test_validation_compares_with_the_stated_bounds() -> None:
    cell = {
        "scheme": "sb", "load": "heavy", "mpl": 5,
        "live": {"response_s": 10.0, "bcr": 0.10, "md_s": 0.010},
        "sim": {"response_s": 11.9, "bcr": 0.16, "md_s": 0.0131},
    }  # fmt: skip
    c = validate.compare(cell)
    assert c["response_rel"] == pytest.approx(0.19) and c["response_ok"]
    assert c["bcr_abs"] == pytest.approx(0.06) and not c["bcr_ok"]
    assert c["md_rel"] == pytest.approx(0.31) and not c["md_ok"]
    assert validate.kendall_tau(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert validate.kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    assert validate.wait_mode("cc-b") == "block" and validate.wait_mode("sb") == "spinblock"


def test_a_live_run_and_its_simulated_twin() -> None:
    """The committed live stream, rebuilt, matches the recorded jobs and simulates."""
    live = json.loads(LIVE.read_text())["data"]  # the results envelope (kind cdc-live)
    spec = REPO / "experiments" / "cdc-policies.toml"
    (cell,) = validate.simulate(live, spec, "testbed", only={("cc-b", "heavy", 5)})
    assert cell["sim"]["done"] == cell["live"]["done"] == 20
    # every job computes alone at least its iterations on a 0.5-CPU node: the mean is above
    # the shortest application's compute (and the run ended)
    assert cell["sim"]["response_s"] > 1.0
    assert 0.0 < cell["sim"]["bcr"] < 1.0
    bad = dict(live, spec=dict(live["spec"], seed=1))
    with pytest.raises(validate.ValidateError, match="seed/jobs"):
        validate.simulate(bad, spec, "testbed")
