"""`make run`'s own path: scripts/run-default.sh runs `cosched experiment run
experiments/paired-vs-gang.toml`, the paired study's run; a [sweep] spec takes its sweep path.
Here the cluster and the controller's runs are stand-ins (the live path is
tests/integration/test_paired_live.py); everything else is the real code: the CLI, the
pipeline, the spec, the runner's loops and quiet-host retries, results.json and the report."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.experiment import pipeline
from testbed.experiment.paired import run as prun
from testbed.experiment.paired.run import ControlledRun, JobResult

REPO = Path(__file__).resolve().parents[5]


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, list[str]]]:
    calls: list[tuple[str, int, list[str]]] = []
    clusters: list[int] = []

    @contextlib.contextmanager
    def cluster(spec: Any, reuse: bool, say: Any, switch: str = "freezer") -> Iterator[Any]:
        clusters.append(spec.nodes)
        yield {
            "nodes": [f"n{i}" for i in range(spec.nodes)],
            "link": spec.link,
            "delay_mechanism": "userspace",
            "cgroups": "hybrid",
            "cpu": {"mechanism": spec.cpu_mechanism},
            "state": "/nonexistent",
        }

    def controlled(
        state: str,
        nodes: int,
        quantum: float,
        duration: float,
        policy: str,
        params: dict[str, str],
        jobs: list[Any],
        run_dir: Path,
    ) -> ControlledRun:
        calls.append((policy, nodes, [kind for _, kind, _ in jobs]))
        paired = policy != "gang"
        rate = {"compute": 3.0, "io": 12.0 if paired else 6.0}
        results = [
            JobResult(i + 1, name, kind, i, "done", 30, rate[kind], 0.5, [0.5, 0.5])
            for i, (name, kind, _app) in enumerate(jobs)
        ]
        status = {
            "quanta": 50,
            "skew_p50_s": 0.0004,
            "skew_p99_s": 0.0009,
            "matching_success_ratio": 0.5 if paired else None,
            "slot_partner_ratio": {"3": 0.5} if paired else {},
        }
        return ControlledRun(results, status, 4, duration)

    monkeypatch.setattr(prun, "require_root", lambda *a: None)
    monkeypatch.setattr(prun, "local_cluster", cluster)
    monkeypatch.setattr(prun, "cluster_cpu_reader", lambda: None)
    monkeypatch.setattr(prun.hostload, "wait_quiet", lambda *a, **k: 0.0)
    # a quiet host (a busy one would have the runs retried: test_quiet_host_retries)
    monkeypatch.setattr(prun.hostload, "other_cores", lambda a, b: 0.01)
    monkeypatch.setattr(prun, "run_controlled", controlled)
    calls.append(("clusters", 0, clusters))  # type: ignore[arg-type]
    return calls


def test_make_run_runs_every_config_and_mix_and_writes_the_report(
    fake_cluster: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (REPO / "scripts" / "run-default.sh").read_text()
    assert "experiment run experiments/paired-vs-gang.toml" in script
    out = tmp_path / "o"
    spec = str(REPO / "experiments" / "paired-vs-gang.toml")
    assert main(["experiment", "run", spec, "--out", str(out)]) == 0
    runs = fake_cluster[1:]
    assert len(runs) == 4 * 5  # configs x mixes
    assert {p for p, _, _ in runs} == {"gang", "paired-gang"}
    assert all(n == 4 and len(kinds) == 4 for _, n, kinds in runs)
    res = pipeline.read(out / "results.json")
    assert (
        res.kind == "paired-live"
        and res.made.command == f"cosched experiment run {spec} --out {out}"
    )
    assert len(res.data["result"]["runs"]) == 20
    report = (out / "report.md").read_text()
    assert "## Barriers per second" in report and "## The paper beside ours" in report
    assert (out / "fig7_top.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "barriers per second" in printed and f"report: {out}/report.md" in printed
    # the report is what results.json gives
    (out / "report.md").unlink()
    pipeline.report(out / "results.json")
    assert (out / "report.md").read_text() == report


def test_a_sweep_brings_each_cluster_size_up_and_writes_each_point(
    fake_cluster: list[Any], tmp_path: Path
) -> None:
    out = tmp_path / "fig8"
    spec = str(REPO / "experiments" / "fig8-cluster-size.toml")
    assert main(["experiment", "run", spec, "--out", str(out), "--mixes", "0,1"]) == 0
    assert fake_cluster[0][2] == [2, 4]  # one cluster per size
    assert len(fake_cluster) - 1 == 2 * 2 * 2  # sizes x configs x mixes
    res = pipeline.read(out / "results.json")
    assert [p["label"] for p in res.data["sweep"]["points"]] == ["nodes2", "nodes4"]
    for label in ("nodes2", "nodes4"):
        assert (out / label / "report.md").is_file() and (out / label / "fig7_top.png").is_file()
    assert "![Fig. 8](fig8.png)" in (out / "report.md").read_text()


def test_a_run_the_host_disturbed_is_run_again(
    fake_cluster: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = iter([0.9, 0.01])  # the first attempt ran beside a foreign load
    monkeypatch.setattr(prun.hostload, "other_cores", lambda a, b: next(busy))
    spec = str(REPO / "experiments" / "paired-vs-gang.toml")
    argv = [
        "experiment",
        "run",
        spec,
        "--out",
        str(tmp_path / "o"),
        "--mixes",
        "1",
        "--configs",
        "gang",
    ]
    assert main(argv) == 0
    assert len(fake_cluster) - 1 == 2
    run = pipeline.read(tmp_path / "o" / "results.json").data["result"]["runs"][0]
    assert run["attempts"] == 2 and run["other_cores"] == 0.01


def test_a_live_study_without_root_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # as a user, also when CI runs as root
    spec = str(REPO / "experiments" / "paired-vs-gang.toml")
    assert main(["experiment", "run", spec, "--out", "/tmp/never"]) == 1
    err = capsys.readouterr().err
    assert "needs root" in err and err.count("\n") == 1
