"""testbed.sweep: the result store, resume after a killed sweep, failures, dead workers,
the same results whatever runs them, and bad input as one line."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from testbed.sweep import RunSpec, SweepOptions, run_sweep
from testbed.sweep.cli import add_sweep_args, options_from
from testbed.sweep.errors import RunsFailed, SchedulerError, StoreError, SweepUsageError
from testbed.sweep.progress import Progress
from testbed.sweep.store import ResultStore
from tests.support.sweep_runs import failing_square, not_a_mapping, square

ROOT = Path(__file__).resolve().parents[3]


def specs(n: int, **params: Any) -> list[RunSpec]:
    return [RunSpec("sq", {"x": x, **params}, 7, square) for x in range(n)]


def quiet(**kw: Any) -> SweepOptions:
    return SweepOptions(progress=False, **kw)


def executed(log: Path) -> list[int]:
    return [int(line.split()[0]) for line in log.read_text().splitlines()] if log.exists() else []


# ---- the store ---------------------------------------------------------------------------


def test_store_keeps_results_and_errors_by_study_version_and_key(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.claim({"a": 1})
        st.put("a", 1, "k1", '{"x": 1}', 3, result='{"y": [1, 2.5]}', seconds=0.5, code="c0")
        st.put("a", 1, "k2", '{"x": 2}', 3, error="ValueError: no", detail="Traceback...")
        got = st.get("a", 1, ["k1", "k2", "k3"])
        assert set(got) == {"k1", "k2"}
        assert got["k1"].ok and got["k1"].result == {"y": [1, 2.5]} and got["k1"].code == "c0"
        assert not got["k2"].ok and got["k2"].error == "ValueError: no"
        assert st.get("a", 2, ["k1"]) == {}  # another version is another result
        assert st.count("a") == {"ok": 1, "failed": 1}


def test_a_store_of_another_result_format_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    first = run_sweep(specs(3), quiet(store=path))
    assert first.ran == 3
    before = sqlite3.connect(path).execute("SELECT * FROM runs ORDER BY key").fetchall()
    newer = [RunSpec(s.study, s.params, s.seed, s.func, version=2) for s in specs(3)]
    with pytest.raises(StoreError) as e:
        run_sweep(newer, quiet(store=path, force=True))
    line = str(e.value)
    assert "format version 1" in line and "version 2" in line and "another --store" in line
    assert "\n" not in line
    after = sqlite3.connect(path).execute("SELECT * FROM runs ORDER BY key").fetchall()
    assert after == before  # nothing lost or overwritten, --force or not


def test_a_file_that_is_not_a_store_is_one_line_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"not a database, " * 100)
    with pytest.raises(StoreError) as e:
        run_sweep(specs(2), quiet(store=path))
    assert "cannot be used" in str(e.value) and "\n" not in str(e.value)
    assert path.read_bytes() == b"not a database, " * 100


# ---- resume ------------------------------------------------------------------------------

SWEEP = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tests.support.sweep_runs import square
    from testbed.sweep import RunSpec, SweepOptions, run_sweep

    if __name__ == "__main__":
        store, log = Path(sys.argv[1]), sys.argv[2]
        specs = [RunSpec("sq", {"x": x, "sleep": 0.4, "log": log}, 1, square) for x in range(16)]
        out = run_sweep(specs, SweepOptions(workers=2, store=store, progress=False))
        print(out.ran, out.stored)
    """
)


