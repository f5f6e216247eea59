"""Pick the cgroup backend: v1 if a v1 freezer hierarchy is mounted, else v2."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agent.cgroups.base import CgroupDriver, CgroupError
from agent.cgroups.v1 import V1Driver
from agent.cgroups.v2 import V2Driver


@dataclass(frozen=True)
class Detected:
    backend: str  # "v1" or "v2"
    root: str  # v1: directory holding the hierarchies; v2: the cgroup2 mount


def detect(mounts_text: str | None = None) -> Detected:
    """Parse /proc/self/mounts (or the given text)."""
    if mounts_text is None:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            mounts_text = f.read()
    v2_root: str | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mountpoint, fstype, options = fields[1], fields[2], fields[3].split(",")
        if fstype == "cgroup" and "freezer" in options:
            return Detected("v1", os.path.dirname(mountpoint.rstrip("/")))
        if fstype == "cgroup2" and v2_root is None:
            v2_root = mountpoint
    if v2_root is not None:
        return Detected("v2", v2_root)
    raise CgroupError("no cgroup v1 freezer and no cgroup2 mount found")


def make_driver(backend: str | None = None, root: str | None = None, **kw: float) -> CgroupDriver:
    """Build a driver; backend/root override detection (``None``/"auto" = detect)."""
    if backend in (None, "auto"):
        found = detect()
        backend = found.backend
        root = root or found.root
    if backend == "v1":
        return V1Driver(root or "/sys/fs/cgroup", **kw)
    if backend == "v2":
        if root is None:
            try:
                found = detect()
                root = found.root if found.backend == "v2" else _v2_mount()
            except CgroupError:
                root = _v2_mount()
        return V2Driver(root, **kw)
    raise CgroupError(f"unknown cgroup backend {backend!r}")


def _v2_mount() -> str:
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and fields[2] == "cgroup2":
                return fields[1]
    raise CgroupError("no cgroup2 mount")
