"""``cosched clean``: remove every trace of the testbed, even after a crash.

Two passes:

1. If a state file exists, the normal :func:`cluster.teardown` of what it
   records (this is the only place agent PIDs are signalled, and only when
   their start time still matches).
2. A scan that does not need the state file: ``cosched-`` network namespaces,
   root-namespace links named ``csd-``/``csc-``/``csp-``, and the node
   cgroups ``cosched/n<i>`` (with everything below) in every mounted
   hierarchy; the ``cosched`` root itself is removed when nothing else is
   left in it. Other children of ``cosched/`` (an agent started by hand, the
   agent's own integration tests) are not the cluster's and are left alone.
   Processes found *inside* node cgroups are killed (membership is the proof
   of ownership); nothing is ever matched by process name. Processes still
   inside a ``cosched-`` namespace but in no node cgroup are reported, not killed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import state as state_mod
from .cgroups import remove_if_empty, remove_tree, thaw_subtree
from .cluster import Env, teardown
from .names import CGROUP_ROOT, is_node_cgroup, is_our_link, is_our_netns
from .netns import netns_inode

# Hierarchies to scan; "unified" is the cgroup2 mount on hybrid hosts. The
# freezing ones come first: a frozen task ignores SIGKILL until thawed, so
# emptying cpu/ before freezer/ would wait on tasks that cannot die.
HIERARCHIES = ("freezer", "unified", "cpu", "cpuacct", "cpuset")


@dataclass
class CleanReport:
    from_state: bool = False
    removed: list[str] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    lingering: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def format(self) -> str:
        lines = []
        if self.from_state:
            lines.append("tore down the recorded cluster")
        lines += [f"removed {r}" for r in self.removed]
        if self.killed:
            lines.append(f"killed PIDs left in cosched cgroups: {self.killed}")
        lines += [f"warning: {x}" for x in self.lingering]
        lines += [f"problem: {p}" for p in self.problems]
        return "\n".join(lines) if lines else "nothing to clean"


def processes_in_netns(names: list[str], proc: str = "/proc") -> list[str]:
    """``"pid (comm) in <netns>"`` for processes whose net namespace is one of ``names``."""
    inodes = {ino: n for n in names if (ino := netns_inode(n)) is not None}
    found: list[str] = []
    if not inodes:
        return found
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            ino = os.stat(f"{proc}/{entry}/ns/net").st_ino
            if ino in inodes:
                with open(f"{proc}/{entry}/comm") as f:
                    comm = f.read().strip()
                found.append(f"pid {entry} ({comm}) in {inodes[ino]}")
        except OSError:
            continue
    return found


def _node_children(env: Env, hierarchy: str) -> list[str]:
    if not env.cg.exists(hierarchy, CGROUP_ROOT):
        return []
    return [c for c in env.cg.children(hierarchy, CGROUP_ROOT) if is_node_cgroup(c)]


def clean(env: Env | None = None) -> CleanReport:
    env = env or Env()
    rep = CleanReport()
    st = state_mod.load(env.sdir())
    if st is not None:
        rep.from_state = True
        rep.problems += teardown(st, env)

    for h in ("freezer", "unified"):
        for child in _node_children(env, h):
            thaw_subtree(env.cg, h, f"{CGROUP_ROOT}/{child}")
    for h in HIERARCHIES:
        if not env.cg.exists(h, CGROUP_ROOT):
            continue
        for child in env.cg.children(h, CGROUP_ROOT):
            if not is_node_cgroup(child):
                continue
            path = f"{CGROUP_ROOT}/{child}"
            try:
                rep.killed += remove_tree(env.cg, h, path, env.kill)
                rep.removed.append(f"cgroup {h}:/{path}")
            except OSError as err:
                rep.problems.append(f"cgroup {h}:/{path}: {err}")
        if remove_if_empty(env.cg, h, CGROUP_ROOT):
            rep.removed.append(f"cgroup {h}:/{CGROUP_ROOT}")
        else:
            others = env.cg.children(h, CGROUP_ROOT)
            rep.lingering.append(f"cgroup {h}:/{CGROUP_ROOT} kept: holds non-node cgroups {others}")

    try:
        for link in env.net.list_links(None):
            if is_our_link(link) and env.net.delete_link(None, link):
                rep.removed.append(f"link {link}")
    except Exception as err:  # keep going: namespaces are next
        rep.problems.append(f"listing root links: {err}")

    ours = [n for n in env.net.list_netns() if is_our_netns(n)]
    rep.lingering += processes_in_netns(ours)
    for ns in ours:
        try:
            if env.net.remove_netns(ns):
                rep.removed.append(f"netns {ns}")
        except OSError as err:
            rep.problems.append(f"netns {ns}: {err}")

    for path in (state_mod.key_path(env.sdir()), state_mod.state_path(env.sdir())):
        try:
            os.unlink(path)
            rep.removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            rep.problems.append(f"{path}: {err}")
    return rep
