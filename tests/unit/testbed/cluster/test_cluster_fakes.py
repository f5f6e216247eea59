"""In-memory fakes of the kernel-facing interfaces of testbed.cluster (no root needed).

Imported by the other test_cluster_* modules; the few tests here check the fakes
themselves behave like the kernel in the ways the cluster code relies on.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from common.cgroups.fake import fake_v1
from tests.support.cluster_fakes import FakeNet, InjectedFailure


def test_fake_net_veth_dies_with_namespace() -> None:
    net = FakeNet()
    net.create_netns("a")
    net.create_netns("b")
    net.add_veth("a", "x", "b", "y")
    net.add_veth(None, "h", "b", "hp")
    assert "y" in net.list_links("b")
    net.remove_netns("a")
    assert "y" not in net.list_links("b")
    net.remove_netns("b")
    assert net.footprint() == {"netns": [], "root_links": []}


def test_fake_net_fails_at_requested_call() -> None:
    net = FakeNet(fail_at=2)
    net.create_netns("a")
    with pytest.raises(InjectedFailure):
        net.create_netns("b")


def test_fake_cgroup_frozen_task_survives_kill(tmp_path: Path) -> None:
    fs = fake_v1(tmp_path)
    fs.make("freezer", "cosched/n0")
    fs.add_proc("freezer", "cosched/n0", 42)
    fs.set_knob("freezer", "cosched", "freezer.state", "FROZEN")
    fs.kill(42, signal.SIGKILL)
    assert fs.procs("freezer", "cosched/n0") == [42]
    with pytest.raises(OSError):
        fs.rmdir(tmp_path / "freezer/cosched/n0")
