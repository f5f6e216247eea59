"""Issue 3 end to end: a local cluster with real agents in their namespaces.

The test talks to each agent the way the controller will: over the control
network, authenticated with the cluster's key. With one dedicated core per
node (cpuset), a job launched through an agent is frozen (its CPU time stops),
thawed (it advances again) and weighted (two busy jobs split the node's core
by their weights). The fixture's teardown checks that nothing is left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.reference import Reference

BUSY = ["python3", "-c", "while True: pass"]


def _cpu(client: object, node: str, jobs: dict[str, int], q: int) -> dict[str, int]:
    ack = client.quantum(node, q, jobs)  # type: ignore[attr-defined]
    assert not ack.get("errors"), ack
    return {k: int(v) for k, v in ack["cpu_ns"].items()}


@pytest.mark.root
def test_job_through_cluster_agent_is_frozen_thawed_and_weighted(root_cluster_env: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores: one dedicated core per node")
    from agent.__main__ import read_key
    from agent.client import AgentClient
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster.profiles import parse_profile

    env = cluster_mod.Env(state_dir=str(root_cluster_env))
    st = cluster_mod.up(
        cluster_mod.ClusterConfig(nodes=2, profile=parse_profile("gige"), cpus_per_node=1), env
    )
    assert st.cpu.get("mechanism") == "cpuset", st.cpu
    assert st.key_file is not None
    node = st.nodes[0]
    key = read_key(st.key_file)
    deadline = time.monotonic() + 10
    client = None
    while client is None:
        try:
            c = AgentClient((node["ctl_ip"], 7070), key, timeout=5)
            c.connect()
            client = c
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        name = node["name"]
        client.launch(name, "a", BUSY, start_frozen=True)
        client.launch(name, "b", BUSY, start_frozen=True)
        q = 1
        _cpu(client, name, {}, q)
        # frozen: no CPU time advances over 300 ms
        time.sleep(0.3)
        q += 1
        frozen = _cpu(client, name, {}, q)
        assert frozen["a"] < 5_000_000 and frozen["b"] < 5_000_000, frozen
        # thawed: job a alone gets most of the node's single core
        q += 1
        with Reference() as ref:  # what the host gives one busy process meanwhile
            _cpu(client, name, {"a": 100}, q)
            ref.mark()
            t0 = time.monotonic()
            time.sleep(0.5)
            q += 1
            alone = _cpu(client, name, {"a": 100}, q)
            window, host = time.monotonic() - t0, ref.share()
        assert alone["a"] > 0.6 * host * window * 1e9, (alone, host, window)
        assert alone["b"] < 5_000_000, alone
        # weighted: 900 vs 100 on the node's one core -> 90/10 within 5 points
        q += 1
        _cpu(client, name, {"a": 900, "b": 100}, q)
        time.sleep(2.0)
        q += 1
        split = _cpu(client, name, {"a": 900, "b": 100}, q)
        share = split["a"] / (split["a"] + split["b"])
        assert abs(share - 0.9) <= 0.05, f"measured {share:.3f}, configured 0.900"
        client.kill(name, "a")
        client.kill(name, "b")
    finally:
        client.close()
        cluster_mod.down(env)
