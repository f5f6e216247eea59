"""The one fake cgroup filesystem: a temp directory with the kernel's files and reactions.

Plain files cannot react to writes, so :class:`FakeCgroupFS` plays the kernel
as Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/*.rst describe it:

* v1 (``kind="v1"``): a hierarchy per controller under ``<root>/<name>``;
  ``freezer.state`` passes through FREEZING for a few reads; a new cpuset child
  has empty cpus/mems; ``cpu.rt_runtime_us`` exists when ``rt=True``.
* v2 (``kind="v2"``): one tree at ``<root>``; a child gets ``cgroup.controllers``
  = its parent's ``cgroup.subtree_control`` and the interface files of those
  controllers (cpu.weight, cpu.max, cpuset.cpus[.effective]); enabling a
  controller not offered fails with ENOENT, and disabling one a child still
  enables with EBUSY. No internal processes: a non-root group holding processes
  cannot enable a domain controller (io, memory, hugetlb: EBUSY), and a process
  cannot join a group that passes one on (EBUSY). The threaded controllers (cpu,
  cpuset, pids) are exempt while the group has no populated child: enabling one
  in a group with processes makes it a thread root (``cgroup.type`` "domain
  threaded"), whose children are "domain invalid" and take no process and
  enable nothing (EOPNOTSUPP) — the kernel's cgroup_vet_subtree_control_enable()
  and cgroup_migrate_vet_dst(), seen on this host made cgroup-v2-only
  (tests/integration/test_cgroup_contract.py). Writing ``cgroup.type`` (threaded
  mode) is not modelled. ``cgroup.freeze`` updates ``cgroup.events``;
  ``cgroup.kill`` kills the subtree.
* hybrid (``kind="hybrid"``): the v1 hierarchies plus a cgroup2 tree at
  ``<root>/unified`` offering no cpu/cpuset (this development machine).

Block I/O (issue 31): a v1 ``blkio`` hierarchy when ``v1`` names it, ``io.stat`` where a
cgroup2 parent enables ``io``. The fake does no I/O: :meth:`FakeCgroupFS.charge_io`
stands for a job's reads and writes (as O_DIRECT or fsync'd I/O, which the kernel
counts at once); on v1 they count only once some group wrote a throttle rule (the
kernel's per-queue activation, common/cgroups/iostat.py).

A pid lives in one group per hierarchy. ``kill(pid, sig)`` (used in place of
os.kill) removes it everywhere unless it is frozen, like the kernel. Tests can
mark a group "stuck" to exercise freeze timeouts.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from common.cgroups.fs import CgroupFS, OpenedWrite
from common.cgroups.layout import Layout, parse_layout

V1_HIERARCHIES = ("freezer", "cpu", "cpuacct", "cpuset")
# cgroup2's threaded controllers (cgroup-v2.rst "Threads"); the others are domain ones.
THREADED = frozenset({"cpu", "cpuset", "pids", "perf_event"})
ROOT_RT_US = 950_000

V1_IO_KEYS = ("Read", "Write", "Sync", "Async", "Discard", "Total")


class FakeCgroupFS(CgroupFS):
    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        kind: str = "v1",
        v2_controllers: str = "cpu cpuset hugetlb",
        rt: bool = False,
        cpus: str = "0-1",
        v1: tuple[str, ...] = V1_HIERARCHIES,
    ):
        if kind not in ("v1", "v2", "hybrid"):
            raise ValueError(kind)
        self.root = Path(root)
        self.kind = kind
        self.v2_controllers = v2_controllers
        self.rt = rt
        self.cpus = cpus
        self.v1_hierarchies = v1 if kind != "v2" else ()
        self.freezing_reads = 2  # FREEZING answers before FROZEN (v1)
        self.stuck: set[Path] = set()  # group dirs that never finish freezing
        self.killed: list[int] = []
        self._pending: dict[Path, int] = {}
        self.io_active = False  # v1: a throttle rule was written (the queue counts)
        self._io: dict[Path, tuple[int, int]] = {}  # group dir -> (read, write) bytes

    # ---- compatibility with the older constructor ----------------------------------
    @property
    def v2(self) -> bool:
        return self.kind == "v2"

    @property
    def unified(self) -> Path | None:
        if self.kind == "v2":
            return self.root
        if self.kind == "hybrid":
            return self.root / "unified"
        return None

    # ---- tree construction -------------------------------------------------------
    def build(self) -> FakeCgroupFS:
        self.root.mkdir(parents=True, exist_ok=True)
        for h in self.v1_hierarchies:
            d = self.root / h
            d.mkdir(parents=True, exist_ok=True)
            self._populate_v1(d, h, top=True)
        u = self.unified
        if u is not None:
            u.mkdir(parents=True, exist_ok=True)
            self._put(u / "cgroup.controllers", self.v2_controllers)
            self._put(u / "cgroup.subtree_control", "")
            self._put(u / "cgroup.procs", "")
            self._put(u / "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
            if "cpuset" in self.v2_controllers.split():
                self._put(u / "cpuset.cpus.effective", self.cpus + "\n")
        return self

    def mounts_text(self) -> str:
        """What /proc/self/mounts would say on this fake host."""
        lines = [
            f"cgroup {self.root / h} cgroup rw,nosuid,nodev,noexec,relatime,{h} 0 0"
            for h in self.v1_hierarchies
        ]
        if self.unified is not None:
            lines.append(f"cgroup2 {self.unified} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0")
        return "\n".join(lines) + "\n"

    def layout(self, prefer: str = "auto") -> Layout:
        return parse_layout(self.mounts_text(), self.v2_controllers, prefer)

    @staticmethod
    def _put(path: Path, text: str) -> None:
        path.write_text(text, encoding="ascii")

    def _is_v2(self, path: Path) -> bool:
        u = self.unified
        return u is not None and (path == u or u in path.parents)

    def _is_top(self, d: Path) -> bool:
        return d == self.unified or (d.parent == self.root and d.name in self.v1_hierarchies)

    def _hierarchy(self, path: Path) -> Path:
        """The mount point a path belongs to."""
        u = self.unified
        if u is not None and (path == u or u in path.parents):
            return u
        return self.root / path.relative_to(self.root).parts[0]

    def _populate_v1(self, d: Path, h: str, top: bool = False) -> None:
        self._put(d / "cgroup.procs", "")
        self._put(d / "tasks", "")
        if h == "freezer" and not top:
            self._put(d / "freezer.state", "THAWED\n")
        if h == "cpu":
            self._put(d / "cpu.shares", "1024\n")
            self._put(d / "cpu.cfs_quota_us", "-1\n")
            self._put(d / "cpu.cfs_period_us", "100000\n")
            if self.rt:
                self._put(d / "cpu.rt_runtime_us", f"{ROOT_RT_US if top else 0}\n")
        if h == "cpuacct":
            self._put(d / "cpuacct.usage", "0\n")
        if h == "blkio":
            self._put(d / "blkio.throttle.io_service_bytes", "Total 0\n")
            self._put(d / "blkio.throttle.read_bps_device", "")
        if h == "cpuset":
            self._put(d / "cpuset.cpus", self.cpus + "\n" if top else "\n")
            self._put(d / "cpuset.mems", "0\n" if top else "\n")

    def _populate_v2(self, d: Path) -> None:
        self._put(d / "cgroup.procs", "")
        self._put(d / "cgroup.freeze", "0\n")
        self._put(d / "cgroup.events", "populated 0\nfrozen 0\n")
        self._put(d / "cgroup.kill", "")
        self._put(d / "cgroup.subtree_control", "")
        self._put(d / "cgroup.type", "domain\n")  # read computes it (see _v2_type)
        enabled = (d.parent / "cgroup.subtree_control").read_text().split()
        self._put(d / "cgroup.controllers", " ".join(enabled))
        self._put(d / "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
        for c in enabled:
            self._add_interface(d, c)

    def _add_interface(self, d: Path, c: str) -> None:
        if c == "cpu":
            self._put(d / "cpu.weight", "100\n")
            self._put(d / "cpu.max", "max 100000\n")
        elif c == "io":
            self._put(d / "io.stat", "")
            if not self._is_top(d):
                self._put(d / "io.max", "")
        elif c == "cpuset":
            self._put(d / "cpuset.cpus", "\n")
            self._put(d / "cpuset.mems", "\n")
            self._put(d / "cpuset.cpus.effective", self._effective(d.parent) + "\n")

    def _effective(self, d: Path) -> str:
        f = d / "cpuset.cpus.effective"
        return f.read_text().strip() if f.exists() else self.cpus

    # ---- CgroupFS -------------------------------------------------------------------
    def is_real(self) -> bool:
        return False

    def getxattr(self, path: Path | str, name: str) -> bytes | None:
        f = Path(path) / f".xattr.{name}"
        return f.read_bytes() if f.exists() else None

    def mkdir(self, path: Path | str) -> None:
        path = Path(path)
        os.mkdir(path)
        if self._is_v2(path):
            self._populate_v2(path)
        else:
            self._populate_v1(path, self._hierarchy(path).name)

    def rmdir(self, path: Path | str) -> None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        subdirs = [e for e in path.iterdir() if e.is_dir()]
        procs = path / "cgroup.procs"
        if subdirs or (procs.exists() and procs.read_text().split()):
            raise OSError(errno.EBUSY, "Device or resource busy")
        for e in path.iterdir():
            e.unlink()
        os.rmdir(path)

    def listdir(self, path: Path | str) -> list[str]:
        return [e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]

    def _v1_parent_frozen(self, d: Path) -> bool:
        """v1: a group reads FROZEN while an ancestor is frozen (its parent_freezing)."""
        top = self._hierarchy(d)
        while d != top and d.parent != top:
            d = d.parent
            st = d / "freezer.state"
            if st.exists() and st.read_text().strip() == "FROZEN":
                return True
        return False

    def _v2_frozen(self, d: Path) -> bool:
        """v2: ``frozen 1`` in cgroup.events when the group or an ancestor asks to freeze."""
        top = self._hierarchy(d)
        while True:
            f = d / "cgroup.freeze"
            if f.exists() and f.read_text().strip() == "1":
                return True
            if d == top:
                return False
            d = d.parent

    def _populated(self, d: Path) -> bool:
        """cgroup.events ``populated``: a process in the group or any descendant."""
        return any(p.read_text().split() for p in d.rglob("cgroup.procs"))

    # ---- cgroup2's no-internal-process rule and thread roots (kernel/cgroup/cgroup.c) ----
    @staticmethod
    def _has_tasks(d: Path) -> bool:
        return bool((d / "cgroup.procs").read_text().split())

    @staticmethod
    def _enabled(d: Path) -> set[str]:
        return set((d / "cgroup.subtree_control").read_text().split())

    def _is_thread_root(self, d: Path) -> bool:
        """Holds processes and passes a threaded controller on (threaded children are
        not modelled, so that is the only way to become one)."""
        return not self._is_top(d) and self._has_tasks(d) and bool(self._enabled(d) & THREADED)

    def _can_be_thread_root(self, d: Path) -> bool:
        if self._is_top(d):
            return True  # the root is mixable
        children = (e for e in d.iterdir() if e.is_dir())
        if any(self._populated(c) for c in children):
            return False  # either domain or threaded children, not both
        return not (self._enabled(d) - THREADED)  # no domain controller enabled

    def _valid_domain(self, d: Path) -> bool:
        """Can host processes and domain controllers: no thread root above it."""
        top = self._hierarchy(d)
        while d != top:
            d = d.parent
            if self._is_thread_root(d):
                return False
        return True

    def _v2_type(self, d: Path) -> str:
        if not self._valid_domain(d):
            return "domain invalid"
        return "domain threaded" if self._is_thread_root(d) else "domain"

    def read(self, path: Path | str) -> str:
        path = Path(path)
        if path.name == "freezer.state":
            state = path.read_text().strip()
            if state == "THAWED" and self._v1_parent_frozen(path.parent):
                state = "FROZEN"
            if state == "FROZEN" and path.parent in self.stuck:
                return "FREEZING\n"
            left = self._pending.get(path, 0)
            if state == "FROZEN" and left > 0:
                self._pending[path] = left - 1
                return "FREEZING\n"
            return state + "\n"
        if path.name == "cgroup.events" and self._is_v2(path) and path.exists():
            d = path.parent
            frozen = self._v2_frozen(d) and d not in self.stuck
            return f"populated {int(self._populated(d))}\nfrozen {int(frozen)}\n"
        if path.name == "cgroup.type" and self._is_v2(path) and path.exists():
            return self._v2_type(path.parent) + "\n"
        return path.read_text(encoding="ascii")

    def open_write(self, path: Path | str, value: str) -> OpenedWrite:
        """The fake's opened write plays the kernel at write time, like :meth:`write`."""
        if not Path(path).exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return _FakeOpenedWrite(self, path, value)

    def write(self, path: Path | str, value: str) -> None:
        path = Path(path)
        d = path.parent
        name = path.name
        if not path.exists() and name not in ("cgroup.procs",):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        if name == "cgroup.procs":
            self._move_pid(path, value.strip())
            return
        if name == "freezer.state":
            if value.strip() == "FROZEN":
                self._pending[path] = self.freezing_reads
            self._put(path, value.strip() + "\n")
            return
        if name == "cgroup.freeze":
            self._put(path, value.strip() + "\n")
            populated = "1" if (d / "cgroup.procs").read_text().split() else "0"
            self._put(d / "cgroup.events", f"populated {populated}\nfrozen {value.strip()}\n")
            return
        if name == "cgroup.kill":
            for procs in sorted(d.rglob("cgroup.procs")):
                self.killed.extend(int(p) for p in procs.read_text().split())
                self._put(procs, "")
            return
        if name == "cgroup.subtree_control":
            self._subtree_control(path, value)
            return
        if name == "cpuset.cpus":
            if not value.strip() and not self._is_v2(path) and self._populated(d):
                # v1 empties a cpuset only while nothing runs in it (validate_change())
                raise OSError(errno.ENOSPC, "No space left on device")
            self._put(path, value.strip() + "\n")
            if self._is_v2(path):
                eff = value.strip() or self._effective(d.parent)
                self._put(d / "cpuset.cpus.effective", eff + "\n")
            return
        if name in ("cpu.shares", "cpu.weight"):
            # The kernel parses an unsigned integer (EINVAL); cpu.weight is 1..10000
            # (ERANGE), cpu.shares is clamped to 2..262144.
            if not value.strip().isdigit():
                raise OSError(errno.EINVAL, "Invalid argument")
            if name == "cpu.weight" and not 1 <= int(value) <= 10000:
                raise OSError(errno.ERANGE, "Numerical result out of range")
        if name == "blkio.throttle.read_bps_device":
            dev, _, limit = value.strip().partition(" ")
            if ":" not in dev or not limit.isdigit():
                raise OSError(errno.EINVAL, "Invalid argument")
            self.io_active = True
            stat = d / "blkio.throttle.io_service_bytes"
            if stat.exists() and f"{dev} " not in stat.read_text():
                # a rule makes the group's block group for the disk: it is listed from now
                zero = "".join(f"{dev} {k} 0\n" for k in V1_IO_KEYS)
                self._put(stat, zero + stat.read_text())
            if int(limit) >= 2**64 - 1:
                return  # "no limit": nothing is kept, the file reads back empty
        if name == "io.max":
            # MAJ:MIN then key=value limits; "max" everywhere keeps nothing (blk-throttle.c)
            dev, *limits = value.split()
            keys = ("rbps", "wbps", "riops", "wiops")
            for lim in limits:
                k, _, v = lim.partition("=")
                if ":" not in dev or k not in keys or not (v == "max" or v.isdigit()):
                    raise OSError(errno.EINVAL, "Invalid argument")
            if all(lim.endswith("=max") for lim in limits):
                return
        if name == "cpu.rt_runtime_us":
            parent = d.parent / name
            if not self._is_top(d) and parent.exists() and int(value) > int(parent.read_text()):
                raise OSError(errno.EINVAL, "Invalid argument")
        self._put(path, value)

    def _subtree_control(self, path: Path, value: str) -> None:
        d = path.parent
        cur = path.read_text().split()
        offered = (d / "cgroup.controllers").read_text().split()
        for tok in value.split():
            c = tok[1:]
            if tok.startswith("+"):
                if c not in offered:
                    raise FileNotFoundError(errno.ENOENT, "No such file or directory")
                if c not in cur:
                    self._vet_enable(d, c)
                    cur.append(c)
                    for child in (e for e in d.iterdir() if e.is_dir()):
                        self._put(child / "cgroup.controllers", " ".join(cur))
                        self._add_interface(child, c)
            elif tok.startswith("-") and c in cur:
                children = [e for e in d.iterdir() if e.is_dir()]
                if any(c in (e / "cgroup.subtree_control").read_text().split() for e in children):
                    raise OSError(errno.EBUSY, "Device or resource busy")  # a child passes it on
                cur.remove(c)
                for child in children:
                    self._put(child / "cgroup.controllers", " ".join(cur))
        self._put(path, " ".join(cur))

    def _vet_enable(self, d: Path, c: str) -> None:
        """cgroup_vet_subtree_control_enable(): may ``d`` pass controller ``c`` on?"""
        if self._is_top(d):
            return
        if not self._valid_domain(d):
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        if c not in THREADED:
            if self._is_thread_root(d):
                raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        elif self._can_be_thread_root(d):
            return  # threaded controllers handle internal competition
        if self._has_tasks(d):
            raise OSError(errno.EBUSY, "Device or resource busy")

    def _vet_dst(self, d: Path) -> None:
        """cgroup_migrate_vet_dst(): may a process join ``d``?"""
        if self._is_top(d):
            return
        if not self._valid_domain(d):
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        if self._can_be_thread_root(d):
            return
        if self._enabled(d):
            raise OSError(errno.EBUSY, "Device or resource busy")  # no internal processes

    def _move_pid(self, procs: Path, pid: str) -> None:
        d = procs.parent
        if not d.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(procs))
        v2 = self._is_v2(procs)
        if v2:
            self._vet_dst(d)
        cpus = d / "cpuset.cpus"
        if not v2 and cpus.exists() and not cpus.read_text().strip():
            raise OSError(errno.ENOSPC, "No space left on device")
        # A pid lives in exactly one group per hierarchy: drop it elsewhere.
        top = self._hierarchy(procs)
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

    # ---- process model and test helpers -------------------------------------------
    def _dir(self, hierarchy: str, rel: str) -> Path:
        base = self.root / hierarchy if hierarchy else self.root
        return base / rel if rel else base

    def add_proc(self, hierarchy: str, rel: str, pid: int) -> None:
        """Put ``pid`` into ``rel`` of a hierarchy: ``"freezer"``, ``"unified"``, ``""`` (v2)."""
        procs = self._dir(hierarchy, rel) / "cgroup.procs"
        pids = procs.read_text().split()
        if str(pid) not in pids:
            self._put(procs, "".join(p + "\n" for p in [*pids, str(pid)]))

    def frozen(self, pid: int) -> bool:
        """Frozen in any hierarchy (the group or an ancestor asked to freeze)."""
        for procs in self.root.rglob("cgroup.procs"):
            if str(pid) not in procs.read_text().split():
                continue
            top = self._hierarchy(procs)
            d = procs.parent
            while True:
                st, fr = d / "freezer.state", d / "cgroup.freeze"
                if st.exists() and st.read_text().strip() != "THAWED":
                    return True
                if fr.exists() and fr.read_text().strip() == "1":
                    return True
                if d == top:
                    break
                d = d.parent
        return False

    def kill(self, pid: int, sig: int) -> None:
        """os.kill stand-in: the signal is recorded; a frozen task does not die until thawed."""
        self.killed.append(pid)
        if not self.frozen(pid):
            self.exit_pid(pid)

    def exit_pid(self, pid: int) -> None:
        """Pretend a process exited: it leaves every group."""
        for procs in self.root.rglob("cgroup.procs"):
            pids = procs.read_text().split()
            if str(pid) in pids:
                self._put(procs, "".join(p + "\n" for p in pids if p != str(pid)))

    # ---- addressing by (hierarchy, group): "freezer", "cpu", ..., "unified", "" (v2) ----
    def has(self, hierarchy: str, rel: str) -> bool:
        return self._dir(hierarchy, rel).is_dir()

    def make(self, hierarchy: str, rel: str) -> None:
        """mkdir -p through the fake kernel."""
        d = self._dir(hierarchy, "")
        for comp in rel.split("/"):
            d = d / comp
            if not d.exists():
                self.mkdir(d)

    def knob(self, hierarchy: str, rel: str, name: str) -> str:
        return self.read(self._dir(hierarchy, rel) / name).strip()

    def set_knob(self, hierarchy: str, rel: str, name: str, value: str) -> None:
        self.write(self._dir(hierarchy, rel) / name, value)

    def procs(self, hierarchy: str, rel: str) -> list[int]:
        f = self._dir(hierarchy, rel) / "cgroup.procs"
        return [int(p) for p in f.read_text().split()] if f.exists() else []

    def set_usage(self, rel: str, ns: int) -> None:
        """Pretend the group has used ns of CPU time."""
        if "cpuacct" in self.v1_hierarchies:
            self._put(self.root / "cpuacct" / rel / "cpuacct.usage", f"{ns}\n")
        else:
            assert self.unified is not None
            self._put(self.unified / rel / "cpu.stat", f"usage_usec {ns // 1000}\n")

    def charge_io(self, hierarchy: str, rel: str, read: int, write: int) -> None:
        """Pretend the group read and wrote these bytes (direct or fsync'd I/O)."""
        d = self._dir(hierarchy, rel)
        v2 = self._is_v2(d)
        if not v2 and not self.io_active:
            return  # v1 counts nothing before a rule set the queue up
        r, w = self._io.get(d, (0, 0))
        r, w = r + read, w + write
        self._io[d] = (r, w)
        if v2:
            if (d / "io.stat").exists():
                self._put(
                    d / "io.stat", f"254:0 rbytes={r} wbytes={w} rios=0 wios=0 dbytes=0 dios=0\n"
                )
        else:
            values = (r, w, r + w, 0, 0, r + w)
            lines = [f"254:0 {k} {v}" for k, v in zip(V1_IO_KEYS, values, strict=True)]
            self._put(
                d / "blkio.throttle.io_service_bytes", "\n".join(lines) + f"\nTotal {r + w}\n"
            )

    def delegate(self, rel: str) -> None:
        """Mark a v2 group delegated, as systemd does with Delegate=yes (xattr)."""
        assert self.unified is not None
        (self.unified / rel / ".xattr.trusted.delegate").write_bytes(b"1")

    def footprint(self) -> list[str]:
        """Every group below the hierarchy roots, as ``"<hierarchy>:<path>"``."""
        out: list[str] = []
        tops = [(h, self.root / h) for h in self.v1_hierarchies]
        if self.unified is not None:
            tops.append(("unified" if self.kind == "hybrid" else "", self.unified))
        for name, top in tops:
            for d in sorted(p for p in top.rglob("*") if p.is_dir()):
                if name == "" and d.name in self.v1_hierarchies and d.parent == self.root:
                    continue
                out.append(f"{name}:{d.relative_to(top)}")
        return out


class _FakeOpenedWrite(OpenedWrite):
    def __init__(self, fs: FakeCgroupFS, path: Path | str, value: str) -> None:
        self.path = str(path)
        self._fs = fs
        self._value = value
        self._fd = -1

    def write(self) -> None:
        self._fs.write(self.path, self._value)


def fake_v1(tmp: str | os.PathLike[str], **kw: object) -> FakeCgroupFS:
    return FakeCgroupFS(tmp, kind="v1", **kw).build()  # type: ignore[arg-type]


def fake_v2(tmp: str | os.PathLike[str], *, cpu_weight: bool = True, **kw: object) -> FakeCgroupFS:
    ctrls = "cpu cpuset hugetlb" if cpu_weight else "hugetlb"
    return FakeCgroupFS(tmp, kind="v2", v2_controllers=ctrls, **kw).build()  # type: ignore[arg-type]


def fake_hybrid(tmp: str | os.PathLike[str], **kw: object) -> FakeCgroupFS:
    return FakeCgroupFS(tmp, kind="hybrid", v2_controllers="hugetlb", **kw).build()  # type: ignore[arg-type]
