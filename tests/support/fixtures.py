"""The root fixtures every live directory shares (loaded by tests/conftest.py).

A fixture whose name starts with ``root_`` marks the tests that use it ``root`` and
skips them, with the reason, where the host cannot give what it needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.host import EMPTY_FOOTPRINT, cluster_skip_reason, cosched_footprint


@pytest.fixture
def free_host() -> None:
    """Skip (with what is there) when another cluster's objects are on this host:
    a test that makes its own cluster must not fight one it did not make."""
    if os.geteuid() == 0 and cosched_footprint() != EMPTY_FOOTPRINT:
        pytest.skip(f"host already has cosched objects: {cosched_footprint()}")


@pytest.fixture
def root_host() -> None:
    """Root and a host where a local cluster can be made (namespaces, cgroups)."""
    reason = cluster_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def root_cluster_env(
    root_host: None, free_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Root-only: a private state dir, a host free of cosched objects, and a
    guaranteed ``clean`` afterwards even when the test fails. Yields the state dir."""
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod

    state_dir = tmp_path / "state"
    monkeypatch.setenv("COSCHED_STATE_DIR", str(state_dir))
    try:
        yield state_dir
    finally:
        rep = clean_mod.clean(cluster_mod.Env(state_dir=str(state_dir)))
        assert not rep.problems, rep.format()
        assert cosched_footprint() == EMPTY_FOOTPRINT
