"""Make a hybrid host cgroup-v2-only, and give the v1 hierarchies back.

A hybrid host (this development machine kind: v1 ``cpu``, ``cpuacct``,
``cpuset``, ``freezer``, ``blkio``, ``pids`` beside a cgroup2 mount with no
controllers) can be turned into what every current distribution boots: the
kernel hands a controller to cgroup2 as soon as no v1 hierarchy holds it, so
unmounting those hierarchies (none may have child groups, or the hierarchy
lives on unmounted) puts ``cpuset cpu io pids`` into the cgroup2 root's
``cgroup.controllers``. A group removed a moment ago counts as a child until
the kernel has freed it (``/proc/cgroups`` still counts it): the kernel
destroys an unmounted hierarchy only if it had no children at the unmount,
and never looks again, so after a run that used the v1 hierarchies the
unmount waits for those counts to reach 1 (measured here: 5 removed groups
freed within 5 s; unmounted before that, the hierarchy was still alive, its
controllers bound to it, 5 minutes later). Back: every cgroup2 ``cgroup.subtree_control`` gives
the controllers up (children first: a parent cannot drop what a child still
enables), then the hierarchies are mounted again with their old options.
The recipe and its round trips are in the platform notes ("Making this machine
cgroup-v2-only, and back").

Shared by ``cosched host cgroups`` (testbed/commands/host.py), the systemd
nodes' integration test and any CI stage that runs the live tier on a v2-only
host (issue 29). The API:

* :func:`plan_switch` (pure): which v1 mounts to take down, or why not;
* :func:`switch_to_v2` writes a record (:data:`RECORD_PATH`) *before* it
  unmounts anything, checks that cgroup2 now offers the controllers, and puts
  everything back if it does not;
* :func:`restore_v1` gives back what a record says was taken, checks it, and
  removes the record; a host with no record is left alone;
* :func:`v2_only` is both around a block, restoring however the block ends;
* :func:`host_state` says which of these the host is in now.

Nothing here knows about cosched's groups and nothing is killed: groups that
still exist in cgroup2 lose the controllers being given back (children
first), and a hierarchy the kernel will not mount again is named in one line
with what still holds its controller.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from common.cgroups.errors import CgroupSetupError, HierarchyHeld

# v1 controllers that cgroup2 takes over once unmounted (blkio is cgroup2's io;
# cpuacct and freezer have no cgroup2 controller: cpu.stat and cgroup.freeze are core).
TAKEABLE = ("cpu", "cpuacct", "cpuset", "freezer", "blkio", "pids")
V2_NAME = {"cpu": "cpu", "cpuset": "cpuset", "blkio": "io", "pids": "pids"}
RECORD_PATH = "/run/cosched/host-cgroup-v2only.json"
# A hierarchy's controllers reach cgroup2 once its last group's state is freed: within
# 0.1-0.3 s in most switches here, but once (load average 9, right after another test
# had used the v1 hierarchies) cpu and cpuset had not arrived after 2 s; it polls.
SETTLE_S = 30.0
# A hierarchy in use for a moment (a process reading its files) is retried this long
BUSY_S = 5.0


@dataclass(frozen=True)
class V1Mount:
    """One mounted v1 hierarchy: where, with which options and controllers."""

    mountpoint: str
    options: str  # as /proc/self/mounts shows them: "rw,nosuid,relatime,cpu"
    controllers: tuple[str, ...]

    def v2_controllers(self) -> list[str]:
        return [V2_NAME[c] for c in self.controllers if c in V2_NAME]


@dataclass
class SwitchRecord:
    """What :func:`switch_to_v2` took down, so that :func:`restore_v1` can give it back."""

    unified: str
    unmounted: list[V1Mount] = field(default_factory=list)
    at: float = field(default_factory=time.time)
    pid: int = field(default_factory=os.getpid)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SwitchRecord:
        mounts = [V1Mount(m["mountpoint"], m["options"], tuple(m["controllers"]))
                  for m in d.get("unmounted", [])]  # fmt: skip
        return cls(str(d["unified"]), mounts, float(d.get("at", 0.0)), int(d.get("pid", 0)))

    def v2_controllers(self) -> list[str]:
        return sorted({c for m in self.unmounted for c in m.v2_controllers()})


# ----------------------------------------------------------------- pure parts


def parse_cgroup_mounts(mounts_text: str) -> tuple[list[V1Mount], str | None]:
    """Every v1 cgroup mount (with its controllers) and the first cgroup2 mount point."""
    v1: list[V1Mount] = []
    unified: str | None = None
    for line in mounts_text.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        if f[2] == "cgroup":
            ctrls = tuple(o for o in f[3].split(",") if o in TAKEABLE)
            v1.append(V1Mount(f[1], f[3], ctrls))
        elif f[2] == "cgroup2" and unified is None:
            unified = f[1]
    return v1, unified


def plan_switch(
    mounts_text: str, children: Callable[[str], list[str]]
) -> tuple[str, list[V1Mount]]:
    """The cgroup2 mount and the v1 mounts to take down; CgroupSetupError when it cannot be.

    ``children(mountpoint)`` lists a hierarchy's child groups: a hierarchy with
    groups of its own stays alive after ``umount`` and keeps its controllers.
    An empty list means the host is v2-only already (for these controllers).
    """
    v1, unified = parse_cgroup_mounts(mounts_text)
    if unified is None:
        raise CgroupSetupError(
            "cannot make this host cgroup-v2-only: no cgroup2 hierarchy is mounted",
            fix="mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with "
            "systemd.unified_cgroup_hierarchy=1",
        )
    take = [m for m in v1 if m.controllers]
    for m in take:
        groups = sorted(children(m.mountpoint))
        if groups:
            shown = ", ".join(groups[:4]) + (", ..." if len(groups) > 4 else "")
            raise CgroupSetupError(
                f"cannot make this host cgroup-v2-only: the v1 hierarchy at {m.mountpoint} "
                f"({','.join(m.controllers)}) has groups ({shown}), so it would outlive its "
                "unmount and keep its controllers",
                fix="stop what made them (`cosched clean` for a cluster) and retry",
            )
    return unified, take


def groups_per_controller(proc_cgroups_text: str) -> dict[str, int]:
    """``num_cgroups`` of every controller's hierarchy in /proc/cgroups (root included,
    and groups removed but not yet freed)."""
    out: dict[str, int] = {}
    for line in proc_cgroups_text.splitlines():
        f = line.split()
        if len(f) >= 3 and not f[0].startswith("#") and f[2].isdigit():
            out[f[0]] = int(f[2])
    return out


def not_yet_freed(m: V1Mount, counts: dict[str, int]) -> int:
    """Groups of ``m``'s hierarchy besides its root that the kernel still holds."""
    return max((counts.get(c, 1) - 1 for c in m.controllers), default=0)


