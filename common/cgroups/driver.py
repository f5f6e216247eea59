"""The cgroup layer: one interface over v1, hybrid and v2-only hosts.

:class:`Cgroups` is what the agent, the cluster, ``cosched clean`` and the
tests use. Paths handed to it are *relative* cgroup paths such as
``cosched/n0/job-7``; each resource (freezer, cpu, accounting, cpuset) is
served by the hierarchy the :class:`~common.cgroups.layout.Layout` chose for it,
through the v1 or v2 file classes (common/cgroups/v1.py, v2.py), and every
file access goes through one :class:`~common.cgroups.fs.CgroupFS`.

A group is made in every hierarchy in use, so a process added to it is
confined in all of them. On cgroup2 the controllers cosched needs (``cpu``,
``cpuset``) are enabled down the path through ``cgroup.subtree_control``; the
kernel refuses that in a group that holds processes (the "no internal
processes" rule), so processes (the agent, jobs) always live in leaves.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from common.cgroups.base import (
    DEFAULT_WEIGHT,
    Capabilities,
    check_rel,
    clamp_weight,
    parse_pids,
)
from common.cgroups.errors import CgroupError, CgroupSetupError, FreezeError, ThawError
from common.cgroups.fs import CgroupFS, OpenedWrite
from common.cgroups.iostat import IoBytes, V1Io, V2Io
from common.cgroups.layout import Hierarchy, Layout
from common.cgroups.v1 import V1Acct, V1Cpu, V1Cpuset, V1Freezer
from common.cgroups.v2 import V2Acct, V2Cpu, V2Cpuset, V2Freezer
from common.cpus import count_cpus

log = logging.getLogger(__name__)

FREEZE_ANCHOR = "freeze-anchor"  # not a job: job groups are named job-<id>
_RESOURCE_OF = {"io": "blkio"}  # a cgroup2 controller -> the resource the layout names


class _Freezer(Protocol):
    version: int

    def request(self, d: str, frozen: bool) -> None: ...
    def request_file(self, d: str, frozen: bool) -> tuple[str, str]: ...
    def frozen(self, d: str) -> bool: ...
    def thawed(self, d: str) -> bool: ...
    def needs_thaw(self, d: str) -> bool: ...
    def kill(self, d: str) -> bool: ...


class _Cpu(Protocol):
    version: int

    def set_weight(self, d: str, weight: int) -> bool: ...
    def get_weight(self, d: str) -> int | None: ...
    def set_max(self, d: str, quota_us: int | None, period_us: int) -> None: ...
    def get_max(self, d: str) -> tuple[int | None, int]: ...
    def describe_max(self, d: str) -> str: ...
    def rt_runtime(self, d: str) -> int | None: ...
    def set_rt_runtime(self, d: str, us: int) -> None: ...


class _Acct(Protocol):
    version: int

    def usage_file(self, d: str) -> str: ...
    def usage_ns(self, f: str) -> int: ...


class _Io(Protocol):
    version: int

    def stat_file(self, d: str) -> str: ...
    def read(self, f: str) -> IoBytes: ...
    def activate(self, d: str) -> list[str]: ...
    def track(self, d: str) -> list[str]: ...


class _Cpuset(Protocol):
    version: int

    def init_child(self, d: str) -> None: ...
    def set_cpus(self, d: str, cpus: str) -> None: ...
    def effective(self, d: str) -> str: ...


class Cgroups:
    """Create/remove groups, move pids, freeze/thaw (confirmed), weights, limits, usage."""

    def __init__(
        self,
        layout: Layout,
        *,
        fs: CgroupFS | None = None,
        freeze_timeout: float = 1.0,
        poll_interval: float = 50e-6,
    ) -> None:
        self.layout = layout
        self.fs = fs or CgroupFS()
        self.freeze_timeout = freeze_timeout
        self.poll_interval = poll_interval
        # The last freeze_many/thaw_many split in two: writing every request, then
        # confirming them (freezer.state or cgroup.events), seconds (benchmarks/switch_steps.py)
        self.last_write_s = 0.0
        self.last_confirm_s = 0.0
        # Each resource served by the v1 or v2 files, as the layout says (None = missing).
        self._freezer: _Freezer | None = self._pick("freezer", V1Freezer, V2Freezer)
        self._cpu: _Cpu | None = self._pick("cpu", V1Cpu, V2Cpu)
        self._acct: _Acct | None = self._pick("cpuacct", V1Acct, V2Acct)
        self._cpuset: _Cpuset | None = self._pick("cpuset", V1Cpuset, V2Cpuset)
        self._io: _Io | None = self._pick("blkio", V1Io, V2Io)
        self._io_parents: set[str] = set()  # io_accounting() succeeded for these
        self._weights: dict[str, int] = {}
        self._usage_files: dict[str, str] = {}  # read every quantum: no path joins there

    def _pick(self, resource: str, v1: type, v2: type) -> Any:
        h = self.layout.controllers.get(resource)
        if h is None:
            return None
        return v1(self.fs) if h.version == 1 else v2(self.fs)

    # ---- what this host offers ---------------------------------------------------
    @property
    def name(self) -> str:
        return self.layout.mode

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            weights_enforced=self._cpu is not None,
            native_kill=self._freezer is not None and self._freezer.version == 2,
        )

    def available(self) -> bool:
        """True if every hierarchy of the layout is mounted."""
        return all(self.fs.exists(h.mount) for h in self.layout.mounts())

    def missing(self, resources: Iterable[str]) -> list[str]:
        """The resources of ``resources`` this layout cannot serve."""
        return [r for r in resources if r not in self.layout.controllers]

    def explain_missing(self, resource: str) -> CgroupSetupError:
        """One line: which controller is missing, where it is, what to change."""
        lay = self.layout
        where = lay.bound_v1.get(resource)
        if where and lay.unified and lay.version(resource) is None:
            return CgroupSetupError(
                f"cgroup controller {resource} is bound to the v1 hierarchy at {where}, "
                f"so cgroup2 at {lay.unified} cannot use it",
                fix="use --cgroup auto to run on v1 here, or boot with "
                "systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all",
            )
        offered = " ".join(sorted(lay.v2_controllers)) or "-"
        if lay.unified and resource in ("cpu", "cpuset"):
            return CgroupSetupError(
                f"cgroup controller {resource} is not offered by the cgroup2 root "
                f"{lay.unified} (cgroup.controllers: {offered})",
                fix=f"enable it in the kernel, or release it from wherever it is bound "
                f"(/proc/cgroups lists {resource})",
            )
        return CgroupSetupError(
            f"cgroup controller {resource} is not mounted on this host",
            fix=f"mount it (mount -t cgroup -o {resource} none /sys/fs/cgroup/{resource}) "
            "or mount cgroup2 at /sys/fs/cgroup",
        )

    # ---- paths ------------------------------------------------------------------
    def _root(self, resource: str) -> str:
        h = self.layout.controllers.get(resource)
        return h.mount if h else ""

    def _dir(self, resource: str, rel: str) -> str:
        return f"{self._root(resource)}/{rel}"

    def _primary(self) -> Hierarchy:
        """The hierarchy that lists a group's processes: the freezer's, else any."""
        h = self.layout.controllers.get("freezer")
        if h is None:
            mounts = self.layout.mounts()
            if not mounts:
                raise CgroupError("no cgroup hierarchy in use")
            h = mounts[0]
        return h

    def dirs(self, rel: str) -> list[str]:
        """The group's directory in every hierarchy where it exists."""
        rel = check_rel(rel)
        return [d for h in self.layout.mounts() if self.fs.exists(d := f"{h.mount}/{rel}")]

    def procs_files(self, rel: str) -> list[str]:
        """cgroup.procs of the group in every hierarchy (written between fork and exec)."""
        return [d + "/cgroup.procs" for d in self.dirs(rel)]

    def _mounts_for(self, resources: Iterable[str]) -> list[Hierarchy]:
        """Hierarchies of the freezer, accounting and ``resources``, freezer first."""
        out: list[Hierarchy] = []
        for r in ("freezer", "cpuacct", "blkio", *resources):
            h = self.layout.controllers.get(r)
            if h is not None and h not in out:
                out.append(h)
        return out

    # ---- structure ----------------------------------------------------------------
    def ensure_parent(self, parent: str, enable: Iterable[str] = ("cpu",)) -> None:
        """mkdir -p ``parent`` everywhere; on cgroup2 enable ``enable`` for its children.

        The controllers go into ``cgroup.subtree_control`` of every ancestor
        from the hierarchy root down to ``parent`` itself, so the children of
        ``parent`` get ``cpu.weight`` (and ``cpuset.cpus`` if asked). Raises
        CgroupSetupError naming the controller, the group and the fix when the
        kernel refuses (not delegated, bound to v1, or processes in the way).
        """
        rel = check_rel(parent)
        enable = tuple(enable)
        want = [r for r in enable if self.layout.version(_RESOURCE_OF.get(r, r)) == 2]
        base_depth = len(self.layout.base.split("/")) if self.layout.base else 0
        for h in self._mounts_for(enable):
            d = h.mount
            comps = rel.split("/")
            for i, comp in enumerate(comps):
                if h.version == 2 and want:
                    if i < base_depth:
                        self._check_passed_on(d, want)  # systemd's, not ours to change
                    else:
                        self._enable(d, want, is_root=i == 0)
                d = f"{d}/{comp}"
                if not self.fs.exists(d):
                    with contextlib.suppress(FileExistsError):
                        self.fs.mkdir(d)
                    self._init_new(h, d)
            if h.version == 2 and want:
                self._enable(d, want, is_root=False)

    def check_enable(self, parent: str, enable: Iterable[str]) -> None:
        """What :meth:`ensure_parent` would refuse, found without writing anything.

        Walks the existing groups from the cgroup2 root to ``parent``. Groups
        above the base are not ours: they must already pass the controllers
        on. The base itself must be offered them (its processes are moved out
        by :func:`~common.cgroups.delegation.prepare_base`); groups below it
        will have the controllers enabled, which cgroup v2 refuses while they
        hold processes.
        """
        want = [r for r in enable if self.layout.version(_RESOURCE_OF.get(r, r)) == 2]
        h = self.layout.controllers.get(want[0]) if want else None
        if h is None:
            return
        base_depth = len(self.layout.base.split("/")) if self.layout.base else 0
        comps = check_rel(parent).split("/")
        for i in range(len(comps) + 1):
            rel = "/".join(comps[:i])
            d = f"{h.mount}/{rel}" if rel else h.mount
            if not self.fs.exists(d):
                return  # made by us: it gets what its parent enables
            try:
                enabled = self.fs.read(d + "/cgroup.subtree_control").split()
                offered = self.fs.read(d + "/cgroup.controllers").split()
            except OSError:
                return
            missing = [c for c in want if c not in enabled]
            if i <= base_depth:
                for c in missing:
                    if c not in offered or i < base_depth:
                        raise self._not_offered(c, d)
            elif missing and self.pids(rel, h):
                raise CgroupSetupError(
                    f"cannot enable {' '.join(missing)} below {d}: the group holds processes "
                    "(cgroup v2 allows controllers only above leaves)",
                    fix=f"move the processes of {d}/cgroup.procs into a child group",
                )

    def _check_passed_on(self, d: str, controllers: list[str]) -> None:
        try:
            have = set(self.fs.read(d + "/cgroup.subtree_control").split())
        except OSError:
            have = set()
        for c in controllers:
            if c not in have:
                raise self._not_offered(c, d)

    def _enable(self, d: str, controllers: list[str], *, is_root: bool) -> None:
        try:
            have = set(self.fs.read(d + "/cgroup.subtree_control").split())
        except OSError:
            have = set()
        for c in controllers:
            if c in have:
                continue
            try:
                offered = self.fs.read(d + "/cgroup.controllers").split()
            except OSError:
                offered = []
            if c not in offered:
                raise self._not_offered(c, d)
            # The kernel refuses a domain controller here (EBUSY) but takes a threaded
            # one (cpu, cpuset) and makes the group a thread root, whose job groups then
            # take no process (EOPNOTSUPP, tests/integration/test_cgroup_contract.py):
            # refuse both alike, before writing.
            if not is_root and self._holds_processes(d):
                raise self._holds_processes_error(c, d)
            try:
                self.fs.write(d + "/cgroup.subtree_control", "+" + c)
            except OSError as e:
                if e.errno == errno.EBUSY and not is_root:
                    raise self._holds_processes_error(c, d) from e
                raise CgroupSetupError(
                    f"cannot enable the {c} controller in {d}/cgroup.subtree_control: "
                    f"{e.strerror or e}",
                    fix="check that nothing else (systemd, a container runtime) holds this subtree",
                ) from e

    def _holds_processes(self, d: str) -> bool:
        try:
            return bool(self.fs.read(d + "/cgroup.procs").split())
        except OSError:
            return False

    @staticmethod
    def _holds_processes_error(c: str, d: str) -> CgroupSetupError:
        return CgroupSetupError(
            f"cannot enable the {c} controller below {d}: the group holds processes "
            "(cgroup v2 allows controllers only above leaves)",
            fix=f"move the processes of {d}/cgroup.procs into a child group",
        )

    def _not_offered(self, c: str, d: str) -> CgroupSetupError:
        lay = self.layout
        if lay.systemd and not lay.delegated:
            return CgroupSetupError(
                f"the {c} controller is not available in {d}: "
                "the cgroup is not delegated by systemd",
                fix="run under a unit or scope with Delegate=yes, e.g. "
                "`systemd-run --scope -p Delegate=yes cosched ...`",
            )
        return CgroupSetupError(
            f"the {c} controller is not available in {d} (its parent does not enable it)",
            fix=f"write +{c} to the parent's cgroup.subtree_control, or set Delegate=yes "
            "on the systemd unit that owns it",
        )

    def _init_new(self, h: Hierarchy, d: str) -> None:
        if self._cpuset is not None and self.layout.controllers.get("cpuset") == h:
            self._cpuset.init_child(d)

    def create(self, path: str) -> None:
        """mkdir the group in every hierarchy that holds its parent.

        A v1 hierarchy the parent was not made in (a cpuset nobody asked
        for) stays out of it; on cgroup2 there is just one tree.
        """
        rel = check_rel(path)
        parent = rel.rpartition("/")[0]
        for h in self.layout.mounts():
            d = f"{h.mount}/{rel}"
            if parent and not self.fs.exists(f"{h.mount}/{parent}"):
                continue
            try:
                self.fs.mkdir(d)
            except FileExistsError:
                continue
            self._init_new(h, d)
            if self._io is not None and h == self.layout.controllers.get("blkio"):
                self._track_io(rel, d)

    def _track_io(self, rel: str, d: str) -> None:
        """A group below an accounted parent gets its block groups at once
        (common/cgroups/iostat.py): else its first I/O may be charged to the parent."""
        if self._io is None or not any(rel.startswith(p + "/") for p in self._io_parents):
            return
        refused = self._io.track(d)
        if refused:  # counting stays best effort, as it was
            log.debug("%s: block groups not made for %s", rel, ", ".join(refused))

    def remove(self, path: str) -> None:
        """rmdir the group everywhere; it must be empty (no processes, no children)."""
        rel = check_rel(path)
        errors: list[str] = []
        for h in self.layout.mounts():
            d = f"{h.mount}/{rel}"
            try:
                self.fs.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError as e:
                errors.append(f"{d}: {e.strerror or e}")
        self._weights.pop(rel, None)
        self._usage_files.pop(rel, None)
        if errors:
            raise CgroupError("cannot remove " + "; ".join(errors))

    def exists(self, path: str, hierarchy: Hierarchy | None = None) -> bool:
        h = hierarchy or self._primary()
        return self.fs.exists(f"{h.mount}/{check_rel(path)}")

    def children(self, parent: str, hierarchy: Hierarchy | None = None) -> list[str]:
        """Names of the direct child groups of parent (empty if parent is missing)."""
        h = hierarchy or self._primary()
        d = f"{h.mount}/{check_rel(parent)}"
        if not self.fs.exists(d):
            return []
        return sorted(self.fs.listdir(d))

    def add_pid(self, path: str, pid: int) -> None:
        # One pid per write: the kernel takes one per write() call.
        for f in self.procs_files(path):
            self.fs.write(f, str(pid))

    def pids(self, path: str, hierarchy: Hierarchy | None = None) -> list[int]:
        h = hierarchy or self._primary()
        try:
            return parse_pids(self.fs.read(f"{h.mount}/{check_rel(path)}/cgroup.procs"))
        except FileNotFoundError:
            return []

    def enter_leaf(self, parent: str, leaf: str, pid: int) -> str:
        """Move ``pid`` into ``parent/leaf`` (made if needed), out of ``parent`` itself.

        cgroup v2 allows controllers for ``parent``'s children only while
        ``parent`` holds no process, so a daemon placed in ``parent`` steps
        down into a leaf of its own first.
        """
        path = f"{check_rel(parent)}/{leaf}"
        self.create(path)
        self.add_pid(path, pid)
        return path

    # ---- weights, limits and accounting ------------------------------------------
    def set_weight(self, path: str, weight: int) -> None:
        rel = check_rel(path)
        w = clamp_weight(weight)
        if self._weights.get(rel) == w:  # skip a syscall per quantum when unchanged
            return
        if self._cpu is not None:
            self._cpu.set_weight(self._dir("cpu", rel), w)
        self._weights[rel] = w  # recorded even when not enforceable

    def get_weight(self, path: str) -> int:
        rel = check_rel(path)
        if self._cpu is not None:
            w = self._cpu.get_weight(self._dir("cpu", rel))
            if w is not None:
                return w
        return self._weights.get(rel, DEFAULT_WEIGHT)

    def cpu_usage_ns(self, path: str) -> int:
        if self._acct is None:
            raise CgroupError("no CPU accounting on this host (cpuacct or cgroup2 cpu.stat)")
        rel = check_rel(path)
        f = self._usage_files.get(rel)
        if f is None:
            f = self._acct.usage_file(self._dir("cpuacct", rel))
            self._usage_files[rel] = f
        return self._acct.usage_ns(f)

    def io_accounting(self, parent: str) -> str | None:
        """Make the block I/O bytes of ``parent``'s children readable; None once they are,
        else why not, in one line (accounting is optional: the caller goes on without).

        v1: the queues must count (common/cgroups/iostat.py, :meth:`V1Io.activate`).
        cgroup2: ``io`` enabled from the root down to ``parent`` where the root offers it;
        groups above a delegated base must already pass it on (they are not ours), and a
        group holding processes cannot take it (the no-internal-process rule).
        """
        rel = check_rel(parent)
        h = self.layout.controllers.get("blkio")
        if self._io is None or h is None:
            offered = " ".join(sorted(self.layout.v2_controllers)) or "-"
            return (
                "no block I/O accounting: no v1 blkio hierarchy, and cgroup2 "
                f"{self.layout.unified or '(not mounted)'} offers no io (offers: {offered})"
            )
        if h.version == 1:
            refused = self._io.activate(f"{h.mount}/{rel}")
            if refused:
                return f"blkio: the disks {', '.join(refused)} refused a rule"
            self._io_parents.add(rel)
            return None
        try:
            self.ensure_parent(rel, enable=("io",))
        except (CgroupError, OSError) as e:
            return f"cgroup2 io not enabled below /{rel}: {e}"
        self._io_parents.add(rel)
        return None

    def io_bytes(self, path: str) -> IoBytes:
        """Bytes the group read and wrote so far (v1 blkio or cgroup2 io.stat)."""
        if self._io is None:
            raise CgroupError("no block I/O accounting on this host (v1 blkio or cgroup2 io)")
        return self._io.read(self._io.stat_file(self._dir("blkio", check_rel(path))))

    def set_cpu_max(self, path: str, quota_us: int | None, period_us: int) -> None:
        """CFS bandwidth: ``quota_us`` per ``period_us`` (None = unlimited)."""
        if self._cpu is None:
            raise self.explain_missing("cpu")
        self._cpu.set_max(self._dir("cpu", check_rel(path)), quota_us, period_us)

    def set_cpus(self, path: str, cpus: str) -> None:
        """Confine the group to the CPUs of ``cpus`` (a cpuset list, e.g. ``"0-1"``)."""
        if self._cpuset is None:
            raise self.explain_missing("cpuset")
        self._cpuset.set_cpus(self._dir("cpuset", check_rel(path)), cpus)

    def describe_cpu(self, path: str, mechanism: str) -> str:
        """What the kernel says is in force, for ``status``."""
        rel = check_rel(path)
        try:
            if mechanism in ("cpuset", "shared") and self._cpuset is not None:
                return "cpuset.cpus=" + self._cpuset.effective(self._dir("cpuset", rel))
            if mechanism == "cfs" and self._cpu is not None:
                return self._cpu.describe_max(self._dir("cpu", rel))
            return "unlimited"
        except OSError as err:
            return f"unreadable ({err.strerror or err})"

    def cpu_capacity(self, parent: str) -> float:
        """CPUs available to ``parent``: affinity, bounded by its quota and cpuset."""
        rel = check_rel(parent)
        cap = float(len(os.sched_getaffinity(0)))
        if self._cpu is not None:
            try:
                quota, period = self._cpu.get_max(self._dir("cpu", rel))
                if quota is not None and period > 0:
                    cap = min(cap, quota / period)
            except (OSError, ValueError):
                pass
        if self._cpuset is not None:
            try:
                cpus = self._cpuset.effective(self._dir("cpuset", rel))
                if cpus:
                    cap = min(cap, float(count_cpus(cpus)))
            except (OSError, ValueError):
                pass
        return cap

    def rt_runtime(self, path: str = "") -> int | None:
        """v1 RT group budget of ``path`` (root if empty); None where there is none (v2)."""
        if self._cpu is None:
            return None
        d = self._dir("cpu", check_rel(path)) if path else self._root("cpu")
        return self._cpu.rt_runtime(d)

    def set_rt_runtime(self, path: str, us: int) -> None:
        if self._cpu is None:
            raise self.explain_missing("cpu")
        self._cpu.set_rt_runtime(self._dir("cpu", check_rel(path)), us)

    # ---- freezing: request, then confirm -------------------------------------------
    def _need_freezer(self) -> _Freezer:
        if self._freezer is None:
            raise self.explain_missing("freezer")
        return self._freezer

    def is_frozen(self, path: str) -> bool:
        """True only once the kernel reports the group fully frozen."""
        fz = self._need_freezer()
        return fz.frozen(self._dir("freezer", check_rel(path)))

    def is_thawed(self, path: str) -> bool:
        fz = self._need_freezer()
        return fz.thawed(self._dir("freezer", check_rel(path)))

    def freeze(self, path: str) -> float:
        """Freeze and wait for confirmation; returns the latency in seconds."""
        return self.freeze_many([path])[path]

    def thaw(self, path: str) -> float:
        return self.thaw_many([path])[path]

    def freeze_many(
        self, paths: Iterable[str], between: Callable[[], None] | None = None
    ) -> dict[str, float]:
        """Write all freeze requests first, then poll them together.

        Issuing every request before polling overlaps the kernel work of all
        groups, so switching k jobs costs about one freeze latency, not k.
        ``between`` runs after the requests and before the confirmation (an
        agent that cannot run SCHED_FIFO writes its thaws there, agent/daemon.py).
        On timeout every group that did not freeze is thawed back and
        FreezeError names them (the confirmed ones stay frozen).
        """
        fz = self._need_freezer()
        todo = list(paths)
        start = self._request_all(fz, todo, True)
        if between is not None:
            between()
        done, pending = self._poll(todo, start, self.is_frozen, True)
        if pending:
            for p in pending:
                with contextlib.suppress(OSError):
                    fz.request(self._dir("freezer", check_rel(p)), False)
            raise FreezeError(
                f"freeze not confirmed within {self.freeze_timeout}s for {sorted(pending)};"
                " thawed back",
                done,
                pending,
            )
        return done

    def thaw_many(self, paths: Iterable[str]) -> dict[str, float]:
        fz = self._need_freezer()
        todo = list(paths)
        start = self._request_all(fz, todo, False)
        done, pending = self._poll(todo, start, self.is_thawed, False)
        if pending:
            raise ThawError(
                f"thaw not confirmed within {self.freeze_timeout}s for {sorted(pending)}"
            )
        return done

    def request_file(self, path: str, frozen: bool) -> tuple[str, str]:
        """The file a freeze (or thaw) request of ``path`` is written to, and the value."""
        return self._need_freezer().request_file(self._dir("freezer", check_rel(path)), frozen)

    def prepare_thaw(self, paths: Iterable[str]) -> PreparedThaw:
        """Open the thaw requests of ``paths`` now, to write them at an instant later.

        :meth:`thaw_many` split in three for a time-triggered switch
        (agent/plan.py): this opens every request file; :meth:`PreparedThaw.write`
        is then one ``write()`` per group; :meth:`PreparedThaw.confirm` polls
        as :meth:`thaw_many` does. Close it (it is a context manager).
        """
        return PreparedThaw(self, list(paths))

    def _request_all(self, fz: _Freezer, paths: list[str], frozen: bool) -> dict[str, float]:
        """Write every request before confirming any; returns when each was asked."""
        start: dict[str, float] = {}
        t0 = time.perf_counter()
        for p in paths:
            start[p] = time.perf_counter()
            fz.request(self._dir("freezer", check_rel(p)), frozen)
        self.last_write_s = time.perf_counter() - t0
        return start

    def _poll(
        self,
        todo: list[str],
        start: dict[str, float],
        ok: Callable[[str], bool],
        want_frozen: bool,
    ) -> tuple[dict[str, float], list[str]]:
        done: dict[str, float] = {}
        pending = list(todo)
        t0 = time.perf_counter()
        deadline = t0 + self.freeze_timeout
        interval = self.poll_interval
        while pending:
            still: list[str] = []
            for p in pending:
                if ok(p):
                    done[p] = time.perf_counter() - start[p]
                else:
                    still.append(p)
            pending = still
            if not pending or time.perf_counter() > deadline:
                break
            # Sleep, never spin: a spinning poller starves the very tasks that
            # must reach the freezer on this CPU (measured: ~4 ms per freeze).
            # Back off (x1.5 up to 1 ms): a task that must first be scheduled
            # by CFS to freeze can take ms on a loaded host.
            self._wait(
                pending, min(interval, max(0.0, deadline - time.perf_counter())), want_frozen
            )
            interval = min(interval * 1.5, max(self.poll_interval, 1e-3))
        self.last_confirm_s = time.perf_counter() - t0
        return done, pending

    def _wait(self, pending: list[str], interval: float, want_frozen: bool) -> None:
        """Pause between confirmation checks, on v1 and v2 alike.

        cgroup2 announces a change of ``cgroup.events`` to poll(POLLPRI)
        waiters, but the kernel rate-limits those notifications per file
        (cgroup_file_notify()), so a freeze confirmed in 0.1 ms was seen
        1.3-2.4 ms late when awaited that way, against 0.3 ms with these
        backed-off sleeps (benchmarks/freeze_latency.py, docs/cluster.md).
        """
        time.sleep(interval)

    def pin_freezer(self, parent: str) -> None:
        """v1: keep an empty FROZEN group so the kernel's freezer stays switched on.

        The first v1 group to start freezing turns on a global static key (code
        patching with IPIs to every CPU) and the last thaw turns it off again:
        measured 60 us per write instead of 15 us here, on each switch of a
        single-job node. An empty frozen group costs nothing and keeps the key
        on. cgroup2 freezing does not use that switch: nothing to do there.
        """
        if self._freezer is None or self._freezer.version != 1:
            return
        d = self._dir("freezer", f"{check_rel(parent)}/{FREEZE_ANCHOR}")
        with contextlib.suppress(FileExistsError):
            self.fs.mkdir(d)
        self._freezer.request(d, True)

    def unpin_freezer(self, parent: str) -> None:
        if self._freezer is None or self._freezer.version != 1:
            return
        d = self._dir("freezer", f"{check_rel(parent)}/{FREEZE_ANCHOR}")
        if self.fs.exists(d):
            with contextlib.suppress(OSError):
                self._freezer.request(d, False)
                self.fs.rmdir(d)

    # ---- killing and removing --------------------------------------------------------
    def kill_all(self, path: str) -> None:
        """SIGKILL every process in the group; cgroup.kill where the kernel has it."""
        rel = check_rel(path)
        fz = self._freezer
        if fz is None or not fz.kill(self._dir("freezer", rel)):
            if fz is not None:
                self.thaw_subtree(rel)  # a frozen task does not act on SIGKILL
            for pid in self.pids(rel):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while self.pids(rel) and time.monotonic() < deadline:
            time.sleep(0.005)  # dying tasks may linger; the caller retries removal

    def subtree(self, path: str, hierarchy: Hierarchy) -> list[str]:
        """All groups at and below ``path`` in one hierarchy, parents before children."""
        if not self.fs.exists(f"{hierarchy.mount}/{path}"):
            return []
        out = [path]
        for child in sorted(self.fs.listdir(f"{hierarchy.mount}/{path}")):
            out += self.subtree(f"{path}/{child}", hierarchy)
        return out

    def thaw_subtree(self, path: str) -> None:
        """Thaw every frozen group at or below ``path``, top-down.

        A frozen task cannot act on SIGKILL, so removal would hang on it; in
        v1 a child's state follows a frozen parent, hence top-down.
        """
        fz = self._freezer
        h = self.layout.controllers.get("freezer")
        if fz is None or h is None:
            return
        for cg in self.subtree(check_rel(path), h):
            d = f"{h.mount}/{cg}"
            with contextlib.suppress(OSError):
                if fz.needs_thaw(d):
                    fz.request(d, False)

    def remove_tree(
        self,
        path: str,
        kill: Callable[[int, int], None] = os.kill,
        timeout_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[int]:
        """Empty and remove ``path`` and everything below it, in every hierarchy.

        Processes still inside are killed: being in a cosched group is how we
        know they belong to the testbed (we never match processes by name).
        Returns the PIDs that were signalled. Raises OSError if something remains.
        """
        rel = check_rel(path)
        killed: list[int] = []
        trees = {h: self.subtree(rel, h) for h in self.layout.mounts()}
        fz = self._freezer
        if fz is not None and fz.version == 2 and trees.get(self._primary()):
            # cgroup.kill takes the whole subtree at once, frozen tasks included,
            # and races no fork; what it cannot reach is signalled below.
            before = [pid for cg in trees[self._primary()] for pid in self.pids(cg)]
            with contextlib.suppress(OSError):
                if fz.kill(self._dir("freezer", rel)):
                    killed += before
        self.thaw_subtree(rel)
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = [pid for h, cgs in trees.items() for cg in cgs for pid in self.pids(cg, h)]
            if not remaining:
                break
            for pid in dict.fromkeys(remaining):
                if pid not in killed:
                    killed.append(pid)
                with contextlib.suppress(ProcessLookupError):
                    kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise OSError(f"processes {sorted(set(remaining))} survive in {rel}")
            sleep(0.02)
        for h, cgs in trees.items():
            for cg in reversed(cgs):  # children first
                self._rmdir_retry(f"{h.mount}/{cg}", deadline, sleep)
        self._weights.pop(rel, None)
        return killed

    def _rmdir_retry(self, d: str, deadline: float, sleep: Callable[[float], None]) -> None:
        # A killed task can linger as a zombie for a moment; rmdir says EBUSY then.
        while True:
            try:
                self.fs.rmdir(d)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                sleep(0.02)

    def remove_if_empty(self, path: str) -> bool:
        """rmdir ``path`` wherever it has no children and no processes (never kills).

        For the shared ``cosched`` root, which other cosched components may
        also hold groups under. True if it is gone from every hierarchy.
        """
        rel = check_rel(path)
        gone = True
        for h in self.layout.mounts():
            d = f"{h.mount}/{rel}"
            if not self.fs.exists(d):
                continue
            if self.fs.listdir(d) or self.pids(rel, h):
                gone = False
                continue
            try:
                self.fs.rmdir(d)
            except OSError:
                gone = False
        return gone

    def footprint(self, path: str) -> list[str]:
        """``"<mount>:<group>"`` for every group at/below ``path`` (tests, status)."""
        out: list[str] = []
        for h in self.layout.mounts():
            out += [f"{h.mount}:{cg}" for cg in self.subtree(check_rel(path), h)]
        return out


class PreparedThaw:
    """Thaw requests opened ahead of their instant (:meth:`Cgroups.prepare_thaw`)."""

    def __init__(self, cg: Cgroups, paths: list[str]) -> None:
        self._cg = cg
        self.paths = paths
        self._writes: list[OpenedWrite] = []
        self._start: dict[str, float] = {}
        self.failed: dict[str, str] = {}  # path -> why its request could not be written
        try:
            for p in paths:
                self._writes.append(cg.fs.open_write(*cg.request_file(p, False)))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> PreparedThaw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self) -> None:
        """Every thaw request, now: one write() each; failures land in :attr:`failed`."""
        for p, w in zip(self.paths, self._writes, strict=True):
            self._start[p] = time.perf_counter()
            try:
                w.write()
            except OSError as e:
                self.failed[p] = e.strerror or str(e)

    def confirm(self) -> dict[str, float]:
        """Latency of each written request to the kernel reporting the group thawed.

        Raises :class:`ThawError` if one was not confirmed within the timeout.
        """
        todo = [p for p in self._start if p not in self.failed]
        done, pending = self._cg._poll(todo, self._start, self._cg.is_thawed, False)
        if pending:
            raise ThawError(
                f"thaw not confirmed within {self._cg.freeze_timeout}s for {sorted(pending)}"
            )
        return done

    def close(self) -> None:
        for w in self._writes:
            with contextlib.suppress(OSError):
                w.close()
