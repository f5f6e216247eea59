"""Fault injection (issue 13): an agent SIGKILLed on a random node while jobs run, then
started again (testbed/cluster/cluster.py ``restart_agent``), FAULT_CYCLES times: the
new agent reattaches its jobs, the controller loses none, every job ends done, and
the cluster comes down with no orphan process or cgroup. Root, real local cluster."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import CYCLES, QUANTUM, burn_until
from tests.support.live import Live, running

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster")


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    with running(root_cluster_env, tmp_path) as lv:
        yield lv


def _agent_jobs(client: Any, addr: tuple[str, int], key: bytes) -> list[dict[str, Any]]:
    """The agent's job list, once it listens (a restarted agent takes a moment)."""
    end = time.monotonic() + 10
    while True:
        try:
            # a tool, not the controller: it must not take the controller's events
            with client(addr, key, sender="fault-test", timeout=5) as c:
                return list(c.status()["jobs"])
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


@pytest.mark.root
@pytest.mark.timeout(900)
def test_agent_sigkill_and_restart_reattaches_its_jobs(live: Live) -> None:
    from agent.client import AgentClient
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod

    rng = random.Random(int(os.environ.get("FAULT_SEED", "31")))
    live.start("gang", quantum=QUANTUM)
    # jobs that end only after the last cycle: every agent dies with jobs running
    stop = live.tmp / "stop"
    ids = [
        live.req("submit", spec={"size": 2, "argv": burn_until(stop), "name": f"a{k}"})["job_id"]
        for k in range(max(4, CYCLES))
    ]
    reattached_seen = 0
    for cycle in range(CYCLES):
        time.sleep(rng.uniform(0.3, 1.0))
        st = state_mod.load(str(live.state_dir))
        assert st is not None
        # every node once, then at random
        rec = st.agents[cycle] if cycle < len(st.agents) else rng.choice(st.agents)
        os.kill(rec.pid, signal.SIGKILL)
        time.sleep(0.2)
        new = cluster_mod.restart_agent(rec.node, live.env)
        assert new.pid != rec.pid
        # the new agent knows the jobs its predecessor ran (reattached, not restarted)
        node = next(n for n in st.nodes if n["name"] == rec.node)
        jobs = _agent_jobs(AgentClient, (node["ctl_ip"], 7070), live.key)
        running = [j for j in jobs if j["state"] != "ended"]
        reattached_seen += sum(1 for j in running if j["reattached"])
        recs = live.req("jobs", all=True)
        assert sorted(r["job_id"] for r in recs) == sorted(ids)
        assert not any(r["state"] in ("failed", "killed") for r in recs), recs
        print(f"cycle {cycle}: killed the agent of {rec.node}; the new one reattached "
              f"{sum(j['reattached'] for j in running)} running job(s)")  # fmt: skip
    assert reattached_seen > 0
    stop.touch()  # the jobs may end now, each once it has burned its share
    deadline = time.monotonic() + 120
    while True:
        recs = {r["job_id"]: r for r in live.req("jobs", all=True)}
        if all(recs[j]["state"] in ("done", "failed", "killed") for j in ids):
            break
        if time.monotonic() >= deadline:  # what is stuck, for the report
            for n in st.nodes:
                for j in _agent_jobs(AgentClient, (n["ctl_ip"], 7070), live.key):
                    if j["state"] != "ended":
                        print("STUCK", n["name"], j)
            print("STUCK freezer", live.freezer_states())
            print(
                "STUCK job",
                live.req(
                    "job",
                    job_id=next(
                        j for j in ids if recs[j]["state"] not in ("done", "failed", "killed")
                    ),
                ),
            )
        assert time.monotonic() < deadline, (
            {j: (r["state"], r.get("nodes")) for j, r in recs.items()},
            live.freezer_states(),
            live.log_text()[-3000:],
        )
        time.sleep(0.3)
    assert all(recs[j]["state"] == "done" for j in ids), recs
    live.stop()
    live.down()
    from testbed.cluster import clean as clean_mod

    rep = clean_mod.clean(cluster_mod.Env(state_dir=str(live.state_dir)))
    assert not (rep.from_state or rep.removed or rep.killed or rep.problems), rep.format()
