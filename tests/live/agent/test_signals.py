"""agent/signals.py on real processes (no root: our own children), with a stand-in for
the cgroup layer that lists a group's processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from agent.signals import STOPPED, SignalError, SignalSwitch, proc_state
from common.cgroups.errors import FreezeError

# A job that forks: the parent and two children, each busy
FORKER = """
import os, time
for _ in range(2):
    if os.fork() == 0:
        break
while True:
    time.sleep(0.001)
"""


class Groups:
    """The part of the cgroup layer SignalSwitch reads: pids per group."""

    def __init__(self) -> None:
        self.freeze_timeout = 1.0
        self.name = "test"
        self.roots: dict[str, list[int]] = {}
        self.added: list[tuple[str, int]] = []

    def pids(self, path: str) -> list[int]:
        out = []
        for pid in self.roots.get(path, []):
            try:
                p = psutil.Process(pid)
                out += [pid] + [c.pid for c in p.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        return out

    def add_pid(self, path: str, pid: int) -> None:
        self.roots.setdefault(path, []).append(pid)
        self.added.append((path, pid))

    def thaw_subtree(self, path: str) -> None:
        pass

    def kill_all(self, path: str) -> None:
        for pid in self.pids(path):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def job() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen([sys.executable, "-c", FORKER])
    deadline = time.monotonic() + 10
    while len(psutil.Process(p.pid).children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield p
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    for c in kids:
        c.kill()
    p.kill()
    p.wait()


def _states(g: Groups, path: str) -> set[str | None]:
    return {proc_state(pid) for pid in g.pids(path)}


def test_stop_and_continue_every_process_of_the_group(job: subprocess.Popen[bytes]) -> None:
    g = Groups()
    g.roots["j"] = [job.pid]
    sw = SignalSwitch(g)
    assert len(g.pids("j")) == 3 and sw.is_thawed("j") and not sw.is_frozen("j")
    lat = sw.freeze_many(["j"])
    assert lat["j"] >= 0 and _states(g, "j") == {STOPPED}
    assert sw.is_frozen("j") and not sw.is_thawed("j")
    cpu0 = sum(psutil.Process(p).cpu_times().user for p in g.pids("j"))
    time.sleep(0.3)
    assert sum(psutil.Process(p).cpu_times().user for p in g.pids("j")) == cpu0
    sw.thaw_many(["j"])
    assert STOPPED not in _states(g, "j") and sw.is_thawed("j")


def test_prepared_continue_is_written_at_once_and_confirmed(job: subprocess.Popen[bytes]) -> None:
    g = Groups()
    g.roots["j"] = [job.pid]
    sw = SignalSwitch(g)
    sw.freeze("j")
    with sw.prepare_thaw(["j"]) as t:
        assert _states(g, "j") == {STOPPED}  # nothing continues before write()
        t.write()
        assert set(t.confirm()) == {"j"} and not t.failed
    assert sw.is_thawed("j")


def test_a_rank_joining_a_stopped_group_is_stopped_before_it_runs() -> None:
    g = Groups()
    sw = SignalSwitch(g)
    sw.freeze_many(["empty"])  # no process yet: recorded as stopped
    assert sw.is_frozen("empty")
    p = subprocess.Popen([sys.executable, "-c", "print('ran', flush=True)"],
                         stdout=subprocess.PIPE)  # fmt: skip
    try:
        sw.add_pid("empty", p.pid)
        assert proc_state(p.pid) == STOPPED
        time.sleep(0.2)
        assert p.poll() is None  # it has not run to its end
        sw.thaw("empty")
        out, _ = p.communicate(timeout=10)
        assert out == b"ran\n"
    finally:
        p.kill()
        p.wait()


def test_an_unconfirmed_stop_is_continued_back_and_named(job: subprocess.Popen[bytes]) -> None:
    g = Groups()
    g.roots["j"] = [job.pid]
    # a state reader that never sees the stop: as a process stuck in D would look
    sw = SignalSwitch(g, state=lambda pid: "D")
    sw.freeze_timeout = 0.2
    with pytest.raises(FreezeError, match=r"stop not confirmed within 0.2s for \['j'\]"):
        sw.freeze_many(["j"])
    assert STOPPED not in _states(g, "j")  # continued back
    assert not sw.is_frozen("j")


def test_a_traced_process_is_refused_with_the_fix() -> None:
    g = Groups()
    g.roots["j"] = [os.getpid()]
    sw = SignalSwitch(g, state=lambda pid: "t")
    with pytest.raises(SignalError, match=r"traced .* use --switch freezer"):
        sw.freeze_many(["j"])


def test_other_calls_reach_the_cgroup_layer(job: subprocess.Popen[bytes]) -> None:
    g = Groups()
    g.roots["j"] = [job.pid]
    sw: Any = SignalSwitch(g)
    assert sw.name == "test+signals" and sw.roots is g.roots
    sw.freeze("j")
    sw.thaw_subtree("j")  # the fail-safe's path: everything continues
    assert sw.is_thawed("j")
    sw.pin_freezer("p")  # nothing to pin for signals
    sw.freeze("j")
    sw.kill_all("j")  # SIGKILL ends stopped processes
    job.wait(timeout=10)
    assert job.returncode == -signal.SIGKILL


def test_proc_state_reads_past_a_comm_with_parentheses() -> None:
    assert proc_state(os.getpid()) in ("R", "S")
    assert proc_state(2**22 + 12345) is None
