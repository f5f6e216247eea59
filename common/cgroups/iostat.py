"""A cgroup's block I/O bytes, from cgroup v1's blkio or cgroup2's io controller: the disk
component of a job's demand for N + 1 gangs (controller/policies/devices.py).

* v1: ``blkio.throttle.io_service_bytes`` — lines ``MAJ:MIN Read|Write|Sync|Async|Discard|
  Total N`` and a last ``Total N``. The throttle layer counts every bio the group issues,
  whichever I/O scheduler the disk has (the ``blkio.bfq.*`` files exist only under BFQ).
* cgroup2: ``io.stat`` — one line per device, ``MAJ:MIN rbytes=N wbytes=N rios=N wios=N
  dbytes=N dios=N``.

Both are summed over the devices. What each counts, measured on this host (kernel 6.18,
benchmarks/blkio_accounting.py, docs/results/blkio-accounting/): bytes that reached the
block layer on the group's behalf. Reads (buffered from a cold cache, or O_DIRECT),
O_DIRECT writes and buffered writes the job syncs (fsync) are counted in full, at once;
buffered writes left to the kernel's flusher are not counted in the job's group, on v1
(no cgroup writeback there) nor on this hybrid host's cgroup2 (writeback is charged to
the dirtier only when the memory controller is on cgroup2 too; here it stays on v1).

v1 counts nothing at all until the disk's queue has the throttle layer set up: the
kernel (6.x) accounts a bio in ``blkio.throttle.*`` only on a queue some group has
written a throttle rule for. :meth:`V1Io.activate` writes the "no limit" value
(U64_MAX) for every disk into the node's group: nothing is limited, the file reads back
empty, and the queue counts from then on, for every group (it stays so until the disk
goes away). cgroup2 counts always.

A group's bytes are counted only once the kernel has its per-disk block group (blkg).
The first bio a group issues creates it, but only best effort (GFP_NOWAIT, blk-cgroup.c);
when that allocation fails the bio is charged to the closest ancestor that has one and
the group misses it. Seen once on CI (a fresh machine after 20 minutes of cgroup churn):
a job's 1 MiB O_DIRECT write went uncounted while its read right after was counted.
:meth:`V1Io.track` and :meth:`V2Io.track` create the blkg when the job's group is made,
by writing a "no limit" rule into it (``blkg_conf_prep`` allocates with sleeping
allowed), so a job's first I/O is its own.

Parsing is pure; :func:`read_io_bytes` reads whichever file the group directory has;
:class:`V1Io` and :class:`V2Io` are the files the driver (driver.py) reads through its
:class:`~common.cgroups.fs.CgroupFS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from common.cgroups.errors import CgroupError
from common.cgroups.fs import CgroupFS

V1_FILE = "blkio.throttle.io_service_bytes"
V2_FILE = "io.stat"
V1_RULE = "blkio.throttle.read_bps_device"
V2_RULE = "io.max"
NO_LIMIT = 2**64 - 1  # the kernel's "unlimited" for a bps rule (U64_MAX)
SYS_BLOCK = "/sys/block"


@dataclass(frozen=True)
class IoBytes:
    read: int = 0
    write: int = 0

    @property
    def total(self) -> int:
        return self.read + self.write

    def __sub__(self, other: IoBytes) -> IoBytes:
        return IoBytes(self.read - other.read, self.write - other.write)


def parse_v1(text: str) -> IoBytes:
    """``blkio.throttle.io_service_bytes``: Read and Write summed over the devices."""
    read = write = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or ":" not in parts[0]:
            continue  # the closing "Total N", or an empty file's nothing
        try:
            value = int(parts[2])
        except ValueError:
            raise CgroupError(f"{V1_FILE}: unreadable line {line!r}") from None
        if parts[1] == "Read":
            read += value
        elif parts[1] == "Write":
            write += value
    return IoBytes(read, write)


def parse_v2(text: str) -> IoBytes:
    """``io.stat``: rbytes and wbytes summed over the devices."""
    read = write = 0
    for line in text.splitlines():
        for field in line.split()[1:]:
            key, _, value = field.partition("=")
            if key not in ("rbytes", "wbytes"):
                continue
            try:
                n = int(value)
            except ValueError:
                raise CgroupError(f"{V2_FILE}: unreadable field {field!r}") from None
            if key == "rbytes":
                read += n
            else:
                write += n
    return IoBytes(read, write)


def read_io_bytes(group_dir: str) -> IoBytes:
    """The bytes the group moved so far (v1 blkio or cgroup2 io, whichever it has)."""
    for name, parse in ((V2_FILE, parse_v2), (V1_FILE, parse_v1)):
        path = os.path.join(group_dir, name)
        try:
            with open(path, encoding="ascii") as f:
                return parse(f.read())
        except FileNotFoundError:
            continue
    raise CgroupError(
        f"{group_dir}: no block I/O statistics ({V2_FILE} or {V1_FILE})",
        fix="on v1 the group must be in the blkio hierarchy; on cgroup2 enable +io "
        "in its parent's cgroup.subtree_control",
    )


def disks(sys_block: str = SYS_BLOCK) -> list[str]:
    """``MAJ:MIN`` of every whole disk the kernel lists (the throttle layer takes no
    partitions)."""
    out: list[str] = []
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(sys_block, name, "dev"), encoding="ascii") as f:
                out.append(f.read().strip())
        except OSError:
            continue
    return out


def _rule_per_disk(fs: CgroupFS, path: str, value: str, sys_block: str) -> list[str]:
    """Write ``MAJ:MIN value`` for every disk; the disks that refused, with why."""
    refused: list[str] = []
    for dev in disks(sys_block):
        try:
            fs.write(path, f"{dev} {value}")
        except OSError as e:
            refused.append(f"{dev} ({e.strerror or e})")
    return refused


class V1Io:
    """v1 blkio: ``blkio.throttle.io_service_bytes`` (module docstring)."""

    version = 1

    def __init__(self, fs: CgroupFS, sys_block: str = SYS_BLOCK) -> None:
        self.fs = fs
        self.sys_block = sys_block

    def stat_file(self, d: str) -> str:
        return f"{d}/{V1_FILE}"

    def read(self, f: str) -> IoBytes:
        return parse_v1(self.fs.read(f))

    def activate(self, d: str) -> list[str]:
        """Make every disk's queue count (module docstring); the disks that refused."""
        return _rule_per_disk(self.fs, f"{d}/{V1_RULE}", f"{NO_LIMIT}", self.sys_block)

    def track(self, d: str) -> list[str]:
        """Give a new group its block groups now (module docstring); the disks that refused."""
        return _rule_per_disk(self.fs, f"{d}/{V1_RULE}", f"{NO_LIMIT}", self.sys_block)


class V2Io:
    """cgroup2 io: ``io.stat``, present where the parent enables ``io``."""

    version = 2

    def __init__(self, fs: CgroupFS, sys_block: str = SYS_BLOCK) -> None:
        self.fs = fs
        self.sys_block = sys_block

    def stat_file(self, d: str) -> str:
        return f"{d}/{V2_FILE}"

    def read(self, f: str) -> IoBytes:
        return parse_v2(self.fs.read(f))

    def activate(self, d: str) -> list[str]:
        return []  # cgroup2 counts on every queue

    def track(self, d: str) -> list[str]:
        """As :meth:`V1Io.track`, through ``io.max`` ("rbps=max" limits nothing)."""
        return _rule_per_disk(self.fs, f"{d}/{V2_RULE}", "rbps=max", self.sys_block)
