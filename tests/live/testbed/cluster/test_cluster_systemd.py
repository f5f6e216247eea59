"""The tests of tests/unit/testbed/cluster/test_cluster_systemd.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from testbed.cluster import cluster as cl
from testbed.cluster.errors import ClusterError
from tests.support.cluster_fakes import (
    FakeNodes,
    assert_pristine,
    sd_config,
    systemd_env,
    v2_host,
)


def test_up_makes_a_head_and_node_groups_with_every_controller_passed_on(tmp_path: Path) -> None:
    fs, nodes = v2_host(tmp_path), FakeNodes()
    env = systemd_env(tmp_path, fs, nodes)
    st = cl.up(sd_config(2), env)
    assert st.systemd is not None and st.systemd["rootfs"] == "/cache/bookworm-x"
    assert [c["node"] for c in st.systemd["containers"]] == ["head", "n0", "n1"]
    assert all(c["state"] == "running" for c in st.systemd["containers"])
    # the head is on the control network only, below the host's address
    assert "cosched-head" in env.net.list_netns()  # type: ignore[attr-defined]
    assert nodes.specs["head"].ctl_ip == "10.212.0.253" and nodes.specs["n1"].ctl_ip == "10.212.0.2"
    # systemd-nspawn is offered cpu, cpuset, io and pids in each node's group and
    # enables them there itself: the node groups are bare (no agent leaf, no key)
    for g in ("", "cosched"):
        assert set(fs.knob("", g, "cgroup.subtree_control").split()) == {
            "cpu",
            "cpuset",
            "io",
            "pids",
        }
    for n in ("head", "n0", "n1"):
        assert (
            fs.has("", f"cosched/{n}")
            and fs.knob("", f"cosched/{n}", "cgroup.subtree_control") == ""
        )
    assert not fs.has("", "cosched/n0/agent") and st.agents == [] and st.key_file is None
    # the inventory fits the playbook to the nodes; every node has its own sshd files
    inv = yaml.safe_load(Path(st.ssh["inventory"]).read_text())  # type: ignore[index]
    allv = inv["all"]["vars"]
    assert allv["service_manager"] == "systemd" and allv["cosched_local_cluster"] is False
    assert allv["cosched_install_from"] == "none" and allv["cosched_manage_sysctls"] is False
    assert inv["all"]["children"]["controller"]["hosts"]["head"]["ansible_host"] == "10.212.0.253"
    assert set(inv["all"]["children"]["agents"]["hosts"]) == {"n0", "n1"}
    assert Path(nodes.specs["n0"].node_dir, "sshd_config").read_text().count("10.212.0.1:22") == 1
    report = cl.status(env, probe=False)
    assert report is not None and set(report["systemd"]["containers"]) == {"head", "n0", "n1"}
    assert "systemd nodes: Debian with systemd as PID 1" in cl.format_status(report)

    existed, problems = cl.down(env)
    assert existed and problems == [] and nodes.stopped == ["head", "n0", "n1"]
    assert_pristine(env)
    assert not os.path.exists(st.ssh["dir"])  # type: ignore[index]


def test_a_node_that_does_not_boot_rolls_everything_back(tmp_path: Path) -> None:
    fs, nodes = v2_host(tmp_path), FakeNodes(fail_wait="n1")
    env = systemd_env(tmp_path, fs, nodes)
    with pytest.raises(ClusterError, match=r"n1: systemd says 'degraded'.*rolled back"):
        cl.up(sd_config(2), env)
    assert nodes.stopped == ["head", "n0", "n1"]
    assert_pristine(env)
