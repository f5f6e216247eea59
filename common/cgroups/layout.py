"""Where each cgroup controller lives on this host: v1, hybrid or v2-only.

cosched needs four resources: the freezer (stop/start a job), ``cpu`` (weights,
bandwidth, the v1 real-time budget), CPU accounting (``cpuacct`` on v1,
``cpu.stat`` on v2, which is core) and ``cpuset`` (node capacity); one more is
optional, block I/O accounting (``blkio``: v1's blkio hierarchy or cgroup2's ``io``
controller, common/cgroups/iostat.py), used where the host has it. On a v1 host
each is a hierarchy of its own; on a v2-only host all live in the one cgroup2
tree; on a hybrid host (this development machine kind, Ubuntu 20.04, ...) a
controller may be in either, so the choice is made per controller:

* a controller mounted in a v1 hierarchy is used there (it cannot be enabled
  in cgroup2 while bound to v1);
* otherwise it is used in cgroup2 if the cgroup2 root lists it in
  ``cgroup.controllers``; the freezer and accounting are core in cgroup2 and
  always available there.

``prefer="v2"`` ignores the v1 hierarchies (a hybrid host then runs the v2
paths for real, with whatever controllers cgroup2 has); ``prefer="v1"``
refuses a host without v1 hierarchies.

Detection is pure (:func:`parse_layout` takes the text of ``/proc/self/mounts``
and the cgroup2 root's ``cgroup.controllers``); :func:`detect_layout` reads them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from common.cgroups.errors import CgroupSetupError
from common.cgroups.fs import CgroupFS

RESOURCES = ("freezer", "cpu", "cpuacct", "cpuset")
# Served where the host has it, never required: a job's block I/O bytes (issue 31).
OPTIONAL = ("blkio",)
ALL_RESOURCES = RESOURCES + OPTIONAL
# A resource's controller name in cgroup2 where it differs from v1's.
V2_CONTROLLER = {"blkio": "io"}
# cgroup2 has no freezer or cpuacct controller: cgroup.freeze and cpu.stat are core.
V2_CORE = ("freezer", "cpuacct")
Mode = Literal["v1", "hybrid", "v2"]


@dataclass(frozen=True)
class Hierarchy:
    """One mounted hierarchy: ``version`` 1 or 2 and its mount point."""

    version: int
    mount: str

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "mount": self.mount}


@dataclass(frozen=True)
class Layout:
    """Which hierarchy serves each resource; a resource missing from the map is unavailable.

    ``unified`` is the cgroup2 mount (if any), ``v2_controllers`` what its root
    offers, ``bound_v1`` the controllers the host has in v1 hierarchies (for
    error messages when v2 was asked for), and ``base`` the cgroup (relative to
    every hierarchy root) under which cosched makes its groups: empty for the
    root, or a systemd-delegated unit (see common/cgroups/delegation.py).
    """

    controllers: dict[str, Hierarchy]
    unified: str | None = None
    v2_controllers: frozenset[str] = frozenset()
    bound_v1: dict[str, str] = field(default_factory=dict)
    base: str = ""
    systemd: bool = False
    delegated: bool = False

    @property
    def mode(self) -> Mode:
        versions = {h.version for h in self.controllers.values()}
        if versions == {2}:
            return "v2"
        if 2 in versions or (self.unified is not None and 1 in versions):
            return "hybrid"
        return "v1"

    def hierarchy(self, resource: str) -> Hierarchy | None:
        return self.controllers.get(resource)

    def version(self, resource: str) -> int | None:
        h = self.controllers.get(resource)
        return h.version if h else None

    def mounts(self) -> list[Hierarchy]:
        """The distinct hierarchies in use, freezer first (thaw before kill)."""
        out: list[Hierarchy] = []
        for r in ALL_RESOURCES:
            h = self.controllers.get(r)
            if h is not None and h not in out:
                out.append(h)
        return out

    def describe(self) -> str:
        """e.g. ``v2 (/sys/fs/cgroup: freezer cpu cpuacct cpuset; base system.slice/x.scope)``."""
        parts = []
        for r in RESOURCES:
            h = self.controllers.get(r)
            parts.append(f"{r}=v{h.version}" if h else f"{r}=missing")
        text = f"{self.mode} ({', '.join(parts)})"
        if self.base:
            text += f"; under {'delegated ' if self.delegated else ''}cgroup /{self.base}"
        elif self.systemd:
            text += "; systemd host"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "controllers": {r: h.to_dict() for r, h in self.controllers.items()},
            "unified": self.unified,
            "v2_controllers": sorted(self.v2_controllers),
            "bound_v1": dict(self.bound_v1),
            "base": self.base,
            "systemd": self.systemd,
            "delegated": self.delegated,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layout:
        return cls(
            controllers={
                r: Hierarchy(int(h["version"]), h["mount"]) for r, h in d["controllers"].items()
            },
            unified=d.get("unified"),
            v2_controllers=frozenset(d.get("v2_controllers", ())),
            bound_v1=dict(d.get("bound_v1", {})),
            base=d.get("base", ""),
            systemd=bool(d.get("systemd", False)),
            delegated=bool(d.get("delegated", False)),
        )

    def with_base(self, base: str, *, delegated: bool) -> Layout:
        return dataclasses.replace(self, base=base.strip("/"), delegated=delegated)

    # ---- ready-made layouts (tests, explicit --cgroup-root) -------------------------
    @classmethod
    def v1_at(cls, root: str, resources: tuple[str, ...] | None = None) -> Layout:
        """v1 hierarchies at ``<root>/<controller>`` (the usual /sys/fs/cgroup shape): the
        required ones, and the optional ones whose directory is there (as detection does)."""
        root = str(root)
        if resources is None:
            resources = RESOURCES + tuple(
                r for r in OPTIONAL if os.path.isdir(os.path.join(root, r))
            )
        return cls({r: Hierarchy(1, os.path.join(root, r)) for r in resources})

    @classmethod
    def v2_at(cls, mount: str, v2_controllers: frozenset[str] | set[str] = frozenset()) -> Layout:
        """Everything in the cgroup2 tree at ``mount``, with the controllers it offers."""
        mount = str(mount)
        ctrls = {r: Hierarchy(2, mount) for r in V2_CORE}
        for r in ("cpu", "cpuset", "blkio"):
            if V2_CONTROLLER.get(r, r) in v2_controllers:
                ctrls[r] = Hierarchy(2, mount)
        return cls(ctrls, unified=mount, v2_controllers=frozenset(v2_controllers))


def parse_mounts(mounts_text: str) -> tuple[dict[str, str], str | None]:
    """v1 controller -> mount point (first mount wins) and the cgroup2 mount point."""
    v1: dict[str, str] = {}
    unified: str | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mountpoint, fstype, options = fields[1], fields[2], fields[3].split(",")
        if fstype == "cgroup":
            for r in ALL_RESOURCES:
                if r in options and r not in v1:
                    v1[r] = mountpoint
        elif fstype == "cgroup2" and unified is None:
            unified = mountpoint
    return v1, unified


def parse_layout(
    mounts_text: str,
    v2_controllers_text: str = "",
    prefer: str = "auto",
) -> Layout:
    """Choose a hierarchy per resource (see the module docstring). Pure."""
    if prefer not in ("auto", "v1", "v2"):
        raise CgroupSetupError(
            f"unknown cgroup version {prefer!r}", fix="use --cgroup auto, v1 or v2"
        )
    v1, unified = parse_mounts(mounts_text)
    v2c = frozenset(v2_controllers_text.split()) if unified else frozenset()
    ctrls: dict[str, Hierarchy] = {}
    if prefer != "v2":
        ctrls = {r: Hierarchy(1, m) for r, m in v1.items()}
    if prefer == "v1":
        if not v1:
            raise CgroupSetupError(
                "cgroup v1 was asked for but no v1 hierarchy is mounted",
                fix="use --cgroup auto (this host is cgroup v2)",
            )
    elif unified is not None:
        for r in ALL_RESOURCES:
            if r in ctrls:
                continue
            if r in V2_CORE or V2_CONTROLLER.get(r, r) in v2c:
                ctrls[r] = Hierarchy(2, unified)
    if not ctrls:
        raise CgroupSetupError(
            "no cgroup hierarchy is mounted",
            fix="mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)",
        )
    return Layout(ctrls, unified=unified, v2_controllers=v2c, bound_v1=dict(v1))


def systemd_running(root: str = "/") -> bool:
    """sd_booted(): systemd is PID 1 when /run/systemd/system exists."""
    return os.path.isdir(os.path.join(root, "run/systemd/system"))


def detect_layout(
    prefer: str = "auto",
    *,
    mounts_path: str = "/proc/self/mounts",
    fs: CgroupFS | None = None,
) -> Layout:
    """Read this host's mounts and the cgroup2 root's controllers."""
    fs = fs or CgroupFS()
    try:
        with open(mounts_path, encoding="utf-8") as f:
            mounts_text = f.read()
    except OSError as e:
        raise CgroupSetupError(f"cannot read {mounts_path}: {e.strerror}") from e
    _, unified = parse_mounts(mounts_text)
    v2_text = ""
    if unified is not None:
        try:
            v2_text = fs.read(os.path.join(unified, "cgroup.controllers"))
        except OSError:
            v2_text = ""
    layout = parse_layout(mounts_text, v2_text, prefer)
    if systemd_running():
        layout = dataclasses.replace(layout, systemd=True)
    return layout
