"""Fault injection (issue 13): an agent that is down when the controller starts. The
controller runs with the nodes it has and says so (one warning naming the node, the
address and why; ``nodes_unreachable`` in its status), schedules jobs on those, and
connects to the missing agent in the background once it is up: then a job over every
node runs. A controller with no agent at all stops with one line
(tests/unit/testbed/test_cli_errors.py). Root, real local cluster."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import Live, running

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster")

SHORT = [sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"]


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    with running(root_cluster_env, tmp_path) as lv:
        yield lv


def _until_ended(live: Live, job_id: int, limit: float = 60.0) -> dict[str, object]:
    end = time.monotonic() + limit
    while True:
        rec = live.req("job", job_id=job_id)
        if rec["state"] in ("done", "failed", "killed"):
            return dict(rec)
        assert time.monotonic() < end, rec
        time.sleep(0.1)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_controller_starts_with_the_nodes_it_has(live: Live) -> None:
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod

    st = state_mod.load(str(live.state_dir))
    assert st is not None
    n1 = next(a for a in st.agents if a.node == "n1")
    live.env.stop_agent(n1)
    t0 = time.monotonic()
    live.start("gang", "--connect-timeout", "1", quantum=0.1)
    started_in = time.monotonic() - t0
    log = live.log_text()
    assert "running with 1 of 2 nodes" in log and "agent n1 at 10." in log, log[-2000:]
    status = live.req("status")
    assert status["nodes_unreachable"] == ["n1"], status
    # first fit puts a one-node job on n0, the node it has
    a = live.req("submit", spec={"size": 1, "argv": SHORT, "name": "one"})["job_id"]
    rec_a = _until_ended(live, a)
    assert rec_a["state"] == "done" and rec_a["nodes"] == ["n0"], rec_a
    # the agent comes up: the controller finds it without a restart
    t1 = time.monotonic()
    cluster_mod.restart_agent("n1", live.env)  # returns once the agent listens
    while live.req("status")["nodes_unreachable"]:
        assert time.monotonic() - t1 < 15, live.log_text()[-2000:]
        time.sleep(0.1)
    joined_in = time.monotonic() - t1
    b = live.req("submit", spec={"size": 2, "argv": SHORT, "name": "both"})["job_id"]
    rec_b = _until_ended(live, b)
    assert rec_b["state"] == "done", rec_b
    print(f"controller up in {started_in:.2f} s with n0 only; job on n0 done; n1 joined "
          f"{joined_in:.2f} s after we started its agent; a 2-node job done")  # fmt: skip
    live.stop()
    live.down()
    rep = clean_mod.clean(cluster_mod.Env(state_dir=str(live.state_dir)))
    assert not (rep.from_state or rep.removed or rep.killed or rep.problems), rep.format()
