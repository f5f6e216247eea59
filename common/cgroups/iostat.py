"""A cgroup's block I/O bytes, from cgroup v1's blkio or cgroup2's io controller: the disk
component of a job's demand for N + 1 gangs (controller/policies/devices.py).

* v1: ``blkio.throttle.io_service_bytes`` — lines ``MAJ:MIN Read|Write|Sync|Async|Discard|
  Total N`` and a last ``Total N``. The throttle layer counts every bio the group issues,
  whichever I/O scheduler the disk has (the ``blkio.bfq.*`` files exist only under BFQ).
* cgroup2: ``io.stat`` — one line per device, ``MAJ:MIN rbytes=N wbytes=N rios=N wios=N
  dbytes=N dios=N``.

Both are summed over the devices. What each counts: bytes that reached the block layer on
the group's behalf. On v1 buffered writes are flushed by the kernel's writeback and
counted in the root group, not the writer's; direct and synchronous I/O and reads are
counted in the group. cgroup2 charges writeback to the group that dirtied the pages.

Parsing is pure; :func:`read_io_bytes` reads whichever file the group directory has.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from common.cgroups.errors import CgroupError

V1_FILE = "blkio.throttle.io_service_bytes"
V2_FILE = "io.stat"


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
