"""common/cgroups/v2only.py against /proc: who keeps a mount point busy."""

from __future__ import annotations

import os
from pathlib import Path

from common.cgroups import v2only


def test_the_users_of_a_busy_mount_point_are_named(tmp_path: Path) -> None:
    spot = tmp_path / "hierarchy"
    spot.mkdir()
    said, seen = v2only._users(str(spot))
    assert "processes in it: none" in said and not seen
    fd = os.open(spot / "cpu.shares", os.O_CREAT | os.O_RDONLY, 0o600)
    try:
        said, seen = v2only._users(str(spot))
    finally:
        os.close(fd)
    assert seen and f"{os.getpid()} " in said and str(spot / "cpu.shares") in said
    # a sibling whose name merely starts the same is not inside
    said, seen = v2only._users(str(spot) + "-other")
    assert "processes in it: none" in said and not seen
