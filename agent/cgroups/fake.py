"""A fake cgroupfs: a temp directory with the same files, plus kernel reactions.

Plain files cannot react to writes, so FakeCgroupFS emulates what the kernel
does: ``cgroup.procs`` writes append (and move the pid out of sibling groups),
``cgroup.freeze`` updates ``cgroup.events``, ``freezer.state`` passes through
FREEZING for a few reads, ``cgroup.kill`` empties the group, and mkdir fills in
the control files. Tests can mark a group "stuck" to exercise freeze timeouts.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.cgroups.base import CgroupFS

V1_HIERARCHIES = ("freezer", "cpu", "cpuacct", "cpuset")


class FakeCgroupFS(CgroupFS):
    def __init__(self, root: str | os.PathLike[str], *, v2: bool, cpu_weight: bool = True):
        self.root = Path(root)
        self.v2 = v2
        self.cpu_weight = cpu_weight
        self.freezing_reads = 2  # FREEZING answers before FROZEN (v1)
        self.stuck: set[Path] = set()  # group dirs that never finish freezing
        self.killed: list[int] = []
        self._pending: dict[Path, int] = {}

    # ---- tree construction -------------------------------------------------
    def build(self) -> FakeCgroupFS:
        if self.v2:
            self.root.mkdir(parents=True, exist_ok=True)
            ctrls = "cpu cpuset hugetlb" if self.cpu_weight else "hugetlb"
            self._put(self.root / "cgroup.controllers", ctrls)
            self._put(self.root / "cgroup.subtree_control", "")
            self._put(self.root / "cgroup.procs", "")
            self._put(self.root / "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
        else:
            for h in V1_HIERARCHIES:
                d = self.root / h
                d.mkdir(parents=True, exist_ok=True)
                self._populate_v1(d, h)
        return self

    @staticmethod
    def _put(path: Path, text: str) -> None:
        path.write_text(text, encoding="ascii")

    def _populate_v1(self, d: Path, h: str) -> None:
        self._put(d / "cgroup.procs", "")
        self._put(d / "tasks", "")
        if h == "freezer" and d != self.root / h:
            self._put(d / "freezer.state", "THAWED\n")
        if h == "cpu":
            self._put(d / "cpu.shares", "1024\n")
            self._put(d / "cpu.cfs_quota_us", "-1\n")
            self._put(d / "cpu.cfs_period_us", "100000\n")
        if h == "cpuacct":
            self._put(d / "cpuacct.usage", "0\n")
        if h == "cpuset":
            top = d == self.root / h
            self._put(d / "cpuset.cpus", "0-1\n" if top else "\n")
            self._put(d / "cpuset.mems", "0\n" if top else "\n")

    def _populate_v2(self, d: Path) -> None:
        self._put(d / "cgroup.procs", "")
        self._put(d / "cgroup.freeze", "0\n")
        self._put(d / "cgroup.events", "populated 0\nfrozen 0\n")
        self._put(d / "cgroup.kill", "")
        self._put(d / "cgroup.subtree_control", "")
        ctrls = "cpu" if self.cpu_weight else ""
        self._put(d / "cgroup.controllers", ctrls)
        self._put(d / "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
        if self.cpu_weight:
            self._put(d / "cpu.weight", "100\n")

    def _hierarchy(self, path: Path) -> str:
        return path.relative_to(self.root).parts[0]

    # ---- CgroupFS ---------------------------------------------------------
    def mkdir(self, path: Path) -> None:
        os.mkdir(path)
        if self.v2:
            self._populate_v2(path)
        else:
            self._populate_v1(path, self._hierarchy(path))

    def rmdir(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(path)
        subdirs = [e for e in path.iterdir() if e.is_dir()]
        procs = path / "cgroup.procs"
        if subdirs or (procs.exists() and procs.read_text().split()):
            raise OSError(16, "Device or resource busy")  # EBUSY like the kernel
        for e in path.iterdir():
            e.unlink()
        os.rmdir(path)

    def read(self, path: Path | str) -> str:
        path = Path(path)
        if path.name == "freezer.state":
            state = path.read_text().strip()
            if state == "FROZEN" and path.parent in self.stuck:
                return "FREEZING\n"
            left = self._pending.get(path, 0)
            if state == "FROZEN" and left > 0:
                self._pending[path] = left - 1
                return "FREEZING\n"
        if path.name == "cgroup.events" and path.parent in self.stuck:
            return path.read_text().replace("frozen 1", "frozen 0")
        return super().read(path)

    def write(self, path: Path | str, value: str) -> None:
        path = Path(path)
        name = path.name
        if name == "cgroup.procs":
            pid = value.strip()
            self._move_pid(path, pid)
            return
        if name == "freezer.state":
            if value.strip() == "FROZEN":
                self._pending[path] = self.freezing_reads
            self._put(path, value.strip() + "\n")
            return
        if name == "cgroup.freeze":
            self._put(path, value.strip() + "\n")
            events = path.parent / "cgroup.events"
            populated = "1" if (path.parent / "cgroup.procs").read_text().split() else "0"
            self._put(events, f"populated {populated}\nfrozen {value.strip()}\n")
            return
        if name == "cgroup.kill":
            procs = path.parent / "cgroup.procs"
            self.killed.extend(int(p) for p in procs.read_text().split())
            self._put(procs, "")
            return
        if name == "cgroup.subtree_control":
            cur = set(path.read_text().split())
            for tok in value.split():
                if tok.startswith("+"):
                    cur.add(tok[1:])
                elif tok.startswith("-"):
                    cur.discard(tok[1:])
            self._put(path, " ".join(sorted(cur)))
            return
        self._put(path, value)

    def _move_pid(self, procs: Path, pid: str) -> None:
        # A pid lives in exactly one group per hierarchy: drop it elsewhere.
        top = self.root if self.v2 else self.root / self._hierarchy(procs)
        for other in top.rglob("cgroup.procs"):
            if other == procs:
                continue
            pids = other.read_text().split()
            if pid in pids:
                self._put(other, "".join(p + "\n" for p in pids if p != pid))
        pids = procs.read_text().split()
        if pid not in pids:
            pids.append(pid)
        self._put(procs, "".join(p + "\n" for p in pids))

    # ---- test helpers -------------------------------------------------------
    def set_usage(self, rel: str, ns: int) -> None:
        """Pretend the group has used ns of CPU time."""
        if self.v2:
            self._put(self.root / rel / "cpu.stat", f"usage_usec {ns // 1000}\n")
        else:
            self._put(self.root / "cpuacct" / rel / "cpuacct.usage", f"{ns}\n")

    def exit_pid(self, pid: int) -> None:
        """Pretend a process exited: it leaves every group."""
        for procs in self.root.rglob("cgroup.procs"):
            pids = procs.read_text().split()
            if str(pid) in pids:
                self._put(procs, "".join(p + "\n" for p in pids if p != str(pid)))


def fake_v1(tmp: str | os.PathLike[str]) -> FakeCgroupFS:
    return FakeCgroupFS(tmp, v2=False).build()


def fake_v2(tmp: str | os.PathLike[str], *, cpu_weight: bool = True) -> FakeCgroupFS:
    return FakeCgroupFS(tmp, v2=True, cpu_weight=cpu_weight).build()
