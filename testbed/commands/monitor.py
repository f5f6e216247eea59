"""``cosched monitor up|down|status``: Prometheus (and Grafana) for the local cluster.

The work is testbed/monitor.py; this module is its command line. Everything
it makes lives in ``$COSCHED_STATE_DIR/monitor/`` and ``down`` removes it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from common.names import DEFAULT_RUN_DIR, RUN_DIR_ENV, state_dir
from testbed import monitor as mon
from testbed.cluster import state as state_mod

from . import command_parser


def cmd_up(args: argparse.Namespace) -> int:
    """Start Prometheus (and Grafana with --grafana, where installed) for the local cluster."""
    st = state_mod.load()
    if st is None or st.status != "up":
        raise mon.MonitorError(
            f"no local cluster is up (no cluster.json in {state_dir()} saying so)",
            fix="'cosched cluster up' first, or set COSCHED_STATE_DIR to its directory",
        )
    if args.grafana and mon.find_grafana() is None:
        print("grafana: not installed (no grafana-server or grafana on PATH); skipping it")
    rep = mon.up(
        st,
        port=args.port,
        grafana=args.grafana and mon.find_grafana() is not None,
        grafana_port=args.grafana_port,
        run_dir=args.run_dir,
        wait_s=args.wait,
        scrape_interval_s=args.scrape_interval,
        run_id=args.run_id,
    )
    p = rep.prometheus
    print(f"prometheus: {p.url}  (pid {p.pid}, ready after {rep.ready_s:.2f} s)")
    targets = [*([rep.controller] if rep.controller else []), *rep.agents]
    for t in targets:
        print(f"  scrapes {t.job:<18} {t.node:<5} http://{t.address}/metrics")
    print(f"  run id: {rep.run_id}  (the label run= on every target)")
    for note in rep.notes:
        print(f"  {note}")
    if rep.grafana is not None:
        print(f"grafana: {rep.grafana.url}  (pid {rep.grafana.pid})")
    print(f"files: {mon.monitor_paths().root}  ('cosched monitor down' stops and removes them)")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop Prometheus (and Grafana) and remove everything `up` made."""
    done = mon.down()
    print("; ".join(done) if done else "monitoring was not up; nothing to do")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """The daemons, their URLs and each scrape target's health."""
    st = mon.status()
    if args.json:
        print(json.dumps(st, indent=2, sort_keys=True))
        return 0 if st["up"] else 1
    if not st["daemons"]:
        print("monitoring is down ('cosched monitor up' starts it)")
        return 1
    for d in st["daemons"]:
        state = "running" if d["running"] else "not running"
        print(f"{d['name']}: {d['url']}  pid {d['pid']} {state}")
    for t in st["targets"]:
        err = f"  ({t['error']})" if t["error"] else ""
        print(f"  {t['job']:<18} {t['node'] or '-':<5} {t['address']:<22} {t['health']}{err}")
    return 0 if st["up"] else 1


def add_commands(subparsers: Any) -> None:
    """Register ``monitor`` (up/down/status) on ``subparsers``."""
    top = command_parser(
        subparsers,
        "monitor",
        "Prometheus (and Grafana) scraping the local cluster",
        "Run Prometheus on this host for the local cluster: it scrapes every "
        "agent's exporter over the control network (the host's csc-host veth) and the "
        "controller's, and evaluates prometheus/rules/ (recording rules and alerts). "
        "docs/monitoring.md.",
        "  cosched monitor up\n"
        "  cosched monitor up --port 19090 --grafana\n"
        "  cosched monitor status\n"
        "  cosched monitor down",
    )
    sub = top.add_subparsers(dest="monitor_command", metavar="{up,down,status}")
    sub.required = True

    p = command_parser(
        sub,
        "up",
        "start Prometheus for the local cluster",
        "Render prometheus.yml from the cluster state (an agent target per node at the "
        "address its --metrics gave; the controller's exporter from the --metrics of the "
        "controller serving the socket, if any), copy prometheus/rules/ beside it and start "
        "prometheus as a daemon on 127.0.0.1 with a private TSDB, all under "
        "$COSCHED_STATE_DIR/monitor/. Waits until /-/ready answers and prints the URLs. "
        "With --grafana, also Grafana, if a grafana-server or grafana binary is installed "
        "(one line says so otherwise). Start the controller first: the targets are fixed "
        "at 'up'.",
        "  cosched monitor up\n"
        "  cosched monitor up --port 19090\n"
        "  cosched monitor up --grafana --grafana-port 13000",
    )
    p.add_argument(
        "--port",
        type=int,
        default=mon.PROMETHEUS_PORT,
        metavar="PORT",
        help=f"Prometheus port on 127.0.0.1 (default {mon.PROMETHEUS_PORT})",
    )
    p.add_argument("--grafana", action="store_true", help="also start Grafana, if installed")
    p.add_argument(
        "--grafana-port",
        type=int,
        default=mon.GRAFANA_PORT,
        metavar="PORT",
        help=f"Grafana port on 127.0.0.1 (default {mon.GRAFANA_PORT})",
    )
    p.add_argument(
        "--run-dir",
        default=None,
        metavar="DIR",
        help=f"the controller's run dir (default ${RUN_DIR_ENV} or {DEFAULT_RUN_DIR})",
    )
    p.add_argument(
        "--run-id",
        default=None,
        metavar="ID",
        help="label every target run=ID (the experiment dashboard's run; default: the UTC "
        "start time, e.g. 20261125T201500Z)",
    )
    p.add_argument(
        "--scrape-interval",
        type=float,
        default=mon.SCRAPE_INTERVAL_S,
        metavar="S",
        help=f"scrape and rule evaluation interval, s (default {mon.SCRAPE_INTERVAL_S:g})",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for /-/ready (default 30)",
    )
    p.set_defaults(func=cmd_up)

    p = command_parser(
        sub,
        "down",
        "stop Prometheus (and Grafana) and remove their files",
        "Stop the daemons 'up' started (by the pid and start time in their 0600 pid files) "
        "and remove $COSCHED_STATE_DIR/monitor/ with the TSDB.",
        "  cosched monitor down",
    )
    p.set_defaults(func=cmd_down)

    p = command_parser(
        sub,
        "status",
        "the daemons and each target's health",
        "Show whether Prometheus (and Grafana) run, their URLs and, from Prometheus, the "
        "health of every scrape target. Exits 1 when Prometheus is not running.",
        "  cosched monitor status\n  cosched monitor status --json",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_status)
