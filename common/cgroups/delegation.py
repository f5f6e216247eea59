"""Where on a host cosched may make cgroups: the root, or a systemd-delegated unit.

Without systemd, cosched works under the hierarchy root (``<mount>/cosched``).
On a cgroup-v2 host run by systemd, the tree belongs to systemd: a program
may manage only a subtree systemd *delegated* to it (a service or scope with
``Delegate=yes``; systemd marks it with the ``trusted.delegate`` extended
attribute, ``user.delegate`` for user managers). cosched then works below its
own delegated cgroup, and first moves the processes of that cgroup into a
``supervisor`` leaf, because cgroup v2 enables controllers for children only
in a group without processes of its own.

Hybrid hosts run by systemd keep the v1 hierarchies at the root as before.

systemd (before 254's ``DelegateSubgroup=``) starts a delegated unit's main
process in the unit's own cgroup. Once cosched has enabled controllers there,
cgroup v2 refuses that (EBUSY: no processes in a group that passes controllers
on), so a restart while jobs are still below it (``KillMode=process`` keeps
them) failed with status 219/CGROUP. :func:`release_base`, run as the unit's
``ExecStopPost`` (which systemd places in the unit's ``.control`` leaf, unlike
``ExecStartPre``), gives the controllers back once the agent has exited; the
next agent enables them again and reattaches its jobs.
"""

from __future__ import annotations

import os

from common.cgroups.driver import Cgroups
from common.cgroups.errors import CgroupSetupError
from common.cgroups.fs import CgroupFS
from common.cgroups.layout import Layout

SUPERVISOR_LEAF = "supervisor"
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")


def own_cgroup(text: str) -> str | None:
    """The cgroup2 path of a process from its /proc/PID/cgroup text (``0::/a/b`` -> ``a/b``)."""
    for line in text.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            return path.strip().strip("/")
    return None


def is_delegated(fs: CgroupFS, mount: str, rel: str) -> bool:
    d = f"{mount}/{rel}" if rel else mount
    return any((fs.getxattr(d, x) or b"").strip() == b"1" for x in DELEGATE_XATTRS)


def resolve_base(
    layout: Layout,
    fs: CgroupFS | None = None,
    *,
    override: str | None = None,
    proc_cgroup_text: str | None = None,
) -> Layout:
    """Fill in ``layout.base``: where cosched's groups go on this host.

    ``override`` (``--cgroup-base`` / COSCHED_CGROUP_BASE) is taken as given.
    On a v2-only systemd host, the nearest delegated ancestor of our own
    cgroup (itself included); none is a CgroupSetupError that says how to get one.
    """
    fs = fs or CgroupFS()
    if override is not None:
        return layout.with_base(override, delegated=bool(override.strip("/")))
    if layout.mode != "v2" or not layout.systemd or layout.unified is None:
        return layout
    if proc_cgroup_text is None:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            proc_cgroup_text = f.read()
    own = own_cgroup(proc_cgroup_text)
    if own is None:
        raise CgroupSetupError(
            "cannot tell this process's cgroup (no 0:: line in /proc/self/cgroup)"
        )
    # systemd marks only the unit's own cgroup, so from <base>/supervisor (where
    # an earlier run moved us) the walk up still ends at the base.
    path = own
    while path:
        if is_delegated(fs, layout.unified, path):
            return layout.with_base(path, delegated=True)
        path = path.rsplit("/", 1)[0] if "/" in path else ""
    raise CgroupSetupError(
        f"this is a cgroup v2 host run by systemd and /{own} is not delegated to cosched",
        fix="run it in a unit or scope with Delegate=yes, e.g. "
        "`systemd-run --scope -p Delegate=yes cosched cluster up ...` "
        "(the agent's unit sets Delegate=yes)",
    )


def prepare_base(cg: Cgroups) -> None:
    """Move the processes of a delegated base into its ``supervisor`` leaf.

    They are ours (the unit was delegated to us); while they sit in the base,
    cgroup v2 will not enable cpu or cpuset for the groups we make below it.
    """
    base = cg.layout.base
    if not base or cg.layout.mode != "v2":
        return
    for pid in cg.pids(base):
        try:
            cg.enter_leaf(base, SUPERVISOR_LEAF, pid)
        except ProcessLookupError:
            continue
        except OSError as e:
            raise CgroupSetupError(
                f"cannot move pid {pid} out of the delegated cgroup /{base}: {e.strerror or e}",
                fix="start cosched as the only process of its unit or scope",
            ) from e


def release_base(cg: Cgroups) -> list[str]:
    """Disable every controller in the delegated base and everything below it.

    Children first (cgroup v2 refuses to take from a parent what a child still
    passes on); no process moves and nothing is removed, so jobs keep running
    (their ``cpu.weight`` goes until the next agent enables ``cpu`` again and is
    told their weights). Returns the groups changed. A no-op off cgroup v2 or
    without a delegated base.
    """
    base = cg.layout.base
    h = cg.layout.controllers.get("freezer")  # cgroup2: every resource is in one tree
    if not base or cg.layout.mode != "v2" or h is None:
        return []
    changed: list[str] = []
    for rel in reversed(cg.subtree(base, h)):
        path = f"{h.mount}/{rel}/cgroup.subtree_control"
        try:
            enabled = cg.fs.read(path).split()
        except OSError:
            continue
        if enabled:
            try:
                cg.fs.write(path, " ".join(f"-{c}" for c in enabled))
            except OSError as e:
                raise CgroupSetupError(
                    f"cannot disable {' '.join(enabled)} in {path}: {e.strerror or e}",
                    fix="stop what still uses the unit's cgroup (`cosched clean` on the node)",
                ) from e
            changed.append(rel)
    return changed


def base_join(base: str, *parts: str) -> str:
    return "/".join(p.strip("/") for p in (base, *parts) if p.strip("/"))


def env_base() -> str | None:
    return os.environ.get("COSCHED_CGROUP_BASE")
