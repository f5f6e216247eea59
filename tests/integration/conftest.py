"""Fixtures for integration tests that need root and real kernel features.

Fixtures whose name starts with ``root_`` skip the test (with the reason) unless
it runs as root on a host with network namespaces and cgroup v1 hierarchies.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _netns_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, cgroups)"
    if not os.path.exists("/proc/self/ns/net"):
        return "kernel without network namespace support"
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "pyroute2 not installed"
    for ctrl in ("cpu", "cpuacct", "freezer"):
        if not os.path.isdir(f"/sys/fs/cgroup/{ctrl}"):
            return f"cgroup v1 {ctrl} hierarchy not mounted at /sys/fs/cgroup/{ctrl}"
    return None


def cosched_footprint() -> dict[str, Any]:
    """Every trace of the testbed on this host: namespaces, root links, cgroups."""
    from pyroute2 import IPRoute, netns

    from testbed.cluster.names import is_our_link, is_our_netns

    with IPRoute() as ipr:
        links = [str(x.get_attr("IFLA_IFNAME")) for x in ipr.get_links()]
    return {
        "netns": sorted(n for n in netns.listnetns() if is_our_netns(n)),
        "links": sorted(x for x in links if is_our_link(x)),
        # Node cgroups only: the agent's own tests may share the cosched/ root.
        "cgroups": sorted(glob.glob("/sys/fs/cgroup/*/cosched/n[0-9]*")),
    }


EMPTY_FOOTPRINT: dict[str, Any] = {"netns": [], "links": [], "cgroups": []}


@pytest.fixture
def free_host() -> None:
    """Skip (with what is there) when another cluster's objects are on this host:
    a test that makes its own cluster must not fight one it did not make."""
    if os.geteuid() == 0 and cosched_footprint() != EMPTY_FOOTPRINT:
        pytest.skip(f"host already has cosched objects: {cosched_footprint()}")


@pytest.fixture
def root_cluster_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Root-only: a private state dir, a host free of cosched objects, and a
    guaranteed ``clean`` afterwards even when the test fails. Yields the state dir."""
    reason = _netns_skip_reason()
    if reason:
        pytest.skip(reason)
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod

    if cosched_footprint() != EMPTY_FOOTPRINT:
        pytest.skip(f"host already has cosched objects: {cosched_footprint()}")
    state_dir = tmp_path / "state"
    monkeypatch.setenv("COSCHED_STATE_DIR", str(state_dir))
    try:
        yield state_dir
    finally:
        rep = clean_mod.clean(cluster_mod.Env(state_dir=str(state_dir)))
        assert not rep.problems, rep.format()
        assert cosched_footprint() == EMPTY_FOOTPRINT
