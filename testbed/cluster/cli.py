"""Command line: ``cosched cluster up|status|down`` and ``cosched clean``.

:func:`add_cluster_commands` registers the commands on the ``cosched``
console script's subparsers; :func:`main` runs them standalone
(``python -m testbed.cluster cluster up --nodes 2``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import clean as clean_mod
from . import cluster as cluster_mod
from .errors import ClusterError
from .names import DEFAULT_CTL_SUBNET, DEFAULT_DATA_SUBNET, MAX_NODES, AddressPlan
from .profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, parse_profile

_PROFILE_HELP = (
    "link profile of the data network: "
    + ", ".join(v.describe() for v in BUILTIN_PROFILES.values())
    + ", or custom:rate=500mbit,delay=20us,jitter=5us,loss=0.1. "
    "Built-ins accept the same overrides, e.g. gige:loss=0.5. "
    f"Default: {DEFAULT_PROFILE}."
)


def add_cluster_commands(subparsers: Any) -> None:
    """Register ``cluster`` (up/status/down) and ``clean`` on an argparse subparsers object."""
    cl = subparsers.add_parser(
        "cluster",
        help="the local emulated cluster (network namespaces, shaped links, node cgroups)",
        description="Manage the local emulated cluster: one network namespace per node, "
        "a shaped data network, an unshaped control network reaching the host, "
        "per-node CPU capacity and one agent per node.",
    )
    sub = cl.add_subparsers(dest="cluster_command", metavar="{up,status,down}")
    sub.required = True

    up = sub.add_parser(
        "up",
        help="create the cluster",
        description="Create N nodes n0..n{N-1} (netns cosched-n<i>), the data bridge "
        "(netns cosched-data) and the control bridge (netns cosched-ctl, host side on "
        "csc-host). Needs root. Rolls back completely on any failure.",
    )
    up.add_argument(
        "--nodes", "-n", type=int, required=True, help=f"number of nodes, 1..{MAX_NODES}"
    )
    up.add_argument("--link", default=DEFAULT_PROFILE, metavar="PROFILE", help=_PROFILE_HELP)
    up.add_argument(
        "--cpus-per-node",
        type=float,
        default=None,
        metavar="F",
        help="CPU capacity of each node: dedicated cores via cpuset when F is whole and "
        "nodes*F fits the host's cores, else CFS bandwidth (period 10 ms, quota F*10 ms). "
        "Default: unlimited.",
    )
    up.add_argument(
        "--cpu-mechanism",
        default="auto",
        choices=["auto", "cpuset", "shared", "cfs"],
        help="how --cpus-per-node is enforced: auto (as above), cpuset, cfs, or shared "
        "(F = 1/k: k nodes share one core through cpuset, nothing throttled; best for "
        "paired gang, where I/O ranks must wake promptly beside a CPU-bound neighbour)",
    )
    up.add_argument(
        "--cfs-period-us",
        type=int,
        default=10_000,
        metavar="US",
        help="CFS bandwidth period in microseconds (default 10000; 1000..1000000). Shorter "
        "bounds how long a waking task waits while its node is throttled",
    )
    up.add_argument(
        "--no-agents",
        dest="agents",
        action="store_false",
        help="do not start the per-node agents (network and cgroups only)",
    )
    up.add_argument(
        "--data-subnet", default=DEFAULT_DATA_SUBNET, help="data network (default %(default)s)"
    )
    up.add_argument(
        "--control-subnet",
        default=DEFAULT_CTL_SUBNET,
        help="control network (default %(default)s); the host takes .254 of a /24",
    )
    up.add_argument("--host-ip", default=None, help="host (controller) address on the control net")
    up.set_defaults(func=_cmd_up)

    st = sub.add_parser(
        "status",
        help="show nodes, addresses, shaping read back from the kernel, agents",
        description="Show the recorded cluster as the kernel sees it now: qdiscs and classes "
        "read back, delay mechanism (netem or userspace), CPU mechanism, agent PIDs and "
        "whether their metrics endpoints answer (1 s timeout).",
    )
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--no-probe", dest="probe", action="store_false", help="skip metrics probes")
    st.set_defaults(func=_cmd_status)

    dn = sub.add_parser(
        "down",
        help="remove exactly what `up` recorded (idempotent)",
        description="Stop the agents and remove the namespaces, links, qdiscs, cgroups and key "
        "recorded in the state file. Safe to repeat. After a crash use `cosched clean`.",
    )
    dn.set_defaults(func=_cmd_down)

    cn = subparsers.add_parser(
        "clean",
        help="remove every cosched namespace, link and node cgroup, even after a crash",
        description="Tear down the recorded cluster if any, then scan for cosched- network "
        "namespaces, csd-/csc- links and node cgroups cosched/n<i> "
        "(the cosched root too when nothing else is in it) and remove them. Processes are "
        "killed only by recorded PID (start time checked) or because they sit inside a "
        "cosched cgroup; never by name.",
    )
    cn.set_defaults(func=_cmd_clean)


def _cmd_up(args: argparse.Namespace) -> int:
    try:
        profile = parse_profile(args.link)
        addrs = AddressPlan.build(args.data_subnet, args.control_subnet, args.host_ip)
    except ValueError as err:
        raise ClusterError(str(err)) from err
    config = cluster_mod.ClusterConfig(
        nodes=args.nodes,
        profile=profile,
        cpus_per_node=args.cpus_per_node,
        cpu_mechanism=args.cpu_mechanism,
        cfs_period_us=args.cfs_period_us,
        addresses=addrs,
        start_agents=args.agents,
    )
    st = cluster_mod.up(config)
    print(
        f"cluster up: {len(st.nodes)} node(s), link {profile.describe()}, "
        f"delay mechanism {st.delay_mechanism}, cpu {st.cpu.get('mechanism')}"
    )
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    report = cluster_mod.status(probe=args.probe)
    if report is None:
        print("no cluster is up (no state file)")
        return 1
    print(json.dumps(report, indent=2) if args.json else cluster_mod.format_status(report))
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    existed, problems = cluster_mod.down()
    if not existed:
        print("no cluster recorded; nothing to do (after a crash, run `cosched clean`)")
        return 0
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    if problems:
        print("teardown incomplete; the state file was kept; retry or run `cosched clean`")
        return 1
    print("cluster down")
    return 0


def _cmd_clean(args: argparse.Namespace) -> int:
    rep = clean_mod.clean()
    print(rep.format())
    return 1 if rep.problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cosched", description="cosched local cluster commands")
    sub = parser.add_subparsers(dest="command", metavar="{cluster,clean}")
    sub.required = True
    add_cluster_commands(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    """Dispatch parsed args; turns ClusterError into one line on stderr and exit 2."""
    try:
        return int(args.func(args))
    except ClusterError as err:
        print(f"cosched: {err}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)
