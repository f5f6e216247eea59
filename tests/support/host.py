"""This host's kernel state as the tests see it: the testbed's objects, every trace a
test may leave, and where the cgroup hierarchies are mounted (found in
/proc/self/mounts, never assumed: a v2-only host has cgroup2 at /sys/fs/cgroup, this
hybrid machine kind at /sys/fs/cgroup/unified, and CI makes it v2-only for a stage)."""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

# A whole hierarchy is walked this deep for the footprint (cosched's node groups sit at
# depth 2, a delegated unit's at 4; the agent tests' cosched/itest-*/job-* at 3).
DEPTH = 4
INTERPRETER_HELPERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def cgroup_mounts() -> tuple[dict[str, str], str | None]:
    """v1 controller -> mount point, and the cgroup2 mount point (None when absent)."""
    from common.cgroups.layout import ALL_RESOURCES, parse_mounts

    with open("/proc/self/mounts", encoding="utf-8") as f:
        v1, unified = parse_mounts(f.read())
    return {r: m for r, m in v1.items() if r in ALL_RESOURCES}, unified


def unified_mount() -> str | None:
    return cgroup_mounts()[1]


def cgroup2_offers() -> list[str]:
    u = unified_mount()
    if u is None:
        return []
    try:
        with open(os.path.join(u, "cgroup.controllers"), encoding="ascii") as f:
            return f.read().split()
    except OSError:
        return []


def cluster_skip_reason() -> str | None:
    """Why a local cluster cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, cgroups)"
    if not os.path.exists("/proc/self/ns/net"):
        return "kernel without network namespace support"
    from common.cgroups import CgroupSetupError, detect_layout

    try:
        layout = detect_layout()
    except CgroupSetupError as e:
        return f"no usable cgroups: {e}"
    missing = [r for r in ("freezer", "cpu", "cpuacct") if r not in layout.controllers]
    if missing:
        return f"no cgroup hierarchy serves {', '.join(missing)} ({layout.describe()})"
    return None


def cosched_footprint() -> dict[str, Any]:
    """Every trace of a testbed cluster on this host: namespaces, root links, node cgroups."""
    from pyroute2 import IPRoute, netns

    from testbed.cluster.names import is_our_link, is_our_netns

    with IPRoute() as ipr:
        links = [str(x.get_attr("IFLA_IFNAME")) for x in ipr.get_links()]
    v1, unified = cgroup_mounts()
    groups = []
    for mount in sorted({*v1.values(), *([unified] if unified else [])}):
        d = os.path.join(mount, "cosched")
        if os.path.isdir(d):
            # Node cgroups only: the agent's own tests may share the cosched/ root.
            groups += [os.path.join(d, e.name) for e in os.scandir(d)
                       if e.is_dir() and (e.name[:1] == "n" and e.name[1:].isdigit())]  # fmt: skip
    return {
        "netns": sorted(n for n in netns.listnetns() if is_our_netns(n)),
        "links": sorted(x for x in links if is_our_link(x)),
        "cgroups": sorted(groups),
    }


EMPTY_FOOTPRINT: dict[str, Any] = {"netns": [], "links": [], "cgroups": []}


def _groups(mount: str) -> list[str]:
    out = []
    base = mount.rstrip("/").count("/")
    for d, subdirs, _ in os.walk(mount):
        if d.count("/") - base >= DEPTH:
            subdirs.clear()
        if d != mount:
            out.append(d)
    return out


def footprint() -> dict[str, set[str]]:
    """Everything a test could leave: every namespace, root-namespace link, cgroup (to
    DEPTH in every mounted hierarchy), mount, and this process's live descendants."""
    from pyroute2 import IPRoute, netns

    with IPRoute() as ipr:
        links = {str(x.get_attr("IFLA_IFNAME")) for x in ipr.get_links()}
    with open("/proc/self/mounts", encoding="utf-8") as f:
        # iproute2 and pyroute2 bind-mount /run/netns on itself when the host's first
        # named namespace is made, and leave it: a fresh host's first netns is not a trace
        mounts = {
            " ".join(ln.split()[:3])
            for ln in f.read().splitlines()
            if ln.split()[1:2] not in (["/run/netns"], ["/var/run/netns"])
        }
    v1, unified = cgroup_mounts()
    groups: set[str] = set()
    for m in {*v1.values(), *([unified] if unified else [])}:
        groups.update(_groups(m))
    procs = set()
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            # multiprocessing's fork server and resource tracker live as long as this
            # interpreter (started by the first pool that needs them): not a test's trace
            if p.status() != psutil.STATUS_ZOMBIE and not any(
                h in cmd for h in INTERPRETER_HELPERS
            ):
                procs.add(f"{p.pid} {cmd[:120]}")
        except psutil.Error:
            continue
    return {
        "netns": set(netns.listnetns()),
        "links": links,
        "cgroups": groups,
        "mounts": mounts,
        "processes": procs,
    }


def added(before: dict[str, set[str]], after: dict[str, set[str]]) -> dict[str, list[str]]:
    """What is in ``after`` and was not in ``before`` (removals are not a test's trace)."""
    return {
        k: sorted(after[k] - before.get(k, set())) for k in after if after[k] - before.get(k, set())
    }


def wait_for_footprint(
    before: dict[str, set[str]], grace_s: float = 5.0, keys: tuple[str, ...] | None = None
) -> dict[str, list[str]]:
    """What is left after ``grace_s`` (a killed daemon takes a moment to go, a removed
    group a moment to vanish); empty when the host is as it was."""
    deadline = time.monotonic() + grace_s
    while True:
        left = {k: v for k, v in added(before, footprint()).items() if keys is None or k in keys}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def cgroups() -> Any:
    """The driver on this host's cgroups as `cluster up --cgroup auto` would pick them."""
    from common.cgroups import open_cgroups

    return open_cgroups("auto")


def group_dir(resource: str, rel: str) -> str:
    """Where the group ``rel`` is in the hierarchy that serves ``resource`` here."""
    h = cgroups().layout.controllers[resource]
    return f"{h.mount}/{rel}"


def freezer_states(pattern: str) -> dict[str, str]:
    """``FROZEN``/``THAWED`` of the groups matching ``pattern`` (a glob relative to the
    freezer's hierarchy, e.g. ``cosched/n*/job-*``), read from v1's freezer.state or
    cgroup2's cgroup.events, whichever serves the freezer here."""
    import glob

    h = cgroups().layout.controllers["freezer"]
    out = {}
    for d in glob.glob(f"{h.mount}/{pattern}"):
        rel = os.path.relpath(d, h.mount)
        try:
            if h.version == 1:
                with open(f"{d}/freezer.state", encoding="ascii") as f:
                    out[rel] = f.read().strip()
            else:
                with open(f"{d}/cgroup.events", encoding="ascii") as f:
                    ev = dict(line.split() for line in f.read().splitlines() if line)
                with open(f"{d}/cgroup.freeze", encoding="ascii") as f:
                    asked = f.read().strip() == "1"
                # v1's FREEZING: asked to freeze, not all stopped yet (not running free)
                frozen = ev.get("frozen") == "1"
                out[rel] = "FROZEN" if frozen else "FREEZING" if asked else "THAWED"
        except (OSError, ValueError):
            continue
    return out