def missing_after_switch(rec: SwitchRecord, offered: list[str]) -> list[str]:
    """cgroup2 controllers the unmounts should have handed over but cgroup2 does not offer."""
    return [c for c in rec.v2_controllers() if c not in offered]


def not_restored(rec: SwitchRecord, mounts_text: str) -> list[str]:
    """Mount points of the record that are not v1 cgroup mounts with their controllers now."""
    v1, _ = parse_cgroup_mounts(mounts_text)
    now = {m.mountpoint: set(m.controllers) for m in v1}
    return [m.mountpoint for m in rec.unmounted if now.get(m.mountpoint) != set(m.controllers)]


# ------------------------------------------------------------------------ I/O


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _mounts() -> str:
    return _read("/proc/self/mounts")


def _children(mountpoint: str) -> list[str]:
    try:
        return [e.name for e in os.scandir(mountpoint) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _offered(unified: str) -> list[str]:
    try:
        return _read(os.path.join(unified, "cgroup.controllers")).split()
    except OSError:
        return []


def _run(argv: list[str]) -> str | None:
    """None on success, else the command's one-line complaint."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    if r.returncode == 0:
        return None
    return (r.stderr or r.stdout).strip().replace("\n", " ") or f"exit status {r.returncode}"


def _umount(m: V1Mount, busy_s: float = BUSY_S) -> str | None:
    """Unmount ``m``; a mount that is busy (a process's open file or working directory in
    it, a mount on top of it) is retried for ``busy_s``, then its users are named."""
    deadline = time.monotonic() + busy_s
    while (err := _run(["umount", m.mountpoint])) is not None and "busy" in err:
        if time.monotonic() > deadline:
            said, seen = _users(m.mountpoint)
            if not seen:
                raise HierarchyHeld(
                    f"cannot make this host cgroup-v2-only: {m.mountpoint} stays busy and "
                    f"nothing here holds it {said}",
                    fix="a process this host cannot look into holds the v1 hierarchies; "
                    "use a cgroup-v2-only host (systemd.unified_cgroup_hierarchy=1)",
                )
            return f"{err} {said}"
        time.sleep(0.1)
    return err


def _users(mountpoint: str) -> tuple[str, bool]:
    """What keeps ``mountpoint`` busy, as fuser -m would list it: mounts below it and
    processes whose working directory, root or open files lie in it; also the processes
    whose descriptors may not be read (root included: a sandbox's PID 1). The second
    value: whether any mount or process was seen holding it."""
    inside = mountpoint.rstrip("/") + "/"
    subs = []
    with contextlib.suppress(OSError):
        for line in _read("/proc/self/mountinfo").splitlines():
            target = line.split()[4]
            if target.startswith(inside):
                subs.append(target)
    pids, hidden = [], []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        links = [f"/proc/{entry}/cwd", f"/proc/{entry}/root"]
        try:
            links += [f"/proc/{entry}/fd/{fd}" for fd in os.listdir(f"/proc/{entry}/fd")]
        except PermissionError:
            hidden.append(entry)
        except OSError:
            continue
        for link in links:
            try:
                target = os.readlink(link)
            except PermissionError:
                if entry not in hidden:
                    hidden.append(entry)
                continue
            except OSError:
                continue
            if target == mountpoint or target.startswith(inside):
                pids.append(f"{entry} {_comm(entry)} ({target})")
                break
    said = (
        f"[mounts below it: {', '.join(subs[:5]) or 'none'}; "
        f"processes in it: {', '.join(pids[:5]) or 'none'}"
        + (f"; descriptors not readable: {', '.join(f'{p} {_comm(p)}' for p in hidden[:5])}"
           if hidden else "")
        + "]"
    )  # fmt: skip
    return said, bool(subs or pids)


def _comm(pid: str) -> str:
    try:
        return _read(f"/proc/{pid}/comm").strip()
    except OSError:
        return "?"


def _mount(m: V1Mount) -> str | None:
    return _run(["mount", "-t", "cgroup", "-o", m.options, "cgroup", m.mountpoint])


def load_record(path: str = RECORD_PATH) -> SwitchRecord | None:
    try:
        with open(path, encoding="utf-8") as f:
            return SwitchRecord.from_dict(json.load(f))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as err:
        raise CgroupSetupError(
            f"the v2-only record {path} is unreadable ({err})",
            fix="mount the v1 hierarchies back by hand (platform notes) and remove it",
        ) from None


def _save_record(rec: SwitchRecord, path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(rec.to_dict(), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _remove_record(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def switch_to_v2(record_path: str = RECORD_PATH) -> SwitchRecord:
    """Unmount the v1 hierarchies cgroup2 can take over; return what was done.

    Already v2-only: nothing is done and no record is written. On any failure
    the hierarchies unmounted so far are mounted back and CgroupSetupError says why.
    """
    if os.geteuid() != 0:
        raise CgroupSetupError("switching the host's cgroups needs root", fix="run it as root")
    old = load_record(record_path)
    if old is not None and old.unmounted:
        raise CgroupSetupError(
            f"the host was made cgroup-v2-only already (record {record_path}, pid {old.pid})",
            fix="`cosched host cgroups restore` first, or use the host as it is",
        )
    unified, take = plan_switch(_mounts(), _children)
    rec = SwitchRecord(unified, take)
    if not take:
        return rec
    _save_record(rec, record_path)  # before the first unmount: a crash still leaves it
    done: list[V1Mount] = []
    for m in take:
        if (waiting := _wait_freed(m)) is not None:
            _give_back(done, unified)
            _remove_record(record_path)
            raise CgroupSetupError(
                f"cannot make this host cgroup-v2-only: the v1 hierarchy at {m.mountpoint} "
                f"still holds {waiting} removed group(s) after {SETTLE_S:g} s (a process, "
                "perhaps a zombie, still belongs to one); unmounted now it would live on",
                fix="wait for (or reap) what ran in it, then retry",
            )
        try:
            err = _umount(m)
        except HierarchyHeld:
            _give_back(done, unified)
            _remove_record(record_path)
            raise
        if err is not None:
            _give_back(done, unified)
            _remove_record(record_path)
            raise CgroupSetupError(
                f"cannot make this host cgroup-v2-only: umount {m.mountpoint} failed ({err}); "
                "the hierarchies unmounted before it were mounted back",
                fix="this host cannot be switched: use a cgroup-v2-only host "
                "(systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all)",
            )
        done.append(m)
    deadline = time.monotonic() + SETTLE_S
    while missing := missing_after_switch(rec, _offered(unified)):
        if time.monotonic() > deadline:
            _remove_record(record_path)
            held = _holders(rec, missing)
            problems = _give_back(take, unified)
            raise CgroupSetupError(
                f"the v1 hierarchies were unmounted but cgroup2 at {unified} does not offer "
                f"{' '.join(missing)} after {SETTLE_S:g} s ({held}); they were mounted back"
                + (f" ({'; '.join(problems)})" if problems else ""),
                fix="use a cgroup-v2-only host (systemd.unified_cgroup_hierarchy=1)",
            )
        time.sleep(0.05)
    return rec


def _holders(rec: SwitchRecord, missing: list[str]) -> str:
    """Why a v1 hierarchy outlived its unmount: its groups per /proc/cgroups (a removed
    group lives on while a process, even a zombie, still belongs to it) and the
    processes outside its root."""
    v1 = [c for m in rec.unmounted for c in m.controllers if V2_NAME.get(c) in missing]
    out = []
    with contextlib.suppress(OSError):
        for line in _read("/proc/cgroups").splitlines()[1:]:
            name, hier, num = [*line.split(), "", "", ""][:3]
            if name in v1:
                out.append(f"{name}: hierarchy {hier}, {num} group(s)")
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in _read(f"/proc/{entry}/cgroup").splitlines():
                _, ctrls, path = line.split(":", 2)
                if path != "/" and set(ctrls.split(",")) & set(v1):
                    pids.append(f"{entry} in {ctrls}:{path}")
                    break
    return "; ".join(out + ([f"processes {', '.join(pids[:5])}"] if pids else ["no process"]))


def _wait_freed(m: V1Mount) -> int | None:
    """Wait until the kernel has freed every removed group of ``m``'s hierarchy; None
    then, else how many it still holds after SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            left = not_yet_freed(m, groups_per_controller(_read("/proc/cgroups")))
        except OSError:
            return None
        if left == 0:
            return None
        if time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _disable_everywhere(unified: str, controllers: list[str]) -> list[str]:
    """Take ``controllers`` out of every cgroup.subtree_control, deepest groups first."""
    problems: list[str] = []
    for d, _subdirs, _files in sorted(os.walk(unified), key=lambda w: -w[0].count("/")):
        path = os.path.join(d, "cgroup.subtree_control")
        try:
            enabled = _read(path).split()
        except OSError:
            continue
        drop = [c for c in controllers if c in enabled]
        if not drop:
            continue
        try:
            with open(path, "w", encoding="ascii") as f:
                f.write(" ".join(f"-{c}" for c in drop))
        except OSError as e:
            problems.append(f"{path}: -{' -'.join(drop)}: {e.strerror or e}")
    return problems


def _give_back(mounts: list[V1Mount], unified: str, tries: int = 300) -> list[str]:
    """Mount ``mounts`` again (the controllers first leave cgroup2); what failed.

    A controller stays with cgroup2 while a removed group's state is still being
    freed (``nr_dying_subsys_*`` in the root's ``cgroup.stat``), and ``mount`` then
    fails with a misleading "already mounted": it is retried for up to 30 s.
    """
    problems = _disable_everywhere(unified, sorted({c for m in mounts for c in m.v2_controllers()}))
    current, _ = parse_cgroup_mounts(_mounts())
    mounted = {m.mountpoint for m in current}
    for m in mounts:
        if m.mountpoint in mounted:
            continue
        err: str | None = None
        for _ in range(tries):
            # EBUSY while a freed group's css still holds the controller: it goes soon
            err = _mount(m)
            if err is None:
                break
            time.sleep(0.1)
        if err is not None:
            problems.append(f"mount {m.mountpoint}: {err} ({_dying(unified)})")
    return problems


def _dying(unified: str) -> str:
    """What still holds controllers in cgroup2 (for the error message)."""
    try:
        stat = dict(line.split() for line in _read(f"{unified}/cgroup.stat").splitlines())
    except (OSError, ValueError):
        return "cgroup.stat unreadable"
    held = {k: v for k, v in stat.items() if k.startswith("nr_dying") and v != "0"}
    enabled = _read(f"{unified}/cgroup.subtree_control").split()
    return f"cgroup2 root enables {' '.join(enabled) or 'nothing'}; dying: {held or 'none'}"


def restore_v1(record_path: str = RECORD_PATH) -> SwitchRecord | None:
    """Mount back what the record says was taken, check it, remove the record.

    None when there is no record (nothing to give back). CgroupSetupError (the
    record kept) when a hierarchy could not be mounted again.
    """
    rec = load_record(record_path)
    if rec is None:
        return None
    problems = _give_back(rec.unmounted, rec.unified)
    missing = not_restored(rec, _mounts())
    if missing:
        raise CgroupSetupError(
            f"could not mount the v1 hierarchies back at {', '.join(missing)}"
            + (f" ({'; '.join(problems)})" if problems else ""),
            fix="remove the cgroup2 groups that still use cpu, cpuset, io or pids "
            "(`cosched clean`), then `cosched host cgroups restore` again",
        )
    _remove_record(record_path)
    return rec


@contextlib.contextmanager
def v2_only(record_path: str = RECORD_PATH) -> Iterator[SwitchRecord]:
    """The host cgroup-v2-only for the block; the v1 hierarchies back however it ends."""
    rec = switch_to_v2(record_path)
    try:
        yield rec
    finally:
        if rec.unmounted:
            restore_v1(record_path)


@dataclass(frozen=True)
class HostState:
    """What the host's cgroups are now, in one line for ``cosched host cgroups``."""

    unified: str | None
    v1_takeable: list[str]  # mount points of v1 hierarchies holding takeable controllers
    offered: list[str]  # what the cgroup2 root offers
    record: SwitchRecord | None

    @property
    def v2_only(self) -> bool:
        return self.unified is not None and not self.v1_takeable

    def describe(self) -> str:
        if self.unified is None:
            return "cgroup v1 only (no cgroup2 mounted)"
        offered = " ".join(self.offered) or "none"
        if not self.v2_only:
            return (
                f"hybrid: v1 hierarchies at {', '.join(self.v1_takeable)}; cgroup2 at "
                f"{self.unified} offers {offered}"
            )
        how = ""
        if self.record and self.record.unmounted:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.record.at))
            how = (
                f"; made so by cosched at {when} (`cosched host cgroups restore` gives "
                "the v1 hierarchies back)"
            )
        return f"cgroup-v2-only: cgroup2 at {self.unified} offers {offered}{how}"


def host_state(record_path: str = RECORD_PATH) -> HostState:
    v1, unified = parse_cgroup_mounts(_mounts())
    return HostState(
        unified,
        [m.mountpoint for m in v1 if m.controllers],
        _offered(unified) if unified else [],
        load_record(record_path),
    )
