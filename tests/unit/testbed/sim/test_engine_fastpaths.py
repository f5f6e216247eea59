"""The simulator's fast paths give what the plain code gives (issue 11, speed).

Each speed-up of `cosched simulate` replaced a simple, obviously right piece of
code; each test here runs both on the same input and compares: SWF lines
(fast reader vs the line parser that names errors), job copies without
checks vs ``dataclasses.replace``, the columnar metrics and CSV vs per-row
objects and the csv module, and the lazy command line vs the modules it must
not load.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import statistics
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.cli import COMMAND_MODULES, build_parser
from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob, unchecked_job, unchecked_phase
from testbed.sim.metrics import (
    COLUMNS,
    JobMetrics,
    job_metrics,
    job_table,
    summarize,
    write_csv,
)
from testbed.sim.results import SimConfig, SimResult
from testbed.sim.workloads.swf import SwfError, _Bad, _parse_line, read_swf
from testbed.sim.workloads.synthetic import apply_profile

REPO = Path(__file__).resolve().parents[4]

# -- SWF: the one-test fast path builds what _parse_line builds ----------------------------

GOOD = ["0", "1", "2", "8", "16", "100", "3600", "-1", "1.0", "12.5", "1e3"]
ANY = [*GOOD, "-2", "-0", "0.5", "nan", "inf", "x", "+4", "1e999", "-1.5", "7.25"]


@st.composite
def swf_lines(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([18] * 8 + [17, 19]))
    # mostly plausible values, so that most lines take the fast path
    fields = [draw(st.sampled_from(GOOD if draw(st.integers(0, 9)) else ANY)) for _ in range(n)]
    return " ".join(fields)


def _reference(line: str) -> SimJob | str:
    try:
        return _parse_line(line.split())
    except (_Bad, ValueError) as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(st.lists(swf_lines(), min_size=1, max_size=6))
def test_fast_swf_reader_agrees_with_the_line_parser(tmp_path_factory, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("swf") / "t.swf"
    path.write_text("; MaxProcs: 16\n" + "\n".join(lines) + "\n")
    expected = [_reference(line) for line in lines]
    bad = [(k, e) for k, e in enumerate(expected) if isinstance(e, str)]
    if bad:
        k, why = bad[0]
        with pytest.raises(SwfError) as err:
            read_swf(path)
        assert str(err.value) == f"{path}:{k + 2}: {why}"
    else:
        jobs = read_swf(path).jobs
        assert jobs == expected
        for job, ref in zip(jobs, expected, strict=True):
            assert isinstance(ref, SimJob)
            assert [type(getattr(job, f)) for f in ("job_id", "size", "user")] == [int] * 3
            assert job.phases is COMPUTE_BOUND
    res = read_swf(path, skip_bad_lines=True)
    assert res.jobs == [e for e in expected if not isinstance(e, str)]
    assert res.skipped == len(bad)


def test_swf_fast_path_keeps_comments_and_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "t.swf"
    p.write_text("; MaxProcs: 8\n\n  \n1 0 -1 10 2 -1 -1 2 20 -1 1 3 -1 -1 -1 -1 -1 -1\n ; late\n")
    res = read_swf(p)
    assert res.header.comments == ("; MaxProcs: 8", " ; late")
    assert res.jobs == [SimJob(1, 0.0, 2, 10.0, 20.0, user=3)]


# -- jobs copied without re-running the checks ----------------------------------------------


def test_unchecked_jobs_equal_checked_ones() -> None:
    phases = (Phase(0.25, 0.5), Phase(0.75, 1.0))
    a = SimJob(7, 1.5, 3, 10.0, 12.0, phases=phases, barrier=0.5, user=4, exclusive=True)
    b = unchecked_job(7, 1.5, 3, 10.0, 12.0, phases, 0.5, 4, True)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.size = 4  # type: ignore[misc]
    assert unchecked_phase(0.5, 0.25) == Phase(0.5, 0.25)
    for change in ({"submit": 3.0}, {"runtime": 2.0, "estimate": 1.0}, {"barrier": 0.1}, {}):
        assert a.copy_with(**change) == dataclasses.replace(a, **change)  # type: ignore[arg-type]


@pytest.mark.parametrize("profile", ["compute", "homogeneous", "heterogeneous", "qcrd"])
def test_profiles_equal_the_replace_based_reference(profile: str) -> None:
    import numpy as np

    from testbed.sim.workloads import synthetic as syn

    jobs = [SimJob(i, float(i), 1 + i % 4, float(i % 7), 9.0, user=i) for i in range(1, 60)]
    jobs[3] = dataclasses.replace(jobs[3], phases=(Phase(1.0, 0.3),), barrier=2.0)
    got = apply_profile(jobs, profile, seed=5)
    if profile == "compute":
        want = [dataclasses.replace(j, phases=COMPUTE_BOUND) for j in jobs]
        assert all(g is j for g, j in zip(got, jobs, strict=True) if j.phases is COMPUTE_BOUND)
    elif profile == "homogeneous":
        want = [
            dataclasses.replace(
                j, phases=(Phase(1.0, syn.HOMOGENEOUS_CPU),), barrier=syn.HOMOGENEOUS_BARRIER
            )
            for j in jobs
        ]
    elif profile == "heterogeneous":
        cpus = np.random.default_rng(5).random(len(jobs)).tolist()
        want = []
        for j, c in zip(jobs, cpus, strict=True):
            interval = syn.HETEROGENEOUS_BARRIER_COST / (1.0 - c)
            if j.runtime > 0:
                interval = min(interval, j.runtime)
            want.append(dataclasses.replace(j, phases=(Phase(1.0, c),), barrier=interval))
    else:
        want = [dataclasses.replace(j, phases=syn.qcrd_phases()) for j in jobs]
    assert got == want


def test_requests_built_without_init_equal_the_dataclass_ones() -> None:
    from controller.policies.base import JobRequest, PolicyError
    from testbed.sim import job as job_module

    assert job_module._FAST_REQUEST  # the fast path is on for this JobRequest
    for j in (SimJob(3, 1.5, 2, 10.0, 12.0, user=-1), SimJob(4, 0.0, 1, 0.0, 0.0, exclusive=True)):
        want = JobRequest(
            job_id=j.job_id,
            size=j.size,
            estimate=j.estimate,
            submit_time=j.submit,
            exclusive=j.exclusive,
            user=str(j.user),
        )
        got = j.request()
        assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    with pytest.raises(PolicyError, match="estimate"):
        SimJob(5, 0.0, 1, 1.0, -2.0).request()
    with pytest.raises(PolicyError, match="estimate"):
        SimJob(6, 0.0, 1, 1.0, math.nan).request()


def test_job_request_checks_are_the_ones_the_fast_path_keeps() -> None:
    """Tripwire: SimJob.request skips JobRequest.__post_init__, having checked what
    it checks (size >= 1 holds for every SimJob; estimate >= 0 is tested). If this
    fails, JobRequest's checks changed: update SimJob.request (testbed/sim/job.py)."""
    import inspect
    import textwrap

    from controller.policies.base import JobRequest

    body = textwrap.dedent(inspect.getsource(JobRequest.__post_init__))
    checks = [line.strip() for line in body.splitlines() if line.strip().startswith("if ")]
    assert checks == ["if self.size < 1:", "if not self.estimate >= 0:"]