def test_a_killed_sweep_resumes_with_only_the_runs_it_lacks(tmp_path: Path) -> None:
    store, log = tmp_path / "runs.sqlite", tmp_path / "log"
    script = tmp_path / "sweep.py"
    script.write_text(SWEEP)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(store), str(log)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while stored < 5:  # about a third of the runs
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no results stored in 120 s"
            time.sleep(0.2)
            if store.exists():
                with sqlite3.connect(store) as db, contextlib.suppress(sqlite3.OperationalError):
                    # (no table yet while the coordinator makes the file)
                    stored = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        workers = {int(line.split()[2]) for line in log.read_text().splitlines()}
        proc.send_signal(signal.SIGKILL)  # the coordinator only: its workers must go too
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    gone = time.monotonic() + 15
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in workers):
        assert time.monotonic() < gone, f"workers {workers} outlived their coordinator"
        time.sleep(0.2)
    with sqlite3.connect(store) as db:
        done_before = {r[0] for r in db.execute("SELECT json_extract(params, '$.x') FROM runs")}
    assert 5 <= len(done_before) < 16
    ran_before = len(executed(log))
    out = run_sweep(
        [RunSpec("sq", {"x": x, "sleep": 0.4, "log": str(log)}, 1, square) for x in range(16)],
        quiet(workers=2, store=store),
    )
    again = executed(log)[ran_before:]
    assert sorted(again) == sorted(set(range(16)) - done_before)  # only the rest ran
    assert (out.stored, out.ran) == (len(done_before), 16 - len(done_before))
    assert [r["y"] for r in out.results if r] == [x * x + 1 for x in range(16)]
    # a third invocation runs nothing; --force reruns what it is given
    n = len(executed(log))
    again_specs = [
        RunSpec("sq", {"x": x, "sleep": 0.4, "log": str(log)}, 1, square) for x in range(16)
    ]
    assert run_sweep(again_specs, quiet(workers=2, store=store)).ran == 0
    assert len(executed(log)) == n
    assert run_sweep(again_specs[:3], quiet(workers=2, store=store, force=True)).ran == 3


# ---- failures and dead workers -----------------------------------------------------------


