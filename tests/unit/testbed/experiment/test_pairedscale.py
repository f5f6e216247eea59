"""The paper-scale study (testbed/experiment/pairedscale): its --quick variant end to end on
a calibration with every term, the statistics and verdicts, the simulated mixes, and the
Figs. 3/13 trace analysis on given traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from testbed.experiment.pairedscale import mixes, report, study, trace
from testbed.sweep import SweepOptions, run_sweep
from tests.support.pairedscale import _spec


def test_same_params_same_result(tmp_path: Path, cal: Path) -> None:
    spec = study.load_study(_spec(tmp_path, cal)).quick_variant()
    one = [s for s in study.plan(spec) if s.params["label"] == "paired"][:1]
    a = run_sweep(one, SweepOptions(progress=False)).results[0]
    b = run_sweep(one, SweepOptions(progress=False)).results[0]
    assert a is not None and b is not None
    assert {k: v for k, v in a.items() if k != "seconds"} == {
        k: v for k, v in b.items() if k != "seconds"
    }


def test_spec_errors_are_one_line(tmp_path: Path, cal: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('[study]\nterms = ["warp"]\n[[runs]]\nlabel = "a"\npolicy = "gang"\n')
    with pytest.raises(study.StudyError, match="unknown model term"):
        study.load_study(p)
    p.write_text('[study]\nbogus = 1\n[[runs]]\nlabel = "a"\npolicy = "gang"\n')
    with pytest.raises(study.StudyError, match="bogus"):
        study.load_study(p)
    p.write_text(f'[study]\ncalibration = "{tmp_path}/none.toml"\nterms = ["launch"]\n'
                 '[[runs]]\nlabel = "a"\npolicy = "gang"\n')  # fmt: skip
    spec = study.load_study(p)
    with pytest.raises(study.StudyError):
        study.plan(spec)


def test_estimates_and_verdicts() -> None:
    e = study.Estimate((1.0, 2.0, 3.0))
    assert e.mean == 2.0
    assert e.ci == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-5)  # t(0.975, 2)
    assert math.isnan(study.Estimate((1.0,)).ci)
    assert report._judge([0.5, 0.6, 0.7], +1, True)[0] == report.REPRODUCED
    assert report._judge([0.5, 0.6, 0.7], +1, False)[0] == report.DIRECTION
    assert report._judge([0.5, -0.4, 0.7], +1, True)[0] == report.DIRECTION  # not beyond
    assert report._judge([-0.5, -0.6], +1, None)[0] == report.NOT_REPRODUCED
    assert report._judge([0.5], +1, True)[0] == report.DIRECTION  # one seed


def test_simulated_mixes_from_a_calibration(cal: Path) -> None:
    types = mixes.job_types(cal, io_files=8, io_latency=0.005)
    assert types["io"]["device"] == pytest.approx(8 * 0.005 * 24.0)
    assert types["interference"] == 0.01
    res = run_sweep(mixes.plan(types, mixes=(1, 4), duration=20.0), SweepOptions(progress=False))
    by = {(r["config"], r["mix"]): r for r in res.results if r is not None}
    # strict gang: each of four jobs gets a quarter of its alone rate
    assert by[("gang", 1)]["rates"]["io"] == pytest.approx(24.0 / 4, rel=0.1)
    # paired gang: mix 1's I/O job pairs with the compute rows, several times faster
    assert by[("paired-fig4-prose", 1)]["rates"]["io"] > 2.5 * by[("gang", 1)]["rates"]["io"]
    # mix 4: four I/O jobs pair with each other and queue at the node's one device
    assert by[("paired-fig4-prose", 4)]["rates"]["io"] < 1.3 * by[("gang", 4)]["rates"]["io"]


def _entries() -> list[dict[str, object]]:
    # job 1 alone at 0.9, then paired with new job 2 (0.1): predicted 1.0 at first
    return [
        {"q": 1, "utilization": {"1": 0.9}, "slot": 0, "partner": None},
        {"q": 2, "utilization": {"1": 0.88, "2": 0.1}, "slot": 0, "partner": 1},
        {"q": 3, "utilization": {"1": 0.9, "2": 0.12}, "slot": 1, "partner": 0},
        {"q": 4, "utilization": {"1": 0.45, "2": 0.5}, "slot": 0, "partner": 1},
    ]


def test_replay_predicts_what_the_policy_would() -> None:
    pts = trace.replay(_entries(), sharp_change=None)
    first = next(p for p in pts if p["job"] == 2)
    assert first["new"] and first["predicted"] == 1.0
    # job 1's prediction for quantum 3: eq. (1) over (0.88, 0.9) = (0.4 x 0.88 + 0.3 x 0.9) / 0.7
    p3 = next(p for p in pts if p["job"] == 1 and p["q"] == 3)
    assert p3["predicted"] == pytest.approx((0.4 * 0.88 + 0.3 * 0.9) / 0.7)
    stats = trace.fig3_stats(pts)
    assert stats["new_job_points"] == 2 and stats["points"] == 7
    # with the sharp-change rule job 1's drop 0.9 -> 0.45 would flag it: nothing after here
    flagged = trace.replay([*_entries(), {"q": 5, "utilization": {"1": 0.9}, "partner": None}],
                           sharp_change=0.2)  # fmt: skip
    assert next(p for p in flagged if p["q"] == 5)["predicted"] == 1.0


def test_fig13_stats_counts_cpu_pairs() -> None:
    s = trace.fig13_stats(_entries(), {"1": 100.0, "2": 110.0})
    assert s["mean_response"] == 105.0
    assert s["paired_share"] == 0.75
    assert s["cpu_pairs_share"] == 0.25  # quantum 4: 0.45 + 0.5 > 0.8, both > 0.3
    # that pair sums to 0.95, under 1 - m = 0.99: it still fits
    assert s["cpu_pair_sum"] == pytest.approx(0.95) and s["cpu_pairs_fitting"] == 1.0
    # two compute phases sharing the processor to the full (0.5 + 0.5) no longer fit
    full = [*_entries()[:3], {"q": 4, "utilization": {"1": 0.5, "2": 0.5}, "partner": 1}]
    s = trace.fig13_stats(full, {})
    assert s["cpu_pair_sum"] == pytest.approx(1.0) and s["cpu_pairs_fitting"] == 0.0
    assert math.isnan(trace.fig13_stats(_entries()[:1], {})["cpu_pair_sum"])


def test_figs78_sets_live_beside_simulated(tmp_path: Path, cal: Path) -> None:
    from testbed.experiment.pairedscale import figs78

    doc = json.loads(Path("docs/results/paired-vs-gang-2node/results.json").read_text())
    text, data = figs78.markdown(doc, cal, "t")
    doc = dict(figs78.unwrap(doc))
    point = data["points"][0]
    # job types from the live strict-gang runs: four jobs, one quantum in four
    gang0 = next(r for r in doc["runs"] if r["config"] == "gang" and r["mix"] == 0)
    rate0 = sum(j["barriers_per_second"] for j in gang0["jobs"]) / 4
    assert point["types"]["compute"]["rate"] == pytest.approx(4 * rate0)
    # the simulated strict gang gives each compute job its quarter back
    assert point["sim"]["gang/0/compute"] == pytest.approx(rate0, rel=0.05)
    ids = [c["id"] for c in data["claims"]]
    assert "wiseman2003/fig7/mix1-io" in ids and "## The paper beside ours" in text
    assert figs78.live_points({"points": [{"value": 4, "result": doc}]})[0][0] == 4


def test_trace_report_from_given_runs(tmp_path: Path, cal: Path) -> None:
    entries = [*_entries(), {"q": 5, "utilization": {"1": 0.5, "2": 0.45}, "partner": 0}]
    jobs = [{"job": 1, "submit": 0.0, "end": 100.0, "target": 0.9},
            {"job": 2, "submit": 5.0, "end": 115.0, "target": 0.1}]  # fmt: skip
    fig3 = {"nodes": 2, "gap": 6, "runs": [{"trace": entries, "jobs": jobs, "params": {}}]}
    fig13 = {"nodes": 2, "runs": [
        {"params": {"sharp_change": "none"}, "trace": entries, "jobs": jobs},
        {"params": {"sharp_change": "0.2"}, "trace": entries, "jobs": jobs[:1]},
    ]}  # fmt: skip
    (tmp_path / "fig3-live.json").write_text(json.dumps(fig3))
    (tmp_path / "fig13-live.json").write_text(json.dumps(fig13))
    text = trace.report(tmp_path, cal).read_text()
    assert "Pearson r" in text and "| simulated | 0.2 |" in text
    assert (tmp_path / "fig3.png").exists() and (tmp_path / "fig13.png").exists()
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert {c["where"] for c in claims} == {"§2.3, Fig. 3", "§4.2.3, Fig. 13"}
