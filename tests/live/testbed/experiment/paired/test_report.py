"""The tests of tests/unit/testbed/experiment/paired/test_report.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.experiment.paired.report import (
    sweep_markdown,
    sweep_plots,
)
from testbed.experiment.paired.run import (
    ExperimentResult,
    SweepPoint,
    SweepResult,
)
from tests.support.paired_report import _result


def _envelope(path: Path, data: Any) -> None:
    from testbed.experiment import results

    made = results.made_now("cosched experiment run experiments/paired-vs-gang.toml")
    results.write(path, results.Results("paired-live", data, made))


def test_results_round_trip_and_the_report_command_rewrites_them(
    tmp_path: Path, capsys: Any
) -> None:
    r = _result()
    back = ExperimentResult.from_dict(json.loads(r.to_json()))
    assert back == r
    _envelope(tmp_path / "results.json", {"result": asdict(r)})
    assert main(["experiment", "report", str(tmp_path / "results.json")]) == 0
    assert "paired-fig4-prose" in (tmp_path / "report.md").read_text()
    assert "barriers per second" in capsys.readouterr().out


def _sweep(key: str) -> SweepResult:
    if key == "nodes":
        pts = [
            SweepPoint("nodes2", 2.0, _result(2)),
            SweepPoint("nodes4", 4.0, _result(4, "shared", 0.5)),
        ]
    else:
        pts = []
        for v in (1.0, 0.4):
            res = _result()
            res.spec["compute"] = dict(res.spec["compute"], gcomp=round(600000 * v))
            pts.append(SweepPoint(f"gcomp{v:g}", v, res))
    return SweepResult(name=f"s-{key}", key=key, points=pts)


@pytest.mark.parametrize(("key", "fig"), [("nodes", "fig8"), ("gcomp_scale", "fig9")])
def test_sweep_reports(tmp_path: Path, key: str, fig: str, capsys: Any) -> None:
    sweep = _sweep(key)
    md = sweep_markdown(sweep)
    assert f"Wiseman & Feitelson 2003 Fig. {fig[-1]})" in md.splitlines()[0]
    assert f"![Fig. {fig[-1]}]({fig}.png)" in md
    if key == "nodes":
        assert "2 nodes" in md and "4 nodes" in md and "not faithful" in md
        assert "2, 4, 8 and 12" in md  # what the paper ran
    else:
        assert "G_comp 240000" in md
    assert sweep_plots(sweep, tmp_path) == f"{fig}.png"
    back = SweepResult.from_dict(json.loads(sweep.to_json()))
    assert back == sweep
    _envelope(tmp_path / "results.json", {"sweep": asdict(sweep)})
    assert main(["experiment", "report", str(tmp_path / "results.json")]) == 0
    assert (tmp_path / "report.md").exists()
    assert (tmp_path / sweep.points[0].label / "report.md").exists()
    capsys.readouterr()