def test_a_failed_run_is_stored_with_its_error_listed_and_rerun_next_time(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    flag = tmp_path / "broken"
    flag.touch()
    todo = [RunSpec("sq", {"x": x, "fail_if": str(flag)}, 1, failing_square) for x in range(5)]
    out = run_sweep(todo, quiet(workers=2, store=store))
    assert [f.spec.params["x"] for f in out.failed] == [2]
    assert out.failed[0].error == "RuntimeError: x=2 is broken"
    assert "Traceback" in out.failed[0].detail
    assert out.results[2] is None and out.results[3] == {"x": 3, "y": 10, "noise": 0.0, "pid": 0}
    with ResultStore(store) as st:
        assert st.count("sq") == {"ok": 4, "failed": 1}
    err = io.StringIO()
    with pytest.raises(RunsFailed) as e:
        out.check(err)
    assert e.value.exit_code == 1
    assert "1 of 5 runs failed" in str(e.value)
    listed = err.getvalue().splitlines()
    assert len(listed) == 1 and '"x": 2' in listed[0] and "x=2 is broken" in listed[0]
    flag.unlink()  # the cause fixed: only the failed run runs again
    again = run_sweep(todo, quiet(workers=2, store=store))
    assert (again.ran, again.stored, again.failed) == (1, 4, [])


def test_a_run_returning_no_mapping_is_a_failure_not_a_crash() -> None:
    out = run_sweep([RunSpec("bad", {"x": 1}, 1, not_a_mapping)], quiet())
    assert out.failed[0].error == "TypeError: the run returned list, not a mapping"


def test_a_worker_that_dies_has_its_run_retried_and_only_the_killer_fails(tmp_path: Path) -> None:
    once = str(tmp_path / "once")
    todo = specs(6, sleep=0.05)
    todo.append(RunSpec("sq", {"x": 50, "die": once, "deaths": 1}, 7, square))
    todo.append(RunSpec("sq", {"x": 51, "die": "always"}, 7, square))
    out = run_sweep(todo, quiet(workers=2, attempts=2))
    assert out.results[6] == {"x": 50, "y": 2507, "noise": out.results[6]["noise"], "pid": 0}
    assert [f.spec.params["x"] for f in out.failed] == [51]
    assert out.failed[0].error.startswith("WorkerDied: the worker process running it died")
    assert all(r is not None for r in out.results[:6])


def test_a_worker_killed_from_outside_breaks_the_pool_and_nothing_is_lost(tmp_path: Path) -> None:
    todo = specs(8, sleep=0.2)
    todo.insert(3, RunSpec("sq", {"x": 60, "kill_sibling": str(tmp_path / "once")}, 7, square))
    out = run_sweep(todo, quiet(workers=2))
    assert out.ok(), out.failed
    assert [r["x"] for r in out.results if r] == [0, 1, 2, 60, 3, 4, 5, 6, 7]
    assert int((tmp_path / "once").read_text()) >= 1  # it killed (and may have been rerun)


# ---- same results whatever runs them -----------------------------------------------------


def test_one_and_two_local_workers_give_identical_dhc_results() -> None:
    from testbed.experiment.dhc import study as dhcstudy

    spec = dhcstudy.DhcSpec(pes=8, gangs=120, loads=[0.4, 0.8], point_loads=[])
    todo = [dhcstudy.run_spec(r, spec.gangs) for r in dhcstudy.runs(spec)][::5]
    one = run_sweep(todo, quiet(workers=1))
    two = run_sweep(todo, quiet(workers=2))
    assert one.ok() and two.ok() and len(one.results) == len(todo) >= 10
    assert json.dumps(one.results) == json.dumps(two.results)


# ---- options and bad input ---------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    add_sweep_args(ap)
    return ap.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "table", "words"),
    [
        (["--workers", "0"], None, "--workers 0: a sweep needs at least one worker"),
        (["--workers", "-2"], None, "--workers -2"),
        (["--workers", "2", "--dask", "tcp://h:8786"], None, "give one"),
        ([], {"workers": 0}, "[executor].workers = 0: a sweep needs at least one"),
        ([], {"threads": 2}, "[executor].threads: unknown field"),
        ([], {"workers": "4"}, "[executor].workers: wrong type"),
        (["--dask", "head"], None, "not a scheduler address"),
        (["--dask", "http://head:8786"], None, "not a scheduler address"),
    ],
)
def test_bad_options_are_one_line(argv: list[str], table: Any, words: str) -> None:
    with pytest.raises(SweepUsageError) as e:
        options_from(parse(*argv), table)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_options_command_line_over_executor_table_over_defaults(tmp_path: Path) -> None:
    o = options_from(parse(), None, store=tmp_path / "r.sqlite", desc="d")
    assert (o.workers, o.dask, o.store, o.force) == (None, None, tmp_path / "r.sqlite", False)
    o = options_from(parse(), {"dask": "head:8786", "timeout": 3})
    assert (o.workers, o.dask, o.connect_timeout) == (None, "tcp://head:8786", 3.0)
    o = options_from(parse("--workers", "3", "--force", "--store", "x.sqlite"), {"dask": "h:1"})
    assert (o.workers, o.dask, o.force, o.store) == (3, None, True, Path("x.sqlite"))


def test_an_unreachable_scheduler_is_one_line_before_any_run(tmp_path: Path) -> None:
    from common.ports import free_port

    log = tmp_path / "log"
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(SchedulerError) as e:
        run_sweep(specs(4, log=str(log)), quiet(dask=f"tcp://127.0.0.1:{port}", connect_timeout=2))
    assert time.monotonic() - t0 < 30
    line = str(e.value)
    assert f"tcp://127.0.0.1:{port}: no Dask scheduler answered within 2 s" in line
    assert "dask scheduler" in line and "\n" not in line
    assert not log.exists()  # nothing ran


