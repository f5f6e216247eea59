"""A Dask worker's run child (testbed/sweep/child.py), driven here without Dask: a run's
result and error come back, the child is kept between runs, a run that kills its child
is run again in a new one and then failed with the signal, and children end with their pipe.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from testbed.sweep import RunSpec, child
from testbed.sweep.worker import execute
from tests.support.sweep_runs import square


@pytest.fixture(autouse=True)
def no_children_left() -> Iterator[None]:
    """Each test starts with no idle child and leaves none running."""
    assert not child._idle
    yield
    kids = list(child._idle)
    child._idle.clear()
    for c in kids:
        c.close()
        assert c.proc.wait(timeout=30) == 0  # its pipe closed: it exits by itself


def pids(log: Path) -> list[int]:
    return [int(line.split()[2]) for line in log.read_text().splitlines()]


def test_a_run_in_a_child_returns_what_it_returns_here_and_the_child_is_kept(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    specs = [RunSpec("sq", {"x": x, "log": str(log)}, 7, square) for x in range(3)]
    got = [child.run_in_child(s) for s in specs]
    here = [execute(s) for s in specs]
    assert [g.result for g in got] == [h.result for h in here]
    assert [g.code for g in got] == [h.code for h in here] and got[0].code
    ran = pids(log)
    assert len(set(ran[:3])) == 1 and ran[0] != psutil.Process().pid  # one child, not here
    assert len(child._idle) == 1 and child._idle[0].proc.pid == ran[0]


def test_a_run_that_raises_in_its_child_is_its_error_and_the_child_goes_on() -> None:
    bad = child.run_in_child(RunSpec("sq", {"x": 3, "fail": True}, 1, square))
    assert bad.result is None and bad.error == "ValueError: asked to fail (x=3)"
    assert "Traceback" in bad.detail
    good = child.run_in_child(RunSpec("sq", {"x": 3}, 1, square))
    assert good.result is not None and json.loads(good.result)["y"] == 10
    assert len(child._idle) == 1


def test_a_run_that_kills_its_child_runs_again_in_a_new_one_then_fails_with_the_signal(
    tmp_path: Path,
) -> None:
    once = RunSpec("sq", {"x": 4, "die": str(tmp_path / "once"), "deaths": 1}, 1, square)
    got = child.run_in_child(once, attempts=3)
    assert got.result is not None and json.loads(got.result)["y"] == 17
    assert (tmp_path / "once").read_text() == "2"  # died once, then ran in a new child
    always = RunSpec("sq", {"x": 5, "die": "always"}, 1, square)
    failed = child.run_in_child(always, attempts=2)
    assert failed.result is None
    assert failed.error == (
        "WorkerDied: the worker process running it died "
        "(killed by SIGKILL; 2 times, each in a new process)"
    )
    # the idle child of the first run was not blamed: only new children died
    survivor = child.run_in_child(RunSpec("sq", {"x": 6}, 1, square))
    assert survivor.result is not None


def test_a_child_that_died_idle_is_replaced_without_charging_the_next_run(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    child.run_in_child(RunSpec("sq", {"x": 1, "log": str(log)}, 1, square))
    idle = child._idle[0]
    idle.proc.kill()
    idle.proc.wait(timeout=30)
    got = child.run_in_child(RunSpec("sq", {"x": 2, "log": str(log)}, 1, square), attempts=1)
    assert got.result is not None
    first, second = pids(log)
    assert first != second and child._idle[0].proc.pid == second
