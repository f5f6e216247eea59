"""``cosched remote status|start|stop|logs|clean``: ad-hoc operations on nodes over SSH.

The work is testbed/remote.py (fabric); this module is its command line.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from typing import Any

from common.names import state_dir

from . import command_parser

_INVENTORY_HELP = (
    "Ansible inventory (YAML): the playbook's, or the one `cosched cluster up --ssh` "
    "writes. Default: $COSCHED_STATE_DIR/inventory.yml when it exists"
)
_LIMIT_HELP = "only these hosts or groups, comma-separated (e.g. n0,n1 or agents)"


def add_commands(subparsers: Any) -> None:
    rm = command_parser(
        subparsers,
        "remote",
        "status, start/stop, logs and clean on the nodes of an Ansible inventory, over SSH",
        "Operate the nodes the playbook deploys to, ad hoc, over SSH (fabric): the same "
        "inventory, user, key and known_hosts as Ansible. Every host of the agents group "
        "runs an agent (agent-<node>), every host of the controller group the controller. "
        "Daemons are handled with systemctl where the inventory's service_manager is "
        "systemd (the roles' default) and the node runs systemd; otherwise with "
        "start-stop-daemon, the pidfile, log and flags of the roles' `service_manager: "
        "none` (<cosched_run_dir>/<daemon>.pid, <cosched_log_dir>/<daemon>.log, "
        "<cosched_config_dir>/<daemon>.env), so the playbook and this command see the "
        "same daemons.\n\n"
        "Hosts run in parallel, one line (or block) each. A host that cannot be reached "
        "says why on its line; the others complete; the exit status is then 1 (also when "
        "a daemon is down or an operation failed on some host).",
        "  sudo cosched cluster up --nodes 4 --ssh      # writes $COSCHED_STATE_DIR/inventory.yml\n"
        "  cosched remote status\n"
        "  cosched remote status -i ansible/inventory/site/hosts.yml --limit agents\n"
        "  cosched remote stop --limit n1 --only agent\n"
        "  cosched remote status -i inv.yml -e @extra.yml   # the playbook's -e, same paths\n"
        "  cosched remote start --limit n1\n"
        "  cosched remote logs --out /tmp/run42-logs   # logs and /metrics of every daemon\n"
        "  cosched remote clean --limit n3             # stop daemons, `cosched clean` there",
    )
    sub = rm.add_subparsers(dest="remote_command", metavar="{status,start,stop,logs,clean}")
    sub.required = True

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-i", "--inventory", default=None, metavar="INVENTORY",
                        help=_INVENTORY_HELP)  # fmt: skip
    common.add_argument("--limit", "-l", default=None, metavar="HOSTS", help=_LIMIT_HELP)
    common.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="variables over the inventory's, as ansible-playbook -e takes them: key=value "
        "or @file.yml (repeatable); pass the playbook's, so both see the same paths",
    )
    common.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="SSH connect timeout per host in seconds (default %(default)s)",
    )

    st = command_parser(
        sub,
        "status",
        "per host: service manager, cgroup version, load, each daemon and its /metrics",
        "Per host, in one SSH round trip: systemd or none, the cgroup version "
        "(v2, v1 or v1 hybrid), the load average, the hostname, whether each cosched daemon "
        "runs (systemctl is-active, or the role's pidfile) and whether its /metrics answers "
        "(fetched on the node itself). Exit status 1 when a host is unreachable or a "
        "daemon is not running.",
        "  cosched remote status -i $COSCHED_STATE_DIR/inventory.yml\n"
        "  cosched remote status --limit controller",
        parents=[common],
    )
    st.set_defaults(func=cmd_status)

    for name, verb in (("start", "start"), ("stop", "stop")):
        p = command_parser(
            sub,
            name,
            f"{verb} the cosched daemons of each host",
            f"{verb.capitalize()} the agent and/or controller of each host as the roles do: "
            "`systemctl " + verb + " cosched-agent` under systemd, else start-stop-daemon "
            "with the role's pidfile"
            + (
                ", log and the flags the playbook wrote (deploy first)"
                if name == "start"
                else " (TERM, KILL after 15 s)"
            )
            + ". Agents start before the controller and stop after it.",
            f"  cosched remote {name}\n  cosched remote {name} --limit n0,n1 --only agent",
            parents=[common],
        )
        p.add_argument("--only", default="all", choices=["all", "agent", "controller"],
                       help="which daemons (default %(default)s)")  # fmt: skip
        p.set_defaults(func=cmd_start if name == "start" else cmd_stop)

    lg = command_parser(
        sub,
        "logs",
        "copy each daemon's log and /metrics into a local directory",
        "For every daemon of every host: its log (the journal under systemd, the role's "
        "log file otherwise) to OUT/<host>/<daemon>.log and its /metrics (fetched on the "
        "node, where the control network reaches it) to OUT/<host>/<daemon>.prom; files "
        "0600 (logs carry users' job commands).",
        "  cosched remote logs --out /tmp/cosched-logs\n  cosched remote logs --limit agents",
        parents=[common],
    )
    lg.add_argument("--out", "-o", default=None, metavar="DIR",
                    help="local directory (default ./cosched-logs-<UTC time>)")  # fmt: skip
    lg.set_defaults(func=cmd_logs)

    cl = command_parser(
        sub,
        "clean",
        "stop the daemons and run `cosched clean` on each host",
        "Stop each host's daemons, then run `cosched clean` there (with the node's "
        "cosched_state_dir) to remove every cosched namespace, link and cgroup it has. On "
        "the local cluster's nodes of `cluster up --ssh` (cosched_local_cluster: true) only the "
        "daemons are stopped: they share one kernel, and `cosched clean` on one would take "
        "the whole local cluster down; `cosched cluster down` on the host does that.",
        "  cosched remote clean --limit n3",
        parents=[common],
    )
    cl.set_defaults(func=cmd_clean)


def _inventory(args: argparse.Namespace) -> str:
    from testbed.remote import RemoteError

    if args.inventory:
        return str(args.inventory)
    default = os.path.join(state_dir(), "inventory.yml")
    if os.path.exists(default):
        return default
    raise RemoteError(
        f"no inventory given and none at {default}",
        fix="give -i INVENTORY, or `sudo cosched cluster up --nodes N --ssh` to make one",
    )


def _run(args: argparse.Namespace, op: Any, what: str) -> int:
    from testbed import remote

    if importlib.util.find_spec("fabric") is None or importlib.util.find_spec("yaml") is None:
        raise remote.RemoteError(
            "cosched remote needs fabric and PyYAML", fix="pip install 'cosched[remote]'"
        )
    extra = remote.extra_vars(args.extra_vars)
    hosts = remote.select(remote.load_inventory(_inventory(args), extra), args.limit)
    t0 = time.monotonic()
    reports = remote.run_on(hosts, op, lambda h: remote.connect(h, args.timeout))
    for rep in reports:
        print(rep.format())
    bad = [r.host.name for r in reports if not r.ok]
    print(
        f"{what}: {len(reports) - len(bad)}/{len(reports)} host(s) ok in "
        f"{time.monotonic() - t0:.2f} s" + (f"; not ok: {', '.join(bad)}" if bad else "")
    )
    return 1 if bad else 0


def cmd_status(args: argparse.Namespace) -> int:
    from testbed import remote

    return _run(args, remote.op_status, "status")


def cmd_start(args: argparse.Namespace) -> int:
    from testbed import remote

    return _run(args, remote.op_start(args.only), "start")


def cmd_stop(args: argparse.Namespace) -> int:
    from testbed import remote

    return _run(args, remote.op_stop(args.only), "stop")


def cmd_logs(args: argparse.Namespace) -> int:
    from testbed import remote

    out = args.out or f"cosched-logs-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    rc = _run(args, remote.op_logs(out), "logs")
    print(f"files in {os.path.abspath(out)}")
    return rc


def cmd_clean(args: argparse.Namespace) -> int:
    from testbed import remote

    return _run(args, remote.op_clean, "clean")