def test_the_cli_refuses_workers_zero_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.cli import main

    spec = tmp_path / "dhc.toml"
    spec.write_text('kind = "dhc-sim"\n[dhc]\nname = "t"\npes = 8\ngangs = 50\nloads = [0.3]\n')
    out = tmp_path / "o"
    assert main(["experiment", "run", str(spec), "--out", str(out), "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--workers 0: a sweep needs at least one worker" in err and "\n" not in err
    assert not (out / "runs.sqlite").exists()


def test_progress_lines_in_a_log_say_done_failed_and_eta() -> None:
    out = io.StringIO()
    p = Progress(10, 4, "dhc runs", stream=out, every=0.0)
    p.update(True)
    p.update(False)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("dhc runs: 5/10 done, 0 failed, 0:00:00 elapsed, ETA ")
    assert lines[1].startswith("dhc runs: 6/10 done, 1 failed")


def test_simulate_gives_the_same_files_with_one_and_two_workers(tmp_path: Path) -> None:
    from testbed.cli import main

    def files(workers: str) -> dict[str, Any]:
        out = tmp_path / workers
        argv = ["simulate", "--policy", "gang,easy", "--workload", "lublin", "--nodes", "8",
                "--jobs", "60", "--loads", "0.5,0.8", "--quiet", "--calibration", "none",
                "--workers", workers, "--out", str(out)]  # fmt: skip
        assert main(argv) == 0
        got: dict[str, Any] = {}
        for f in sorted(out.iterdir()):
            if f.suffix == ".json":  # timings aside
                doc = json.loads(f.read_text())
                got[f.name] = {k: v for k, v in doc.items() if k not in TIMINGS}
            else:
                got[f.name] = f.read_text()
        return got

    one, two = files("1"), files("2")
    assert len(one) == 8 and one == two


TIMINGS = ("sim_seconds", "jobs_per_second")


def test_a_study_with_failed_runs_lists_them_exits_1_and_reruns_only_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from testbed.cli import main
    from testbed.experiment.dhc import study as dhcstudy

    real = dhcstudy.run_one

    def broken(params: Any, seed: int) -> dict[str, Any]:
        if params["family"] == "mapping" and params["config"]["selective"]:
            raise RuntimeError("mapping broken")
        return real(params, seed)

    spec = tmp_path / "dhc.toml"
    spec.write_text('kind = "dhc-sim"\n[dhc]\nname = "t"\npes = 8\ngangs = 60\nloads = [0.3]\n'
                    "point_loads = []\nwaste_pes = [32]\nwaste_rounds = 200\n"
                    "waste_table_pes = 64\n")  # fmt: skip
    argv = ["experiment", "run", str(spec), "--out", str(tmp_path / "o"), "--workers", "1"]
    monkeypatch.setattr(dhcstudy, "run_one", broken)
    assert main(argv) == 1
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("failed: dhc run ")]
    assert len(failed) == 2 and all("RuntimeError: mapping broken" in x for x in failed)
    assert "2 of 25 runs failed" in err.splitlines()[-1]
    assert not (tmp_path / "o" / "results.json").exists()
    monkeypatch.setattr(dhcstudy, "run_one", real)
    assert main(argv) == 0
    assert "dhc-sim runs: 25 runs, 23 stored in" in capsys.readouterr().err
    assert (tmp_path / "o" / "results.json").exists()


def test_a_live_study_says_its_runs_go_one_after_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live runs stay sequential; the sweep flags reach only its simulated runs."""
    from common.errors import CoschedError
    from testbed.cli import main
    from testbed.experiment import pipeline
    from testbed.experiment.harness import cluster

    got: dict[str, Any] = {}

    def stop(*args: Any, **kw: Any) -> Any:
        got.update(kw)
        raise CoschedError("stopped before the cluster came up")

    monkeypatch.setattr(pipeline, "run", stop)
    monkeypatch.setattr(cluster, "sigterm_as_interrupt", lambda: None)
    live = Path(__file__).resolve().parents[3] / "experiments" / "sim-vs-live.toml"
    argv = ["experiment", "run", str(live), "--out", str(tmp_path / "o")]
    assert main([*argv, "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "live study: its runs go one after another on this host (--workers apply" in err
    sweep = got["sweep"]
    assert (sweep.workers, sweep.store) == (2, tmp_path / "o" / "runs.sqlite")
    assert main([*argv, "--resimulate"]) == 1  # only simulations: nothing said
    assert "one after another" not in capsys.readouterr().err