# -- metrics as columns, CSV without the csv module -----------------------------------------


def _result(times: list[tuple[float, float, float, float]], runtimes: list[float]) -> SimResult:
    jobs = [
        SimJob(k + 1, sub, 2, rt, rt * 2)
        for k, ((sub, _, _, _), rt) in enumerate(zip(times, runtimes, strict=True))
    ]
    return SimResult(
        policy="p",
        config=SimConfig(nodes=4),
        jobs=jobs,
        start=array("d", [t[1] for t in times]),
        end=array("d", [t[2] for t in times]),
        cpu=array("d", [t[3] for t in times]),
        series_t=array("d", [0.0, 1.0, 4.0, 9.5]),
        series_n=array("d", [1.0, 2.0, 1.0, 0.0]),
    )


def _old_rows(res: SimResult) -> list[JobMetrics]:
    rows = []
    for k, job in enumerate(res.jobs):
        end = res.end[k]
        if math.isnan(end):
            continue
        response = end - job.submit
        rows.append(
            JobMetrics(
                job.job_id,
                job.submit,
                job.size,
                job.runtime,
                job.estimate,
                res.start[k],
                end,
                res.start[k] - job.submit,
                response,
                response / job.runtime if job.runtime > 0 else 1.0,
                max(1.0, response / max(job.runtime, 10.0)),
                res.cpu[k],
            )
        )
    return rows


