"""``cosched clean``: remove every trace of the testbed, even after a crash.

Two passes:

1. If a state file exists, the normal :func:`cluster.teardown` of what it
   records (this is the only place agent PIDs are signalled, and only when
   their start time still matches).
2. A scan that does not need the state file: ``cosched-`` network namespaces,
   root-namespace links named ``csd-``/``csc-``/``csp-``, and the node
   cgroups ``cosched/n<i>`` and ``cosched/head`` (with everything below: the
   supervisor and payload groups of a systemd node's ``systemd-nspawn``) in every mounted
   hierarchy, v1 and cgroup2 alike, at the root or below a (systemd-delegated)
   unit up to a few levels down; the ``cosched`` root itself is removed when
   nothing else is left in it. Other children of ``cosched/`` (an agent started by hand, the
   agent's own integration tests) are not the cluster's and are left alone.
   Processes found *inside* node cgroups are killed (membership is the proof
   of ownership); nothing is ever matched by process name. Processes still
   inside a ``cosched-`` namespace but in no node cgroup are reported, not killed.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

from common.cgroups import CgroupError, Cgroups, CgroupSetupError

from . import nspawn as nspawn_mod
from . import sshd as sshd_mod
from . import state as state_mod
from .cluster import Env, teardown
from .names import CGROUP_ROOT, is_node_cgroup, is_our_link, is_our_netns

# How deep below a hierarchy root a ``cosched`` group may sit: the root itself,
# or a delegated unit such as system.slice/cosched.service (with its supervisor leaf).
SCAN_DEPTH = 3


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
            # a process is seen once per hierarchy it sits in (v1): name it once
            pids = sorted(set(self.killed))
            lines.append(f"killed PIDs left in cosched cgroups: {pids}")
        lines += [f"warning: {x}" for x in self.lingering]
        lines += [f"problem: {p}" for p in self.problems]
        return "\n".join(lines) if lines else "nothing to clean"


def scan_drivers(env: Env) -> list[Cgroups]:
    """The layer as the host has it, plus cgroup2 on its own on a hybrid host.

    A cluster made with ``--cgroup v2`` on a hybrid host lives in the cgroup2
    tree, which the default (v1) layout does not look at.
    """
    out: list[Cgroups] = []
    for prefer in ("auto", "v2"):
        try:
            cg = env.cgroups(prefer)
        except CgroupSetupError:
            # A systemd host where this process's own cgroup is not delegated (`cosched
            # clean` in an SSH session on a node): the scan needs no base of its own, it
            # looks from every hierarchy's root.
            try:
                cg = env.cgroups(layout=env.scan_layout(prefer, env.cg_fs))
            except CgroupError:
                continue
        except CgroupError:
            continue
        if all(cg.layout.mounts() != o.layout.mounts() for o in out):
            out.append(cg)
    return out


def cosched_roots(cg: Cgroups) -> list[str]:
    """Every group named ``cosched`` up to SCAN_DEPTH below a hierarchy root."""
    found: list[str] = []
    for h in cg.layout.mounts():
        level = [""]
        for _ in range(SCAN_DEPTH + 1):
            nxt: list[str] = []
            for rel in level:
                d = f"{h.mount}/{rel}" if rel else h.mount
                try:
                    names = cg.fs.listdir(d)
                except OSError:
                    continue
                for name in names:
                    path = f"{rel}/{name}" if rel else name
                    if name == CGROUP_ROOT:
                        if path not in found:
                            found.append(path)
                    else:
                        nxt.append(path)
            level = nxt
    return found


def node_groups(env: Env) -> list[str]:
    """``<root>/n<i>`` groups found in any hierarchy, for ``up``'s already-up check."""
    out: list[str] = []
    for cg in scan_drivers(env):
        for root in cosched_roots(cg):
            for h in cg.layout.mounts():
                for c in cg.children(root, h):
                    if is_node_cgroup(c) and f"{root}/{c}" not in out:
                        out.append(f"{root}/{c}")
    return out


def clean(env: Env | None = None) -> CleanReport:
    env = env or Env()
    rep = CleanReport()
    st = state_mod.load(env.sdir())
    if st is not None:
        rep.from_state = True
        rep.problems += teardown(st, env)

    # sshds of `up --ssh` a crash left unrecorded: found by their pidfiles and our
    # config on their command line (never by name), before their namespaces go.
    ssh_paths = sshd_mod.SshPaths(env.sdir())
    for pid in sshd_mod.stray_sshds(ssh_paths):
        try:
            env.kill(pid, signal.SIGTERM)
            rep.killed.append(pid)
        except ProcessLookupError:
            pass
    try:
        rep.removed += sshd_mod.remove_files(ssh_paths)
    except OSError as err:
        rep.problems.append(f"ssh files: {err}")

    for cg in scan_drivers(env):
        roots = cosched_roots(cg)
        nodes = [
            f"{root}/{c}"
            for root in roots
            for c in sorted({c for h in cg.layout.mounts() for c in cg.children(root, h)})
            if is_node_cgroup(c)
        ]
        # Thaw every node before the first kill: a frozen task cannot die.
        for path in nodes:
            cg.thaw_subtree(path)
        for path in nodes:
            try:
                rep.killed += cg.remove_tree(path, env.kill)
                rep.removed.append(f"cgroup /{path} ({cg.layout.mode})")
            except OSError as err:
                rep.problems.append(f"cgroup /{path}: {err}")
        for root in roots:
            if cg.remove_if_empty(root):
                rep.removed.append(f"cgroup /{root}")
            else:
                others = sorted({c for h in cg.layout.mounts() for c in cg.children(root, h)})
                rep.lingering.append(f"cgroup /{root} kept: holds non-node cgroups {others}")

    try:
        for link in env.net.list_links(None):
            if is_our_link(link) and env.net.delete_link(None, link):
                rep.removed.append(f"link {link}")
    except Exception as err:  # keep going: namespaces are next
        rep.problems.append(f"listing root links: {err}")

    ours = [n for n in env.net.list_netns() if is_our_netns(n)]
    rep.lingering += env.net.processes_in(ours)
    for ns in ours:
        try:
            if env.net.remove_netns(ns):
                rep.removed.append(f"netns {ns}")
        except OSError as err:
            rep.problems.append(f"netns {ns}: {err}")

    # systemd-nspawn's lock and propagation directories a crashed `up --systemd` left; on
    # a host run by systemd they are machined's and containers', so only off systemd, and
    # only once no systemd-nspawn runs (those of our nodes died with their node groups)
    nspawn_run = env.nspawn_run_dirs[-1]
    if os.path.isdir(nspawn_run) and not env.nspawn_in_use():
        try:
            nspawn_mod.remove_run_dirs([nspawn_run])
            rep.removed.append(nspawn_run)
        except OSError as err:
            rep.lingering.append(f"{nspawn_run} kept: {err.strerror or err}")

    rec = None
    try:
        rec = env.v2only_record()
    except CgroupError as err:
        rep.problems.append(str(err))
    if rec is not None and rec.unmounted:
        # not undone here: a v2-only stage may be running its live tests, which clean up
        rep.lingering.append(
            "the host is cgroup-v2-only (v1 hierarchies unmounted by cosched): "
            "`cosched host cgroups restore` mounts them back"
        )

    for path in (state_mod.key_path(env.sdir()), state_mod.state_path(env.sdir())):
        try:
            os.unlink(path)
            rep.removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            rep.problems.append(f"{path}: {err}")
    return rep
