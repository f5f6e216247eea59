"""Fixtures of the security suite: a real 2-node cluster, its controller, two test users.

Root only, like the fault suite (CI runs as root; there these tests must run, not
skip). ``sec`` yields a :class:`tests.support.security.Sec`.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import Live
from tests.support.security import DAEMON_NOFILE, Sec
from tests.support.security_sandbox import Sandbox


@pytest.fixture
def sec(root_cluster_env: Path, tmp_path: Path) -> Iterator[Sec]:
    box = Sandbox()
    live = Live(root_cluster_env, box.run)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(DAEMON_NOFILE, limits[1]), limits[1]))
    try:
        live.up()
        yield Sec(live, box)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        live.stop()
        with contextlib.suppress(Exception):
            live.down()
        box.close()
