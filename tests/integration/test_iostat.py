"""A cgroup's block I/O bytes read from real cgroups (common/cgroups/iostat.py): v1 blkio
on a hybrid host, cgroup2's io.stat on a v2-only one (`cosched host cgroups v2-only`).

A process is put into a fresh group and writes 4 MiB with O_DIRECT to a file on the root
file system (a block device here; /tmp would do too, it is not tmpfs on this machine
kind); the group's counters must show at least those bytes written, and a sibling group
that did nothing none. The groups are removed after, and on cgroup2 +io is given back to
the root if this test enabled it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.cgroups.iostat import V1_FILE, V2_FILE, read_io_bytes

MiB = 1 << 20


def _cgroup2_mount() -> str | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if parts[2] == "cgroup2":
            return parts[1]
    return None


def _io_root() -> tuple[str, str] | None:
    """(the hierarchy to make groups in, which) or None: v1 blkio, else cgroup2 with io."""
    if os.path.exists(f"/sys/fs/cgroup/blkio/{V1_FILE}"):
        return "/sys/fs/cgroup/blkio", "v1"
    mount = _cgroup2_mount()
    if mount and "io" in Path(mount, "cgroup.controllers").read_text().split():
        return mount, "v2"
    return None


@contextlib.contextmanager
def _groups(root: str, which: str, names: list[str]) -> Iterator[list[str]]:
    enabled_here = False
    control = os.path.join(root, "cgroup.subtree_control")
    if which == "v2" and "io" not in Path(control).read_text().split():
        Path(control).write_text("+io")
        enabled_here = True
    made = []
    try:
        for n in names:
            d = os.path.join(root, n)
            os.mkdir(d)
            made.append(d)
        yield made
    finally:
        for d in made:
            with contextlib.suppress(OSError):
                os.rmdir(d)
        if enabled_here:
            with contextlib.suppress(OSError):
                Path(control).write_text("-io")


@pytest.mark.root
def test_a_groups_direct_writes_are_counted() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (cgroups)")
    found = _io_root()
    if found is None:
        pytest.skip("no blkio hierarchy and no cgroup2 io controller on this host")
    root, which = found
    tag = f"cosched-iostat-{os.getpid()}"
    with (
        tempfile.TemporaryDirectory(dir="/var/tmp") as tmp,
        _groups(root, which, [f"{tag}-w", f"{tag}-idle"]) as (writer, idle),
    ):
        assert os.path.exists(os.path.join(writer, V1_FILE if which == "v1" else V2_FILE))
        before = read_io_bytes(writer)
        assert before.total == 0 and read_io_bytes(idle).total == 0
        target = os.path.join(tmp, "data")
        # the shell joins the group first, then becomes dd: every bio is the group's
        script = (
            f'echo $$ > {writer}/cgroup.procs && exec dd if=/dev/zero of="{target}" '
            "bs=64k count=64 oflag=direct status=none"
        )
        subprocess.run(["sh", "-c", script], check=True, timeout=120)
        after = read_io_bytes(writer)
        assert after.write >= 4 * MiB, (which, after)
        assert (after - before).write == after.write
        assert read_io_bytes(idle).total == 0
