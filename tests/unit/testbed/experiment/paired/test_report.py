"""The paired-vs-gang report: ratios per matching, fidelity, run shares, sweeps, round trips."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.experiment.paired.report import (
    fidelity,
    markdown,
    mix1,
    plots,
    sweep_markdown,
    sweep_plots,
    targets,
    text_summary,
)
from testbed.experiment.paired.run import (
    ExperimentResult,
    JobResult,
    RunResult,
    SweepPoint,
    SweepResult,
)


def _envelope(path: Path, data: Any) -> None:
    from testbed.experiment import results

    made = results.made_now("cosched experiment run experiments/paired-vs-gang.toml")
    results.write(path, results.Results("paired-live", data, made))


CONFIGS = ("gang", "paired-fig4", "paired-fig4-prose", "paired-best-fit")
# mix 1 rates (compute, io) per config
MIX1 = {
    "gang": (2.0, 5.0),
    "paired-fig4": (1.9, 10.0),
    "paired-fig4-prose": (1.95, 16.0),
    "paired-best-fit": (1.7, 18.0),
}


def _run(config: str, mix: int, nodes: int = 2) -> RunResult:
    compute, io = MIX1[config] if mix == 1 else (2.0, 5.0)
    jobs = []
    for i in range(4):
        kind = "compute" if i < 4 - mix else "io"
        rate = compute if kind == "compute" else io
        jobs.append(JobResult(i + 1, f"{kind}{i}", kind, i, "done", 30, rate, 0.2, [0.2, 0.21]))
    partner = {3: 0.75, 0: 0.08} if config != "gang" and mix == 1 else {}
    return RunResult(
        config=config,
        mix=mix,
        jobs=jobs,
        quanta=75,
        skew_p50_s=0.0005,
        skew_p99_s=0.002,
        matching_success_ratio=None if config == "gang" else 0.8,
        slot_partner_ratio=partner,
        wall_seconds=16.0,
        rows=4,
        other_cores=0.03,
    )


def _result(nodes: int = 2, mech: str = "cpuset", cpus: float = 1.0) -> ExperimentResult:
    spec = {
        "name": "t",
        "nodes": nodes,
        "link": "myrinet",
        "cpus_per_node": cpus,
        "cpu_mechanism": mech,
        "quantum": 0.2,
        "duration": 15.0,
        "compute": {
            "gcomp": 600000,
            "gio": 0,
            "nbytes": 8193,
            "device_latency": 0.0,
            "wait": "block",
        },
        "io": {"gcomp": 0, "gio": 8, "nbytes": 8193, "device_latency": 0.005, "wait": "block"},
    }
    cluster = {"nodes": [f"n{i}" for i in range(nodes)], "cpu": {"mechanism": mech}}
    runs = [_run(c, m, nodes) for c in CONFIGS for m in (0, 1, 4)]
    return ExperimentResult(spec=spec, cluster=cluster, runs=runs)


def test_mix1_ratios_and_run_shares_per_matching() -> None:
    r = _result()
    m = mix1(r, "paired-fig4-prose")
    assert m["io_ratio"] == pytest.approx(16.0 / 5.0)
    assert m["compute_loss"] == pytest.approx(1 - 1.95 / 2.0)
    # the I/O job (slot 3): its own turn (1/4) plus 75 % of quanta as partner
    assert m["io_run_fraction"] == pytest.approx(1.0)
    assert mix1(r, "gang")["io_run_fraction"] == pytest.approx(0.25)


def test_targets_for_every_paired_config() -> None:
    got = dict(targets(_result()))
    io = [(t, ok) for t, ok in got.items() if "I/O job" in t]
    assert len(io) == 3
    assert got[next(t for t in got if "I/O job" in t and "paired-fig4 " in t)] is False
    assert got[next(t for t in got if "I/O job" in t and "paired-best-fit" in t)] is True
    comp = [ok for t, ok in got.items() if "compute jobs lose" in t]
    assert comp == [True, True, False]  # best fit lost 15 %


def test_fidelity_says_which_configuration_is_faithful() -> None:
    ok, text = fidelity({"cpus_per_node": 1.0}, {"cpu": {"mechanism": "cpuset"}})
    assert ok and "Faithful" in text and "own processor" in text
    ok, text = fidelity({"cpus_per_node": 0.5}, {"cpu": {"mechanism": "shared"}})
    assert not ok and "2 nodes share each core" in text and "reference" in text
    assert not fidelity({"cpus_per_node": 0.5}, {"cpu": {"mechanism": "cfs"}})[0]
    assert not fidelity({"cpus_per_node": None}, {"cpu": {"mechanism": "none"}})[0]


def test_markdown_and_text_carry_all_four_configs(tmp_path: Path) -> None:
    r = _result()
    md = markdown(r)
    for c in CONFIGS:
        assert f"| {c} |" in md
    assert "paired-fig4-prose / gang" in md and "3.20×" in md
    assert "Faithful to the paper's hardware" in md
    assert "I/O run share" in md and "host busy outside" in md
    txt = text_summary(r)
    assert "paired-fig4-prose" in txt and "hardware: faithful" in txt
    shared = markdown(_result(4, "shared", 0.5))
    assert "Not faithful" in shared
    plots(r, tmp_path)
    assert (tmp_path / "fig7_top.png").stat().st_size > 0
    assert (tmp_path / "fig7_bottom.png").stat().st_size > 0


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
