"""Sweeps on a real Dask cluster (a LocalCluster of two one-thread worker processes):
the same results as the local process pool, dead workers, addresses that are not a scheduler.

No root and no kernel state: the scheduler and workers are ordinary local processes, so
the module is in the live tier (two workers), not the root tier (one test at a time).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.sweep import RunSpec, SweepOptions, daskconf, run_sweep
from testbed.sweep.errors import SchedulerError
from tests.support.sweep_runs import square

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")


def local_cluster() -> Any:
    """Two one-thread workers with the settings a sweep cluster is recommended."""
    return daskconf.local_cluster(2, dashboard_address="127.0.0.1:0")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster() as lc:
        yield lc


@pytest.fixture
def own_cluster() -> Iterator[Any]:
    """A cluster for one test: its nannies restart the workers it kills, its workers
    keep their run children (testbed/sweep/child.py), and the footprint check after
    each test wants those processes gone with it."""
    with local_cluster() as lc:
        yield lc


def dhc_specs() -> list[RunSpec]:
    from testbed.experiment.dhc import study as dhcstudy

    spec = dhcstudy.DhcSpec(pes=8, gangs=150, loads=[0.5, 0.8], point_loads=[])
    return [dhcstudy.run_spec(r, spec.gangs) for r in dhcstudy.runs(spec)][::4]


def test_a_dask_cluster_gives_the_local_pools_results_and_shows_its_dashboard(
    own_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = own_cluster  # its workers keep their run children until the cluster closes
    todo = dhc_specs()
    local = run_sweep(todo, SweepOptions(workers=2, progress=False))
    on_dask = run_sweep(todo, SweepOptions(dask=cluster.scheduler_address, desc="dhc runs"))
    assert local.ok() and on_dask.ok() and len(todo) >= 10
    assert json.dumps(on_dask.results) == json.dumps(local.results)
    err = capsys.readouterr().err
    assert f"Dask scheduler {cluster.scheduler_address}: 2 workers, 2 threads" in err
    assert "; dashboard http://127.0.0.1:" in err
    # results a Dask sweep stored are the local pool's to reuse (and the other way round)
    store = tmp_path / "runs.sqlite"
    first = run_sweep(todo[:5], SweepOptions(dask=cluster.scheduler_address, store=store,
                                             progress=False))  # fmt: skip
    second = run_sweep(todo, SweepOptions(workers=2, store=store, progress=False))
    assert (first.ran, second.stored, second.ran) == (5, 5, len(todo) - 5)
    assert json.dumps(second.results) == json.dumps(local.results)


def tick_interval(dask_worker: Any) -> float:
    return float(dask_worker.periodic_callbacks["tick"].callback_time)


def test_the_workers_run_with_the_sweep_settings(cluster: Any) -> None:
    """The nannies hand the settings to the worker processes they start."""
    with distributed.Client(cluster, set_as_default=False) as client:
        got = client.run(tick_interval)
        assert sorted(got.values()) == [1000.0, 1000.0]  # Dask's default: 20 ms
        assert client.run(lambda dask_worker: "profile" in dask_worker.periodic_callbacks) == {
            w: False for w in got
        }


def workers(cluster: Any) -> set[str]:
    with distributed.Client(cluster) as client:
        return set(client.scheduler_info()["workers"])


def test_on_dask_a_run_that_raises_or_kills_its_process_is_charged_and_the_workers_live(
    own_cluster: Any, tmp_path: Path
) -> None:
    """Each run runs in a child process of its Dask worker (testbed/sweep/child.py): a
    run that kills its child runs again in a new one and fails after three deaths, with
    the signal; its worker lives on, and so do the other runs."""
    cluster = own_cluster
    before = workers(cluster)
    todo = [RunSpec("sq", {"x": x, "sleep": 0.05}, 3, square) for x in range(6)]
    todo.append(RunSpec("sq", {"x": 50, "die": str(tmp_path / "once"), "deaths": 1}, 3, square))
    todo.append(RunSpec("sq", {"x": 51, "die": "always"}, 3, square))
    todo.append(RunSpec("sq", {"x": 52, "fail": True}, 3, square))
    out = run_sweep(todo, SweepOptions(dask=cluster.scheduler_address, progress=False))
    assert out.results[6] is not None and out.results[6]["y"] == 2503
    assert (tmp_path / "once").read_text() == "2"
    assert [f.spec.params["x"] for f in out.failed] == [51, 52]
    assert out.failed[0].error == (
        "WorkerDied: the worker process running it died "
        "(killed by SIGKILL; 3 times, each in a new process)"
    )
    assert out.failed[1].error == "ValueError: asked to fail (x=52)"
    assert "Traceback" in out.failed[1].detail
    assert all(r is not None for r in out.results[:6])
    assert workers(cluster) == before  # no Dask worker died


def test_a_run_whose_dask_worker_dies_runs_again_on_a_worker(
    own_cluster: Any, tmp_path: Path
) -> None:
    cluster = own_cluster
    todo = [RunSpec("sq", {"x": x, "sleep": 0.05}, 3, square) for x in range(6)]
    todo.append(RunSpec("sq", {"x": 60, "kill_parent": str(tmp_path / "k")}, 3, square))
    # A result the dead worker held is lost; when the scheduler was gathering it just then,
    # it retried connecting to the dead worker for Dask's connect timeout (30 s: this
    # test took 30.3 s in one run of two here, under 0.5 s in the other) before computing
    # it again. A local worker answers a connect at once: 5 s is slack enough.
    with dask.config.set({"distributed.comm.timeouts.connect": "5s"}):
        out = run_sweep(todo, SweepOptions(dask=cluster.scheduler_address, progress=False))
    assert out.ok() and out.results[6] is not None and out.results[6]["y"] == 3603
    assert (tmp_path / "k").read_text() == "2"  # its worker died once, then it ran
    assert all(r is not None for r in out.results[:6])


def test_an_address_that_is_not_a_scheduler_is_one_line(cluster: Any) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def answer() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        port = srv.getsockname()[1]
        with pytest.raises(SchedulerError) as e:
            run_sweep([RunSpec("sq", {"x": 1}, 1, square)],
                      SweepOptions(dask=f"tcp://127.0.0.1:{port}", connect_timeout=3))  # fmt: skip
        assert "is not a Dask scheduler" in str(e.value) and "\n" not in str(e.value)
    finally:
        srv.close()
    with distributed.Client(cluster) as client:  # the workers now (earlier tests killed some)
        client.wait_for_workers(1, timeout=120)  # one is enough; a busy host restarts slowly
        worker = next(iter(client.scheduler_info()["workers"]))
    with pytest.raises(SchedulerError, match="that is a Dask Worker, not a scheduler"):
        run_sweep([RunSpec("sq", {"x": 1}, 1, square)], SweepOptions(dask=worker))
