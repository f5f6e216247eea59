"""Yu & Byun's workloads, the recorded traces and `cosched simulate` for the CDC schemes."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.sim.cdc import traces
from testbed.sim.cdc.engine import CdcSim, SimJobSpec
from testbed.sim.cdc.platform import PAPER, PlatformError, parse_platform, parse_speeds
from testbed.sim.cdc.workload import (
    TABLE3_RANKS,
    WorkloadError,
    parse_workload,
    rep_seconds,
    stream,
)
from tests.support.cdc_workload import REPO, _cli


def test_workload_specs() -> None:
    wl = parse_workload("WL6:jobs=100,load=light")
    assert wl.apps == ("bt", "sp", "ft", "is", "cg") and wl.interarrival == 70.27
    assert parse_workload("wl5:jobs=50,at_once").at_once
    for bad, what in (
        ("WL7", "Table 3.s workloads WL1"),
        ("WL6:load=medium", "valid loads: heavy, light"),
        ("WL6:jobs=x", "jobs='x' is not a number"),
        ("WL6:color=red", "valid keys: jobs, load"),
        ("WL6:jobs=0", "jobs must be >= 1"),
    ):
        with pytest.raises(WorkloadError, match=what):
            parse_workload(bad)


def test_application_without_a_trace_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for f in traces.TRACE_DIR.glob("cg-*.json"):
        (tmp_path / f.name).write_text(f.read_text())
    monkeypatch.setattr(traces, "TRACE_DIR", tmp_path)
    traces._load.cache_clear()
    try:
        with pytest.raises(WorkloadError, match="application 'bt' has no recorded trace"):
            parse_workload("WL1")
        assert parse_workload("WL5").apps == ("cg",)
        with pytest.raises(traces.TraceError, match="recorded: 4, 8, 16"):
            traces.npb_program("cg", 2)
    finally:
        traces._load.cache_clear()


def test_platform_and_speeds_refuse_bad_values() -> None:
    with pytest.raises(PlatformError, match=r"decision_ms: decision interval 0.05 is outside"):
        parse_platform("paper:decision_ms=0.05")
    with pytest.raises(PlatformError, match="valid fields"):
        parse_platform("paper:hz=1000")
    with pytest.raises(PlatformError, match="gives 2 node speeds for 16 nodes"):
        parse_speeds("1,1", 16)
    assert parse_speeds("paper", 16) == (1.0,) * 7 + (1.8 / 2.8,) * 9
    assert parse_speeds("2x1,2x0.5", 4) == (1.0, 1.0, 0.5, 0.5)


def test_stream_sizes_and_the_length_of_a_job_alone() -> None:
    speeds = parse_speeds("paper", 16)
    wl = parse_workload("WL5:jobs=12,job_seconds=3")
    jobs = stream(wl, seed=4, speeds=speeds, platform=PAPER)
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    assert {j.program.size for j in jobs} <= set(TABLE3_RANKS["cg"])
    # the 16-process CG job alone takes job_seconds, to half a repetition
    per = rep_seconds("cg", speeds, PAPER)
    big = next(j for j in jobs if j.program.size == 16)
    alone = CdcSim("batch", 1, speeds, PAPER).run([SimJobSpec(0, 0.0, big.program)])
    assert abs(alone.jobs[0].execution - 3.0) <= per / 2 + 1e-6
    # the same seed draws the same jobs at another load; only the gaps stretch
    light = stream(parse_workload("WL5:jobs=12,job_seconds=3,load=light"), 4, speeds, PAPER)
    assert [j.program.size for j in light] == [j.program.size for j in jobs]
    assert light[-1].submit > jobs[-1].submit


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mpl", "0"], "--mpl 0: the multiprogramming level must be >= 1"),
        (["--speeds", "1,1,1"], "--speeds gives 3 node speeds for 16 nodes"),
        (["--platform", "paper:decision_ms=0.01"], "decision interval 0.01 is outside 0.1..1000"),
        (["--workload", "WL9"], "workloads WL1, WL2"),
    ],
)
def test_simulate_bad_input_is_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["simulate", "--policy", "cc-b,sb", "--workload", "WL6", "--out", str(tmp_path)]
    rc, _out, err = _cli(argv + args, capsys)
    assert rc == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing ran


def test_a_live_job_stream_runs_in_the_simulator() -> None:
    """The same stream live and simulated: experiments/cdc-policies.toml's quick jobs."""
    from testbed.experiment.cdc.stream import job_stream, load_stream_spec
    from testbed.experiment.fields import Table, read_toml
    from testbed.sim.cdc.platform import TESTBED
    from testbed.sim.cdc.workload import synthetic_stream

    path = REPO / "experiments" / "cdc-policies.toml"
    spec = load_stream_spec(Table.document(read_toml(path), path)).quick_version()
    live = job_stream(spec, "heavy")
    jobs = synthetic_stream(live)
    assert [j.submit for j in jobs] == [j.arrival_s for j in live]
    assert [j.program.size for j in jobs] == [j.size for j in live]
    speeds = [0.5 * s for s in (spec.speeds or (1.0,) * spec.nodes)]
    res = CdcSim("cc-b", 5, speeds, TESTBED).run(jobs)
    for j, lj in zip(sorted(res.jobs, key=lambda j: j.job_id), live, strict=True):
        # compute alone takes iterations x compute_ms on a node of 0.5 CPU or slower
        assert j.execution >= lj.iterations * lj.compute_ms / 1e3 / 0.5
