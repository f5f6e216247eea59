"""cgroup v2 backend: cgroup.freeze/cgroup.events, cpu.weight, cpu.stat, cgroup.kill.

cpu.weight exists only where the cpu controller is enabled for the subtree. On
hosts where cpu stays bound to a v1 hierarchy (like the development VMs) it is
missing: weights are then recorded but not enforced, and
``capabilities.weights_enforced`` says so.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

from agent.cgroups.base import (
    DEFAULT_WEIGHT,
    Capabilities,
    CgroupDriver,
    CgroupError,
    CgroupFS,
    check_rel,
    clamp_weight,
    parse_pids,
)
from agent.cgroups.v1 import _count_cpus


class V2Driver(CgroupDriver):
    name = "v2"

    def __init__(self, root: str | os.PathLike[str] = "/sys/fs/cgroup", **kw: object) -> None:
        super().__init__(root, **kw)  # type: ignore[arg-type]
        self._weights: dict[str, int] = {}
        self._files: dict[tuple[str, str], str] = {}
        self._weights_enforced = self._cpu_in(self.root)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            weights_enforced=self._weights_enforced,
            native_kill=True,  # cgroup.kill, kernel >= 5.14; falls back to SIGKILL
        )

    def available(self) -> bool:
        return self.fs.exists(self.root / "cgroup.controllers")

    def _dir(self, rel: str) -> Path:
        return self.root / rel

    def _cpu_in(self, d: Path) -> bool:
        try:
            return "cpu" in self.fs.read(d / "cgroup.controllers").split()
        except OSError:
            return False

    def ensure_parent(self, parent: str) -> None:
        rel = check_rel(parent)
        d = self.root
        comps = rel.split("/")
        for comp in comps:
            # Delegate cpu down the path so job groups get cpu.weight, if it can be had.
            if self._cpu_in(d):
                with contextlib.suppress(OSError):
                    self.fs.write(d / "cgroup.subtree_control", "+cpu")
            d = d / comp
            if not self.fs.exists(d):
                with contextlib.suppress(FileExistsError):
                    self.fs.mkdir(d)
        if self._cpu_in(d):
            with contextlib.suppress(OSError):
                self.fs.write(d / "cgroup.subtree_control", "+cpu")
        self._weights_enforced = self.fs.exists(d / "cpu.weight") or (
            self._cpu_in(d) and "cpu" in self._subtree(d)
        )

    def _subtree(self, d: Path) -> list[str]:
        try:
            return self.fs.read(d / "cgroup.subtree_control").split()
        except OSError:
            return []

    def create(self, path: str) -> None:
        d = self._dir(check_rel(path))
        with contextlib.suppress(FileExistsError):
            self.fs.mkdir(d)
        self._weights_enforced = self.fs.exists(d / "cpu.weight")

    def remove(self, path: str) -> None:
        rel = check_rel(path)
        try:
            self.fs.rmdir(self._dir(rel))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise CgroupError(f"cannot remove {self._dir(rel)}: {e.strerror}") from e
        self._weights.pop(rel, None)
        for key in [k for k in self._files if k[0] == rel]:
            del self._files[key]

    def exists(self, path: str) -> bool:
        return self.fs.exists(self._dir(check_rel(path)))

    def children(self, parent: str) -> list[str]:
        d = self._dir(check_rel(parent))
        if not self.fs.exists(d):
            return []
        return sorted(self.fs.listdir(d))

    def add_pid(self, path: str, pid: int) -> None:
        self.fs.write(self._dir(check_rel(path)) / "cgroup.procs", str(pid))

    def pids(self, path: str) -> list[int]:
        return parse_pids(self.fs.read(self._dir(check_rel(path)) / "cgroup.procs"))

    def set_weight(self, path: str, weight: int) -> None:
        rel = check_rel(path)
        w = clamp_weight(weight)
        if self._weights.get(rel) == w:
            return
        f = self._dir(rel) / "cpu.weight"
        if self.fs.exists(f):
            self.fs.write(f, str(w))
        self._weights[rel] = w  # recorded even when not enforceable

    def get_weight(self, path: str) -> int:
        rel = check_rel(path)
        f = self._dir(rel) / "cpu.weight"
        if self.fs.exists(f):
            return int(self.fs.read(f))
        return self._weights.get(rel, DEFAULT_WEIGHT)

    def cpu_usage_ns(self, path: str) -> int:
        text = self.fs.read(self._dir(check_rel(path)) / "cpu.stat")
        for line in text.splitlines():
            key, _, val = line.partition(" ")
            if key == "usage_usec":
                return int(val) * 1000
        raise CgroupError(f"no usage_usec in cpu.stat of {path}")

    def cpu_capacity(self, parent: str) -> float:
        d = self._dir(check_rel(parent))
        cap = super().cpu_capacity(parent)
        try:
            quota, period = self.fs.read(d / "cpu.max").split()
            if quota != "max":
                cap = min(cap, int(quota) / int(period))
        except (OSError, ValueError):
            pass
        try:
            cpus = self.fs.read(d / "cpuset.cpus.effective").strip()
            if cpus:
                cap = min(cap, float(_count_cpus(cpus)))
        except (OSError, ValueError):
            pass
        return cap

    def _file(self, path: str, name: str) -> str:
        # Plain-string cache: these are read in the freeze confirmation loop.
        key = (path, name)
        f = self._files.get(key)
        if f is None:
            f = str(self._dir(check_rel(path)) / name)
            self._files[key] = f
        return f

    def _events(self, path: str) -> dict[str, str]:
        text = self.fs.read(self._file(path, "cgroup.events"))
        out: dict[str, str] = {}
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            out[k] = v.strip()
        return out

    def _wait(self, pending: list[str], interval: float, want_frozen: bool) -> None:
        """Sleep until the kernel notifies a cgroup.events change (or a short cap).

        kernfs wakes pollers of cgroup.events with POLLPRI when "frozen" flips,
        so confirmation needs no busy polling. Only on the real filesystem: the
        fake tree's plain files never notify.
        """
        if type(self.fs) is not CgroupFS:
            super()._wait(pending, interval, want_frozen)
            return
        want = b"frozen 1" if want_frozen else b"frozen 0"
        poller = select.poll()
        fds: list[int] = []
        try:
            for path in pending:
                fd = os.open(self._file(path, "cgroup.events"), os.O_RDONLY)
                fds.append(fd)
                # Reading arms the notification; if the state flipped since the
                # caller's check, the content already says so: return at once.
                if want in os.read(fd, 256):
                    return
                poller.register(fd, select.POLLPRI)
            # Capped: a notification only shortens the wait, never lengthens it.
            poller.poll(max(1, round(max(interval, 2e-3) * 1000)))
        finally:
            for fd in fds:
                os.close(fd)

    def pin_freezer(self, parent: str) -> None:
        # v2 freezing does not go through the global freezer switch v1 pins.
        return

    def unpin_freezer(self, parent: str) -> None:
        return

    def _request_freeze(self, path: str) -> None:
        self.fs.write(self._file(path, "cgroup.freeze"), "1")

    def _request_thaw(self, path: str) -> None:
        self.fs.write(self._file(path, "cgroup.freeze"), "0")

    def is_frozen(self, path: str) -> bool:
        return self._events(path).get("frozen") == "1"

    def is_thawed(self, path: str) -> bool:
        return self._events(path).get("frozen") == "0"

    def kill_all(self, path: str) -> None:
        rel = check_rel(path)
        kill_file = self._dir(rel) / "cgroup.kill"
        if self.fs.exists(kill_file):
            self.fs.write(kill_file, "1")  # also kills frozen tasks, atomically w.r.t. forks
        else:
            self.thaw(rel)
            for pid in self.pids(rel):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while self.pids(rel) and time.monotonic() < deadline:
            time.sleep(0.005)
