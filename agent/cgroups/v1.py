"""cgroup v1 backend: freezer + cpu (shares) + cpuacct, each its own hierarchy.

cpu and cpuacct go through cgroupspy (one pid per procs assignment: the kernel
rejects a batch). cgroupspy has no freezer class, so the freezer is driven
through plain files via the CgroupFS (which lets the fake emulate FREEZING).
If the node's parent also exists in the cpuset hierarchy (the cluster may cap a
node's CPUs that way) the job is placed in a child cpuset too, or it would
escape the node's capacity limit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

from cgroupspy.nodes import Node

from agent.cgroups.base import (
    Capabilities,
    CgroupDriver,
    CgroupError,
    check_rel,
    parse_pids,
    shares_to_weight,
    weight_to_shares,
)

FREEZER = "freezer"
CPU = "cpu"
CPUACCT = "cpuacct"
CPUSET = "cpuset"
FREEZE_ANCHOR = "freeze-anchor"  # not a job: job groups are named job-<id>


class V1Driver(CgroupDriver):
    name = "v1"

    def __init__(self, root: str | os.PathLike[str] = "/sys/fs/cgroup", **kw: object) -> None:
        super().__init__(root, **kw)  # type: ignore[arg-type]
        self._nodes: dict[tuple[str, str], Node] = {}
        self._shares: dict[str, int] = {}
        self._state_files: dict[str, str] = {}
        self._usage_files: dict[str, str] = {}

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(weights_enforced=True, native_kill=False)

    def available(self) -> bool:
        return all(
            (self.root / h / "tasks").exists() or (self.root / h / "cgroup.procs").exists()
            for h in (FREEZER, CPU, CPUACCT)
        )

    # ---- helpers ---------------------------------------------------------
    def _dir(self, hierarchy: str, rel: str) -> Path:
        return self.root / hierarchy / rel

    def _node(self, hierarchy: str, rel: str) -> Node:
        """A cgroupspy node built without walking the tree (a walk costs ms)."""
        key = (hierarchy, rel)
        node = self._nodes.get(key)
        if node is None:
            node = Node(os.fsencode(self.root))
            node = Node(hierarchy.encode(), parent=node)
            for comp in rel.split("/"):
                node = Node(comp.encode(), parent=node)
            self._nodes[key] = node
        return node

    def _hierarchies(self, rel: str) -> list[str]:
        hs = [FREEZER, CPU, CPUACCT]
        parent = rel.rpartition("/")[0]
        if parent and self.fs.exists(self._dir(CPUSET, parent)):
            hs.append(CPUSET)
        return hs

    # ---- structure -------------------------------------------------------
    def ensure_parent(self, parent: str) -> None:
        rel = check_rel(parent)
        for h in (FREEZER, CPU, CPUACCT):
            path = self.root / h
            for comp in rel.split("/"):
                path = path / comp
                if not self.fs.exists(path):
                    # comounted hierarchies (cpu,cpuacct) share directories
                    with contextlib.suppress(FileExistsError):
                        self.fs.mkdir(path)

    def create(self, path: str) -> None:
        rel = check_rel(path)
        for h in self._hierarchies(rel):
            d = self._dir(h, rel)
            with contextlib.suppress(FileExistsError):
                self.fs.mkdir(d)
            if h == CPUSET:
                # A v1 cpuset child starts with empty cpus/mems and refuses tasks.
                parent = d.parent
                for f in ("cpuset.cpus", "cpuset.mems"):
                    if not self.fs.read(d / f).strip():
                        self.fs.write(d / f, self.fs.read(parent / f).strip())

    def remove(self, path: str) -> None:
        rel = check_rel(path)
        errors: list[str] = []
        for h in (FREEZER, CPU, CPUACCT, CPUSET):
            d = self._dir(h, rel)
            try:
                self.fs.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError as e:
                errors.append(f"{d}: {e.strerror}")
        for key in [k for k in self._nodes if k[1] == rel]:
            del self._nodes[key]
        self._shares.pop(rel, None)
        self._state_files.pop(rel, None)
        self._usage_files.pop(rel, None)
        if errors:
            raise CgroupError("cannot remove " + "; ".join(errors))

    def exists(self, path: str) -> bool:
        return self.fs.exists(self._dir(FREEZER, check_rel(path)))

    def children(self, parent: str) -> list[str]:
        d = self._dir(FREEZER, check_rel(parent))
        if not self.fs.exists(d):
            return []
        return sorted(self.fs.listdir(d))

    def add_pid(self, path: str, pid: int) -> None:
        rel = check_rel(path)
        for h in self._hierarchies(rel):
            if h in (CPU, CPUACCT):
                self._node(h, rel).controller.procs = [pid]
            else:
                self.fs.write(self._dir(h, rel) / "cgroup.procs", str(pid))

    def pids(self, path: str) -> list[int]:
        return parse_pids(self.fs.read(self._dir(FREEZER, check_rel(path)) / "cgroup.procs"))

    # ---- weights and accounting ----------------------------------------------
    def set_weight(self, path: str, weight: int) -> None:
        rel = check_rel(path)
        shares = weight_to_shares(weight)
        if self._shares.get(rel) != shares:  # skip a syscall per quantum when unchanged
            self._node(CPU, rel).controller.shares = shares
            self._shares[rel] = shares

    def get_weight(self, path: str) -> int:
        return shares_to_weight(int(self._node(CPU, check_rel(path)).controller.shares))

    def cpu_usage_ns(self, path: str) -> int:
        # Read on every quantum for every job: a raw read of the file cgroupspy's
        # CpuAcctController.usage would open costs a third of its buffered open().
        f = self._usage_files.get(path)
        if f is None:
            node = self._node(CPUACCT, check_rel(path))
            f = os.fsdecode(node.controller.filepath(b"cpuacct.usage"))
            self._usage_files[path] = f
        return int(self.fs.read(f))

    def cpu_capacity(self, parent: str) -> float:
        rel = check_rel(parent)
        cap = super().cpu_capacity(parent)
        try:
            quota = int(self.fs.read(self._dir(CPU, rel) / "cpu.cfs_quota_us"))
            period = int(self.fs.read(self._dir(CPU, rel) / "cpu.cfs_period_us"))
            if quota > 0 and period > 0:
                cap = min(cap, quota / period)
        except (OSError, ValueError):
            pass
        try:
            cpus = self.fs.read(self._dir(CPUSET, rel) / "cpuset.cpus").strip()
            if cpus:
                cap = min(cap, float(_count_cpus(cpus)))
        except (OSError, ValueError):
            pass
        return cap

    # ---- freezer ---------------------------------------------------------
    def pin_freezer(self, parent: str) -> None:
        """Keep an empty FROZEN group so the kernel's freezer stays switched on.

        The first group to start freezing turns on a global static key (code
        patching with IPIs to every CPU) and the last thaw turns it off again:
        measured 60 us per write instead of 15 us here, plus a disturbance of
        every CPU, on each switch of a single-job node. An empty frozen
        group costs nothing and keeps the key on.
        """
        d = self._dir(FREEZER, check_rel(parent)) / FREEZE_ANCHOR
        with contextlib.suppress(FileExistsError):
            self.fs.mkdir(d)
        self.fs.write(str(d / "freezer.state"), "FROZEN")

    def unpin_freezer(self, parent: str) -> None:
        d = self._dir(FREEZER, check_rel(parent)) / FREEZE_ANCHOR
        if self.fs.exists(d):
            with contextlib.suppress(OSError):
                self.fs.write(str(d / "freezer.state"), "THAWED")
                self.fs.rmdir(d)

    def _state_file(self, path: str) -> str:
        # Cached as a plain string: pathlib joins cost more than the read itself
        # in the confirmation poll loop.
        f = self._state_files.get(path)
        if f is None:
            f = str(self._dir(FREEZER, check_rel(path)) / "freezer.state")
            self._state_files[path] = f
        return f

    def _request_freeze(self, path: str) -> None:
        self.fs.write(self._state_file(path), "FROZEN")

    def _request_thaw(self, path: str) -> None:
        self.fs.write(self._state_file(path), "THAWED")

    def is_frozen(self, path: str) -> bool:
        return self.fs.read(self._state_file(path)).strip() == "FROZEN"

    def is_thawed(self, path: str) -> bool:
        return self.fs.read(self._state_file(path)).strip() == "THAWED"

    def kill_all(self, path: str) -> None:
        rel = check_rel(path)
        # v1 frozen tasks do not act on SIGKILL until thawed.
        self.thaw(rel)
        deadline = time.monotonic() + 2.0
        while True:
            pids = self.pids(rel)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                except OSError as e:
                    if e.errno != errno.ESRCH:
                        raise
            if time.monotonic() > deadline:
                return  # dying tasks may linger; the caller retries removal
            time.sleep(0.005)


def _count_cpus(spec: str) -> int:
    n = 0
    for part in spec.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            n += int(hi) - int(lo) + 1
        elif part:
            n += 1
    return n
