"""Fault injection (issue 13): jobs that misbehave mid-quantum, under both switch
mechanisms (the cgroup freezer and SIGSTOP/SIGCONT). A gang whose ranks exit at
different instants ends done; one whose rank crashes (SIGSEGV) ends failed with the
rank, node and signal in its reason and its other rank killed; one that ignores every
catchable signal, handles SIGCONT and double-forks a grandchild out of its process
tree is still switched whole (every process of it stopped at once, the grandchild
too) and `kill` still ends all of it. Nothing is left behind. Root, real local cluster."""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import Live

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster")

_BURN = "def burn(s):\n    t = time.process_time()\n    while time.process_time() - t < s: pass\n"
# rank 0 ends after 0.3 s of CPU, rank 1 after 1.2 s: the job ends done when both have
EXIT_MID = [sys.executable, "-c", "import os, time\n" + _BURN
            + "burn(0.3 if os.environ['COSCHED_RANK'] == '0' else 1.2)\n"]  # fmt: skip
# rank 1 segfaults after 0.3 s of CPU; rank 0 ignores SIGTERM and would run forever
CRASH = [sys.executable, "-c", "import os, signal, time\n" + _BURN
         + "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         + "if os.environ['COSCHED_RANK'] == '1':\n    burn(0.3)\n"
         + "    os.kill(os.getpid(), signal.SIGSEGV)\n"
         + "while True: burn(1)\n"]  # fmt: skip
STUBBORN = [sys.executable, "-c", (
    "import os, signal\n"
    "for s in ('SIGTERM', 'SIGINT', 'SIGHUP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGUSR1'):\n"
    "    signal.signal(getattr(signal, s), signal.SIG_IGN)\n"
    "signal.signal(signal.SIGCONT, lambda *a: None)\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        while True: pass\n"  # the grandchild: out of the tree, still in the cgroup
    "    os._exit(0)\n"
    "os.wait()\n"
    "while True: pass\n"
)]  # fmt: skip


@pytest.fixture(params=["freezer", "signals"])
def live(request: Any, root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    lv = Live(root_cluster_env, tmp_path)
    lv.switch = request.param  # type: ignore[attr-defined]
    try:
        lv.up(switch=request.param)
        yield lv
    finally:
        lv.stop()
        with contextlib.suppress(Exception):
            lv.down()


def _procs(node: str, job_id: int) -> set[int]:
    """Every process in the job's cgroups on ``node`` (all v1 hierarchies, or v2)."""
    pids: set[int] = set()
    pattern = f"/sys/fs/cgroup/**/cosched/{node}/job-{job_id}/cgroup.procs"
    for path in glob.glob(pattern, recursive=True):
        with contextlib.suppress(OSError):
            pids.update(int(x) for x in Path(path).read_text().split())
    return pids


def _state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :][:1].decode()


def _all_stopped(live: Live, node: str, job_id: int) -> bool:
    """The whole job stopped at one instant (freezer: FROZEN; signals: every task T)."""
    if live.switch == "freezer":  # type: ignore[attr-defined]
        return live.freezer_states().get((node, f"job-{job_id}")) == "FROZEN"
    pids = _procs(node, job_id)
    return len(pids) >= 2 and all(_state(p) == "T" for p in pids)


def _ended(live: Live, job_id: int, limit: float = 60.0) -> dict[str, Any]:
    end = time.monotonic() + limit
    while True:
        rec = live.req("job", job_id=job_id)
        if rec["state"] in ("done", "failed", "killed"):
            return dict(rec)
        assert time.monotonic() < end, (rec, live.log_text()[-2000:])
        time.sleep(0.1)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_misbehaving_jobs_are_switched_ended_and_cleaned(live: Live) -> None:
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod

    live.start("gang", quantum=0.1)
    stub = live.req("submit", spec={"size": 2, "argv": STUBBORN, "name": "stubborn"})["job_id"]
    crash = live.req("submit", spec={"size": 2, "argv": CRASH, "name": "crash"})["job_id"]
    mid = live.req("submit", spec={"size": 2, "argv": EXIT_MID, "name": "exit-mid"})["job_id"]

    rec = _ended(live, crash)
    assert rec["state"] == "failed", rec
    assert "rank 1" in rec["reason"] and "-11" in rec["reason"], rec  # SIGSEGV
    crash_reason = rec["reason"]
    rec = _ended(live, mid)
    assert rec["state"] == "done", rec
    deadline = time.monotonic() + 10
    while _procs("n0", crash) or _procs("n1", crash):  # rank 0 ignored SIGTERM: killed
        assert time.monotonic() < deadline, (_procs("n0", crash), _procs("n1", crash))
        time.sleep(0.05)

    # the stubborn job: main + grandchild on each node, stopped together in the off slot
    deadline = time.monotonic() + 10
    while len(_procs("n0", stub)) < 2:
        assert time.monotonic() < deadline, _procs("n0", stub)
        time.sleep(0.05)
    mine = _procs("n0", stub) | _procs("n1", stub)
    # a second gang makes the stubborn one alternate with it
    other = live.req("submit", spec={"size": 2, "argv": EXIT_MID, "name": "partner"})["job_id"]
    deadline = time.monotonic() + 15
    seen_stopped = False
    while not seen_stopped:
        seen_stopped = _all_stopped(live, "n0", stub)
        assert time.monotonic() < deadline, "the stubborn job was never stopped whole"
        time.sleep(0.005)
    assert _ended(live, other)["state"] == "done"

    assert live.req("kill", job_id=stub)["state"] == "killed"
    deadline = time.monotonic() + 10
    while any(_state(p) not in (None, "Z") for p in mine):
        assert time.monotonic() < deadline, {p: _state(p) for p in mine}
        time.sleep(0.05)
    switch = live.switch  # type: ignore[attr-defined]
    print(f"{switch}: crash failed ({crash_reason}); exit-mid done; stubborn stopped "
          f"whole, then killed: {len(mine)} processes gone")  # fmt: skip
    live.stop()
    live.down()
    rep = clean_mod.clean(cluster_mod.Env(state_dir=str(live.state_dir)))
    assert not (rep.from_state or rep.removed or rep.killed or rep.problems), rep.format()
