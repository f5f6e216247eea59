"""``cosched cluster up|status|down`` and ``cosched clean``: the local cluster.

The work is testbed/cluster (namespaces, links, shaping, cgroups, agents);
this module is its command line. Refusals are
:class:`testbed.cluster.errors.ClusterError`, printed as one line by
``testbed.cli.main``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from testbed.cluster import clean as clean_mod
from testbed.cluster import cluster as cluster_mod
from testbed.cluster import cpu as cpu_mod
from testbed.cluster.errors import ClusterError
from testbed.cluster.names import DEFAULT_CTL_SUBNET, DEFAULT_DATA_SUBNET, MAX_NODES, AddressPlan
from testbed.cluster.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, parse_profile

from . import command_parser

_PROFILE_HELP = (
    "link profile of the data network: "
    + ", ".join(v.describe() for v in BUILTIN_PROFILES.values())
    + ", or custom:rate=500mbit,delay=20us,jitter=5us,loss=0.1. "
    "Built-ins accept the same overrides, e.g. gige:loss=0.5. "
    f"Default: {DEFAULT_PROFILE}."
)


def add_commands(subparsers: Any) -> None:
    """Register ``cluster`` (up/status/down) and ``clean`` on an argparse subparsers object."""
    cl = command_parser(
        subparsers,
        "cluster",
        "the local cluster (network namespaces, shaped links, node cgroups)",
        "Manage the local cluster: one network namespace per node, "
        "a shaped data network, an unshaped control network reaching the host, "
        "per-node CPU capacity and one agent per node.",
        "  sudo cosched cluster up --nodes 4 --link gige\n"
        "  cosched cluster status\n"
        "  sudo cosched cluster down",
    )
    sub = cl.add_subparsers(dest="cluster_command", metavar="{up,status,down,partition,heal}")
    sub.required = True

    up = command_parser(
        sub,
        "up",
        "create the cluster",
        "Create N nodes n0..n{N-1} (netns cosched-n<i>), the data bridge "
        "(netns cosched-data) and the control bridge (netns cosched-ctl, host side on "
        "csc-host), and start one agent per node. Needs root. Rolls back completely on any "
        "failure; refuses while a cluster is up (`cosched cluster down` first).",
        "  sudo cosched cluster up --nodes 4\n"
        "  sudo cosched cluster up --nodes 8 --link gige:loss=0.1 --cpus-per-node 1\n"
        "  sudo cosched cluster up --nodes 2 --cpus-per-node 0.5 --cpu-mechanism shared\n"
        "  sudo cosched cluster up --nodes 2 --no-agents     # network and cgroups only\n"
        "  sudo cosched cluster up --nodes 2 --ssh           # + sshd per node, Ansible inventory\n"
        "  sudo cosched cluster up --nodes 2 --ssh --no-agents"
        "   # bare nodes for `ansible-playbook -i $STATE/inventory.yml`\n"
        "  sudo cosched cluster up --nodes 2 --cgroup v2      # cgroup2 alone on a hybrid host\n"
        "  sudo cosched cluster up --nodes 2 --systemd        # Debian + systemd nodes, a head\n"
        "  sudo cosched cluster up --emulated-nodes 1024      # 1,024 emulated agents, 32 relays\n"
        "  sudo systemd-run --scope -p Delegate=yes cosched cluster up --nodes 4"
        "   # cgroup-v2 host with systemd",
    )
    size = up.add_mutually_exclusive_group(required=True)
    size.add_argument("--nodes", "-n", type=int, help=f"number of nodes, 1..{MAX_NODES}")
    size.add_argument(
        "--emulated-nodes",
        type=int,
        metavar="N",
        help="instead: N emulated agents in one process on 127.0.0.1 (no namespaces, no job "
        "processes; for trying a scheduler at scale, docs/scale.md)",
    )
    up.add_argument(
        "--relays",
        default="auto",
        metavar="R",
        help="with --emulated-nodes: relays between the controller and the agents "
        "(controller/relay.py): auto (about sqrt(N) from 64 nodes), 0 or a number",
    )
    up.add_argument(
        "--base-port",
        type=int,
        default=17000,
        help="with --emulated-nodes: first agent port (default %(default)s)",
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
        "--speeds",
        default=None,
        metavar="S0,S1,...",
        help="heterogeneous nodes: node i gets --cpus-per-node x S_i of a CPU by CFS bandwidth"
        " (one speed per node in (0, 1], NxS groups, or paper: 7 at 1 and the rest at 1.8/2.8,"
        " Yu & Byun 2011 §5.1)",
    )
    up.add_argument(
        "--decision-interval-ms",
        type=float,
        default=None,
        metavar="MS",
        help="how often the agents' local CDC schemes decide (their tick), 0.1..1000 ms, unless"
        " the controller sets one (default 10; Yu & Byun's kernel decided every ~1 ms)",
    )
    up.add_argument(
        "--cgroup",
        default="auto",
        choices=["auto", "v1", "v2"],
        help="which cgroup hierarchies: auto (per controller: a v1 hierarchy where one is "
        "mounted, else cgroup2), v1, or v2 (cgroup2 alone). On a cgroup-v2 host run by "
        "systemd, cosched works below its own cgroup, which must be delegated "
        "(Delegate=yes; see docs/cluster.md)",
    )
    up.add_argument(
        "--switch",
        default="freezer",
        choices=["freezer", "signals"],
        help="how the agents switch jobs: the cgroup freezer (default) or SIGSTOP/SIGCONT "
        "to every process of a job's cgroup, as Rajaei et al. 2008 does (docs/cluster.md, "
        "'Switch mechanisms')",
    )
    up.add_argument(
        "--no-agents",
        dest="agents",
        action="store_false",
        help="do not start the per-node agents (network and cgroups only; with --ssh, bare "
        "nodes for a playbook or `cosched remote start` to start them)",
    )
    up.add_argument(
        "--ssh",
        action="store_true",
        help="also run an sshd in every node (on its control address, port 22, key login for "
        "root only) and one for the host (head: controller and monitor) on its control "
        "address; write $COSCHED_STATE_DIR/inventory.yml (Ansible: groups controller, agents, "
        "monitor) and $COSCHED_STATE_DIR/ssh_config (`ssh -F .../ssh_config n0`). Keys are "
        "made per cluster under $COSCHED_STATE_DIR/ssh; `down` and `clean` remove it all. "
        "Needs openssh-server. Agents still start unless --no-agents",
    )
    up.add_argument(
        "--systemd",
        action="store_true",
        help="boot every node, and a head node for the controller and monitoring, as a "
        "Debian bookworm container with systemd as PID 1 (systemd-nspawn) in the node's "
        "namespace and cgroup, with sshd and cgroup2 controllers delegated to it; implies "
        "--ssh and --no-agents: deploy with `ansible-playbook -i "
        "$COSCHED_STATE_DIR/inventory.yml ansible/site.yml`. The root file system is built "
        "once with debootstrap and cached in /var/cache/cosched/rootfs. Needs a "
        "cgroup-v2-only host (`cosched host cgroups v2-only`) and systemd-container "
        "(docs/deploy.md)",
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
    up.set_defaults(func=cmd_up)

    st = command_parser(
        sub,
        "status",
        "show nodes, addresses, shaping read back from the kernel, agents",
        "Show the recorded cluster as the kernel sees it now: qdiscs and classes "
        "read back, delay mechanism (netem or userspace), CPU mechanism, agent PIDs and "
        "whether their metrics endpoints answer (1 s timeout), and on a last line what the "
        "local controller runs, if one answers (policy; MPL and scheme for the Yu & Byun 2011 "
        "policies). Exit status 1 when no cluster is up.",
        "  cosched cluster status\n  cosched cluster status --json --no-probe",
    )
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--no-probe", dest="probe", action="store_false", help="skip metrics probes")
    st.set_defaults(func=cmd_status)

    dn = command_parser(
        sub,
        "down",
        "remove exactly what `up` recorded (idempotent)",
        "Stop the agents and remove the namespaces, links, qdiscs, cgroups and key "
        "recorded in the state file. Safe to repeat. After a crash use `cosched clean`.",
        "  sudo cosched cluster down",
    )
    dn.set_defaults(func=cmd_down)

    for name, heal in (("partition", False), ("heal", True)):
        pt = command_parser(
            sub,
            name,
            "restore a node's network link" if heal else "cut a node off the network (faults)",
            (
                "Bring the node's bridge port back up after `cosched cluster partition`; "
                "the controller reaches the agent again and reconciles its jobs."
                if heal
                else "Fault injection: take the node's port on the control (default) or data "
                "bridge down, so its packets are dropped both ways while the agent keeps "
                "running. Longer than the agents' fail-safe timeout, the node thaws its "
                "jobs on its own; `cosched cluster heal NODE` restores it (docs/security.md, "
                "'Faults')."
            ),
            f"  sudo cosched cluster {name} n1\n  sudo cosched cluster {name} n1 --network both",
        )
        pt.add_argument("node", help="node name, e.g. n1")
        pt.add_argument(
            "--network",
            default="control",
            choices=["control", "data", "both"],
            help="which link (default %(default)s)",
        )
        pt.set_defaults(func=cmd_partition, heal=heal)

    cn = command_parser(
        subparsers,
        "clean",
        "remove every cosched namespace, link and node cgroup, even after a crash",
        "Tear down the recorded cluster if any, then scan for cosched- network "
        "namespaces, csd-/csc- links and node cgroups cosched/n<i> in every v1 hierarchy "
        "and in cgroup2, at the root or below a delegated unit "
        "(the cosched root too when nothing else is in it) and remove them. Processes are "
        "killed only by recorded PID (start time checked) or because they sit inside a "
        "cosched cgroup; never by name.",
        "  sudo cosched clean",
    )
    cn.set_defaults(func=cmd_clean)


def cmd_up(args: argparse.Namespace) -> int:
    if args.emulated_nodes is not None:
        from testbed.cluster import emulated

        est = emulated.up(args.emulated_nodes, args.relays, args.base_port)
        relays = (est.emulated or {}).get("relays", [])
        print(
            f"cluster up: {len(est.nodes)} emulated node(s) on 127.0.0.1:{args.base_port}.., "
            f"{len(relays)} relay(s); `cosched controller start` drives them"
        )
        return 0
    try:
        profile = parse_profile(args.link)
        addrs = AddressPlan.build(args.data_subnet, args.control_subnet, args.host_ip)
        speeds = None if args.speeds is None else cpu_mod.parse_speeds(args.speeds, args.nodes)
    except ValueError as err:
        raise ClusterError(str(err), fix="see `cosched cluster up --help`") from None
    config = cluster_mod.ClusterConfig(
        nodes=args.nodes,
        profile=profile,
        cpus_per_node=args.cpus_per_node,
        cpu_mechanism=args.cpu_mechanism,
        cfs_period_us=args.cfs_period_us,
        addresses=addrs,
        start_agents=args.agents and not args.systemd,
        cgroup=args.cgroup,
        switch=args.switch,
        ssh=args.ssh or args.systemd,
        speeds=speeds,
        decision_interval_ms=args.decision_interval_ms,
        systemd=args.systemd,
    )
    env = cluster_mod.Env()
    env.log = lambda line: print(line, flush=True)  # the root file system's and boot's times
    st = cluster_mod.up(config, env)
    print(
        f"cluster up: {len(st.nodes)} node(s), link {profile.describe()}, "
        f"delay mechanism {st.delay_mechanism}, cpu {st.cpu.get('mechanism')}, "
        f"cgroups {st.cgroup_layout.get('mode')}" + ("" if config.start_agents else ", no agents")
    )
    if st.systemd:
        print(
            f"systemd nodes: head {st.systemd['head']['ctl_ip']} and {len(st.nodes)} node(s); "
            f"inventory {st.ssh and st.ssh['inventory']}; deploy with `ansible-playbook -i "
            f"{st.ssh and st.ssh['inventory']} site.yml` in ansible/; "
            f"try `ssh -F {st.ssh and st.ssh['ssh_config']} n0 systemctl status`"
        )
    elif st.ssh:
        ready = [r.get("ready_s", 0.0) for r in st.ssh.get("sshds") or []]
        print(
            f"ssh: {len(ready)} sshd listening (slowest after {max(ready, default=0):.2f} s); "
            f"inventory {st.ssh['inventory']}; try `ssh -F {st.ssh['ssh_config']} n0`"
        )
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    ports = cluster_mod.partition(args.node, heal=args.heal, network=args.network)
    verb = "healed" if args.heal else "partitioned"
    print(f"{args.node} {verb}: {', '.join(ports)} {'up' if args.heal else 'down'}")
    return 0


def controller_status(sock: str | None = None) -> dict[str, Any] | None:
    """The local controller's status if one answers on its socket at once, else None."""
    import os

    from common.names import controller_socket
    from controller.client import ControllerClient, ControllerError

    path = sock or controller_socket()
    if not os.path.exists(path):
        return None
    client = ControllerClient(path, retry=0.0, timeout=1.0)
    try:
        status = client.request("status")
    except (ControllerError, OSError):
        return None
    finally:
        client.close()
    return status if isinstance(status, dict) else None


def controller_line(status: dict[str, Any] | None) -> str:
    """One line: what the controller runs (policy, MPL, scheme), or that none answers."""
    from testbed.views import render_policy

    if status is None:
        return "controller: none answering on this host (`cosched controller start`)"
    return f"controller: {render_policy(status)}"


def cmd_status(args: argparse.Namespace) -> int:
    report = cluster_mod.status(probe=args.probe)
    if report is None:
        print("no cluster is up (no state file)")
        return 1
    ctl = controller_status()
    if args.json:
        keys = ("policy", "family", "mpl", "scheme", "local_policy", "pid")
        report["controller"] = {k: ctl[k] for k in keys if k in ctl} if ctl else None
        print(json.dumps(report, indent=2))
    else:
        print(cluster_mod.format_status(report))
        print(controller_line(ctl))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
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


def cmd_clean(args: argparse.Namespace) -> int:
    rep = clean_mod.clean()
    print(rep.format())
    return 1 if rep.problems else 0
