"""The cgroup v2 paths, run for real on this host's cgroup2 mount.

This development machine is a hybrid host: cpu, cpuacct, cpuset and a freezer
are v1 hierarchies, and cgroup2 (``/sys/fs/cgroup/unified``) offers only the
core files: ``cgroup.freeze``/``cgroup.events``, ``cgroup.kill``, ``cpu.stat``.
``--cgroup v2`` makes the cluster, the agents and the controller use that tree
alone, so freezing, confirmation through cgroup.events, accounting from
cpu.stat, teardown with cgroup.kill and the leaf layout all run on the real
kernel. cpu.weight, cpu.max and cpuset.cpus on v2 cannot run here (the
controllers are bound to v1; see docs/cluster.md) and are covered by the fake.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from pathlib import Path

import pytest

from tests.support.host import unified_mount
from tests.support.live import SPIN, Live

# Where cgroup2 is mounted (/sys/fs/cgroup/unified here, /sys/fs/cgroup on a v2-only
# distribution), found in /proc/self/mounts.
UNIFIED = unified_mount() or "/sys/fs/cgroup/unified"


def _v2_skip_reason() -> str | None:
    if not os.path.exists(f"{UNIFIED}/cgroup.controllers"):
        return "no cgroup2 mount on this host"
    if not os.path.isdir("/sys/fs/cgroup/cpu"):
        return "not a hybrid host: the v2-only paths run in the default tests"
    return None


def _events(path: str) -> dict[str, str]:
    with open(path) as f:
        return dict(line.split(" ", 1) for line in f.read().split("\n") if line)


@pytest.mark.root
def test_cluster_and_controller_on_cgroup2(root_cluster_env: Path, tmp_path: Path) -> None:
    reason = _v2_skip_reason()
    if reason:
        pytest.skip(reason)
    lv = Live(root_cluster_env, tmp_path)
    try:
        lv.up(cpus_per_node=None, cgroup="v2")
        assert lv.st.cgroup_layout["mode"] == "v2"
        assert sorted(glob.glob(f"{UNIFIED}/cosched/n*/agent")) == [
            f"{UNIFIED}/cosched/n0/agent",
            f"{UNIFIED}/cosched/n1/agent",
        ]
        # the agents live in their leaves, nothing in the inner groups
        for n in ("n0", "n1"):
            with open(f"{UNIFIED}/cosched/{n}/agent/cgroup.procs") as f:
                assert f.read().split(), f"no agent in {n}'s leaf"
            with open(f"{UNIFIED}/cosched/{n}/cgroup.procs") as f:
                assert not f.read().split()
        lv.start("gang", quantum=0.05)
        a = lv.req("submit", spec={"size": 2, "argv": SPIN, "name": "a"})["job_id"]
        b = lv.req("submit", spec={"size": 2, "argv": SPIN, "name": "b"})["job_id"]
        seen: dict[str, set[str]] = {str(a): set(), str(b): set()}
        both_running = 0
        end = time.monotonic() + 3.0
        time.sleep(0.3)
        while time.monotonic() < end:
            states = {}
            for job in (a, b):
                path = f"{UNIFIED}/cosched/n0/job-{job}/cgroup.events"
                with contextlib.suppress(OSError):
                    states[str(job)] = _events(path)["frozen"].strip()
                    seen[str(job)].add(states[str(job)])
            if len(states) == 2 and set(states.values()) == {"0"}:
                both_running += 1
            time.sleep(0.003)
        # gang scheduling on cgroup2: each job was frozen and thawed in turn
        assert seen == {str(a): {"0", "1"}, str(b): {"0", "1"}}, seen
        recs = {j["job_id"]: j for j in lv.req("jobs")}
        for j in (a, b):
            assert recs[j]["cpu_s"] > 0.2, recs[j]  # cpu.stat accounting reached the controller
        lv.req("kill", job_id=a)
        lv.req("kill", job_id=b)
    finally:
        lv.stop()
        with contextlib.suppress(Exception):
            lv.down()
    assert not glob.glob(f"{UNIFIED}/cosched/n*")


@pytest.mark.root
def test_v2_refuses_a_controller_bound_to_v1(root_cluster_env: Path) -> None:
    reason = _v2_skip_reason()
    if reason:
        pytest.skip(reason)
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster.errors import ClusterError
    from testbed.cluster.profiles import parse_profile

    env = cluster_mod.Env(state_dir=str(root_cluster_env))
    config = cluster_mod.ClusterConfig(
        nodes=2, profile=parse_profile("gige"), cpus_per_node=1, cgroup="v2"
    )
    with pytest.raises(ClusterError, match=r"cpuset is bound to the v1 hierarchy at /sys/fs/"):
        cluster_mod.up(config, env)
    assert not os.path.exists(root_cluster_env / "cluster.json")
    assert not glob.glob(f"{UNIFIED}/cosched/n*")
