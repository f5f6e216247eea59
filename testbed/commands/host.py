"""``cosched host cgroups status|v2-only|restore``: this host's cgroup hierarchies.

The systemd nodes of ``cosched cluster up --systemd`` need what every current
distribution boots: a cgroup-v2-only host. A hybrid development host (v1
``cpu``, ``cpuset``, ``freezer``... beside a bare cgroup2 mount) can be made
one and given back its v1 hierarchies afterwards; the work is
common/cgroups/v2only.py, which records what it unmounted in
``/run/cosched/host-cgroup-v2only.json`` so that ``restore`` (also after a
crash) mounts exactly that back.
"""

from __future__ import annotations

import argparse
from typing import Any

from common.cgroups import v2only

from . import command_parser


def add_commands(subparsers: Any) -> None:
    host = command_parser(
        subparsers,
        "host",
        "this host's cgroup hierarchies: status, make cgroup-v2-only, restore v1",
        "Inspect or change how this host mounts cgroups. The systemd nodes of "
        "`cosched cluster up --systemd` need a cgroup-v2-only host; a hybrid one (v1 "
        "controller hierarchies beside cgroup2) can be switched and switched back.",
        "  cosched host cgroups                 # status\n"
        "  sudo cosched host cgroups v2-only\n"
        "  sudo cosched host cgroups restore",
    )
    sub = host.add_subparsers(dest="host_command", metavar="{cgroups}")
    sub.required = True
    cg = command_parser(
        sub,
        "cgroups",
        "status, v2-only (unmount the v1 controller hierarchies), restore",
        "status (the default): which hierarchies hold the controllers now. v2-only: "
        "unmount the v1 hierarchies of cpu, cpuacct, cpuset, freezer, blkio and pids so "
        "the kernel hands their controllers to cgroup2 (refused, in one line, while one "
        "has groups of its own); the record of what was unmounted goes to "
        f"{v2only.RECORD_PATH} first. restore: disable those controllers in every "
        "cgroup2 group (children first) and mount the hierarchies back with their old "
        "options, checked; nothing to do without a record. Needs root to change.",
        "  sudo cosched host cgroups v2-only && sudo cosched cluster up --nodes 2 --systemd\n"
        "  sudo cosched cluster down && sudo cosched host cgroups restore",
    )
    cg.add_argument("action", nargs="?", default="status", choices=["status", "v2-only", "restore"])
    cg.set_defaults(func=cmd_cgroups)


def cmd_cgroups(args: argparse.Namespace) -> int:
    if args.action == "v2-only":
        rec = v2only.switch_to_v2()
        if rec.unmounted:
            print(
                "unmounted the v1 hierarchies at "
                + ", ".join(m.mountpoint for m in rec.unmounted)
                + "; now "
                + v2only.host_state().describe()
            )
        else:
            print("nothing to do: " + v2only.host_state().describe())
        return 0
    if args.action == "restore":
        back = v2only.restore_v1()
        if back is None:
            print("nothing to restore (no record of a switch): " + v2only.host_state().describe())
        else:
            print("mounted back " + ", ".join(m.mountpoint for m in back.unmounted))
        return 0
    print(v2only.host_state().describe())
    return 0
