"""cgroup v1 access for the cluster: the one module that touches /sys/fs/cgroup.

Plain file writes rather than cgroupspy: the cluster only mkdirs, writes a few
knobs, lists PIDs and rmdirs, and a tiny interface is easy to fake in unit
tests (:class:`CgroupFS`). cgroup v1 keeps cpu, cpuacct, freezer and cpuset in
separate hierarchies on these machines, so every operation names a controller.
Paths are relative to the hierarchy root, e.g. ``("cpu", "cosched/n0")``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Protocol

CGROUP_MOUNT = "/sys/fs/cgroup"
NODE_CONTROLLERS = ("cpu", "cpuacct", "freezer")


class CgroupFS(Protocol):
    def has_controller(self, controller: str) -> bool: ...
    def exists(self, controller: str, path: str) -> bool: ...
    def mkdir(self, controller: str, path: str) -> None: ...
    def rmdir(self, controller: str, path: str) -> None: ...
    def children(self, controller: str, path: str) -> list[str]: ...
    def read(self, controller: str, path: str, knob: str) -> str: ...
    def write(self, controller: str, path: str, knob: str, value: str) -> None: ...
    def pids(self, controller: str, path: str) -> list[int]: ...
    def procs_file(self, controller: str, path: str) -> str: ...


class V1CgroupFS:
    """Real cgroup v1 hierarchies mounted under ``root`` (one dir per controller)."""

    def __init__(self, root: str = CGROUP_MOUNT) -> None:
        self.root = root

    def _p(self, controller: str, path: str, *rest: str) -> str:
        return os.path.join(self.root, controller, path.strip("/"), *rest)

    def has_controller(self, controller: str) -> bool:
        # A v1 hierarchy is a "cgroup" mount at <root>/<name> whose options list
        # the controller (the root cgroup has no knobs for some controllers,
        # e.g. no freezer.state, so looking at files is not enough).
        base = os.path.join(self.root, controller)
        try:
            with open("/proc/self/mounts") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 4 and fields[1] == base and fields[2] == "cgroup":
                        return controller in fields[3].split(",")
        except OSError:
            pass
        return False

    def exists(self, controller: str, path: str) -> bool:
        return os.path.isdir(self._p(controller, path))

    def mkdir(self, controller: str, path: str) -> None:
        os.makedirs(self._p(controller, path), exist_ok=True)

    def rmdir(self, controller: str, path: str) -> None:
        os.rmdir(self._p(controller, path))

    def children(self, controller: str, path: str) -> list[str]:
        base = self._p(controller, path)
        return sorted(d for d in _listdir(base) if os.path.isdir(os.path.join(base, d)))

    def read(self, controller: str, path: str, knob: str) -> str:
        with open(self._p(controller, path, knob)) as f:
            return f.read().strip()

    def write(self, controller: str, path: str, knob: str, value: str) -> None:
        with open(self._p(controller, path, knob), "w") as f:
            f.write(value)

    def pids(self, controller: str, path: str) -> list[int]:
        try:
            return [int(x) for x in self.read(controller, path, "cgroup.procs").split()]
        except FileNotFoundError:
            return []

    def procs_file(self, controller: str, path: str) -> str:
        return self._p(controller, path, "cgroup.procs")


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def subtree(fs: CgroupFS, controller: str, path: str) -> list[str]:
    """All cgroups at and below ``path``, parents before children."""
    if not fs.exists(controller, path):
        return []
    out = [path]
    for child in fs.children(controller, path):
        out += subtree(fs, controller, f"{path}/{child}")
    return out


def thaw_subtree(fs: CgroupFS, controller: str, path: str) -> None:
    """Thaw every frozen cgroup at/below ``path`` (top-down).

    A frozen task cannot act on SIGKILL, so removal would hang on it. In v1 a
    child's state follows a frozen parent, hence top-down. ``unified`` is the
    cgroup2 mount (``cgroup.freeze``); other hierarchies cannot freeze.
    """
    for cg in subtree(fs, controller, path):
        with contextlib.suppress(OSError):
            if controller == "freezer":
                if fs.read("freezer", cg, "freezer.state") != "THAWED":
                    fs.write("freezer", cg, "freezer.state", "THAWED")
            elif controller == "unified" and fs.read(controller, cg, "cgroup.freeze") != "0":
                fs.write(controller, cg, "cgroup.freeze", "0")


def remove_tree(
    fs: CgroupFS,
    controller: str,
    path: str,
    kill: Callable[[int, int], None] = os.kill,
    timeout_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """Empty and remove ``path`` and everything below it in one hierarchy.

    Processes still inside are killed: being in a ``cosched`` cgroup is how we
    know they belong to the testbed (we never match processes by name).
    Returns the PIDs that were signalled. Raises OSError if something remains.
    """
    if not fs.exists(controller, path):
        return []
    if controller in ("freezer", "unified"):
        thaw_subtree(fs, controller, path)
    killed: list[int] = []
    cgs = subtree(fs, controller, path)
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = [pid for cg in cgs for pid in fs.pids(controller, cg)]
        if not remaining:
            break
        for pid in remaining:
            if pid not in killed:
                killed.append(pid)
            with contextlib.suppress(ProcessLookupError):
                kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise OSError(f"processes {remaining} survive in {controller}:{path}")
        sleep(0.02)
    for cg in reversed(cgs):  # children first
        _rmdir_retry(fs, controller, cg, deadline, sleep)
    return killed


def _rmdir_retry(
    fs: CgroupFS, controller: str, path: str, deadline: float, sleep: Callable[[float], None]
) -> None:
    # A killed task can linger as a zombie for a moment; rmdir returns EBUSY then.
    while True:
        try:
            fs.rmdir(controller, path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            sleep(0.02)


def remove_if_empty(fs: CgroupFS, controller: str, path: str) -> bool:
    """rmdir ``path`` only if it has no children and no processes (never kills).

    Used for the shared ``cosched`` root, which other cosched components may
    also hold cgroups under.
    """
    if not fs.exists(controller, path):
        return False
    if fs.children(controller, path) or fs.pids(controller, path):
        return False
    try:
        fs.rmdir(controller, path)
    except OSError:
        return False
    return True