def _reference_csv(rows: list[JobMetrics]) -> str:
    """The writer before issue 11: the csv module and one f-string per field."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(
            [
                r.job_id,
                f"{r.submit:.3f}",
                r.size,
                f"{r.runtime:.3f}",
                f"{r.estimate:.3f}",
                f"{r.start:.3f}",
                f"{r.end:.3f}",
                f"{r.wait:.3f}",
                f"{r.response:.3f}",
                f"{r.slowdown:.4f}",
                f"{r.bounded_slowdown:.4f}",
                f"{r.cpu_seconds:.3f}",
            ]
        )
    return out.getvalue()


CASES = {
    "whole": (
        [(0.0, 0.0, 10.0, 20.0), (5.0, 10.0, 30.0, 40.0), (6.0, 30.0, 31.0, 2.0)],
        [10.0, 20.0, 1.0],
    ),
    "fractions": ([(0.5, 0.75, 10.125, 20.0005), (1.0, 2.0, 3.0, 4.0)], [9.375, 1.0]),
    "negative zero": ([(0.0, -0.0, 5.0, -0.0), (1.0, 1.0, 6.0, 0.0)], [5.0, 5.0]),
    "huge": ([(1e17, 1e17, 3e20, 1e300), (2.0, 3.0, 4.0, 5.0)], [3e20, 1.0]),
    "unfinished": ([(0.0, math.nan, math.nan, 0.0), (1.0, 2.0, 3.0, math.inf)], [4.0, 1.0]),
    "zero runtime": ([(0.0, 0.0, 0.0, 0.0), (2.0, 2.0, 2.0, 0.0)], [0.0, 0.0]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_columns_summary_and_csv_equal_the_per_row_reference(case: str, tmp_path: Path) -> None:
    res = _result(*CASES[case])
    rows = _old_rows(res)
    table = job_table(res)
    assert job_metrics(res) == rows
    assert table.rows() == rows
    s = summarize(res, table)
    slowdowns = [r.slowdown for r in rows]
    assert s.median_slowdown == statistics.median(slowdowns)
    assert s.mean_wait == math.fsum(r.wait for r in rows) / len(rows)
    write_csv(tmp_path / "jobs.csv", table)
    assert (tmp_path / "jobs.csv").read_bytes() == _reference_csv(rows).encode()


def test_csv_of_hand_built_int_times_matches_the_reference(tmp_path: Path) -> None:
    jobs = [SimJob(1, 0, 2, 10, 10), SimJob(2, 3, 1, 4, 8)]  # ints where floats belong
    res = SimResult(
        "p", SimConfig(nodes=2), jobs, array("d", [0, 3]), array("d", [10, 7]), array("d", [0, 0])
    )
    write_csv(tmp_path / "j.csv", job_table(res))
    assert (tmp_path / "j.csv").read_bytes() == _reference_csv(_old_rows(res)).encode()


# -- the command line loads only what the command needs -------------------------------------


def test_command_table_matches_what_the_modules_register() -> None:
    import argparse
    import importlib

    for module, commands in COMMAND_MODULES.items():
        try:
            group = importlib.import_module(f"testbed.commands.{module}")
        except ImportError:
            continue  # the cluster group without pyroute2
        parser = argparse.ArgumentParser()
        group.add_commands(parser.add_subparsers())
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert tuple(sub.choices) == commands, module
    whole = build_parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) >= {c for cs in COMMAND_MODULES.values() for c in cs} - {
        "cluster",
        "clean",
    }
