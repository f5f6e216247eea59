"""``cosched controller start|stop|status|checkpoint|set``: operating the controller daemon.

Operators start, stop, checkpoint and tune the controller (Gorda & Brooks 1991 §3).
``start`` takes exactly the daemon's flags (declared once in
controller/flags.py) and hands them on to ``python -m controller``; the rest
go through the controller API (see ``_api``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common.daemons import DAEMON_CWD, daemon_env
from common.names import CONTROLLER_LOG, CONTROLLER_PORT, RUN_DIR_ENV, controller_socket
from common.private import append_private
from controller.client import ControllerClient, ControllerError
from controller.flags import add_daemon_flags, daemon_argv
from controller.operator import SETTABLE

from . import command_parser
from ._api import CliError, call, common_options, json_arg, print_json

DAEMON_PREFIX = "controller: error: "  # how python -m controller reports (controller/__main__.py)

__all__ = ["add_commands", "daemon_argv"]


# -- settings ------------------------------------------------------------------------


def _parse_setting(item: str) -> tuple[str, Any]:
    key, sep, raw = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep:
        raise CliError(f"set wants KEY=VALUE, got {item!r}; keys: {', '.join(SETTABLE)}")
    if key not in SETTABLE:
        raise CliError(f"unknown setting {key!r}; settable: {', '.join(SETTABLE)}")
    raw = raw.strip()
    if raw.lower() in ("null", "none", "unlimited", ""):
        if key in ("quantum", "interactive_limit"):
            raise CliError(f"{key} needs a number of seconds")
        if key in ("disk_bps", "net_bps"):
            raise CliError(f"{key} needs a number of bytes per second")
        return key, None
    counts = ("max_slots", "user_limit", "queue_limit")
    try:
        value: Any = int(raw) if key in counts else float(raw)
    except ValueError:
        kind = (
            "a whole number or none"
            if key in counts
            else "bytes per second"
            if key.endswith("_bps")
            else "seconds"
        )
        raise CliError(f"{key}={raw!r}: want {kind}") from None
    return key, value


def _render_mapping(data: Any) -> str:
    if not isinstance(data, dict):
        return json.dumps(data) + "\n"
    width = max((len(str(k)) for k in data), default=0)
    lines = []
    for key in data:
        value = data[key]
        text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
        lines.append(f"{str(key).ljust(width)}  {'-' if text is None else text}")
    return "\n".join(lines) + "\n"


# -- commands ------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    """Controller status."""
    result = call(args, "status")
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(_render_mapping(result))
    return 0


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """Write a checkpoint now."""
    result = call(args, "checkpoint")
    print(f"checkpoint written: {result.get('path') if isinstance(result, dict) else result}")
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    """Change operator settings."""
    settings = dict(_parse_setting(item) for item in args.settings)
    result = call(args, "set", **settings)
    sys.stdout.write(_render_mapping(result))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Shut the controller down (after a checkpoint)."""
    result = call(args, "shutdown", checkpoint=args.checkpoint)
    path = result.get("path") if isinstance(result, dict) else None
    if path:
        print(f"controller stopping; checkpoint at {path}")
    elif args.checkpoint:
        print(
            "controller stopping; no checkpoint (it was started without --checkpoint): its"
            " jobs keep running unscheduled until killed (`cosched clean` stops them)"
        )
    else:
        print("controller stopping")
    return 0


def _answers(sock: str) -> bool:
    if not os.path.exists(sock):
        return False
    client = ControllerClient(sock, retry=0.0, timeout=2.0)
    try:
        client.request("status")
    except (ControllerError, OSError):
        return False
    finally:
        client.close()
    return True


def cmd_start(args: argparse.Namespace) -> int:
    """Start the controller daemon in the background."""
    sock = controller_socket(args.run_dir)
    if _answers(sock):
        raise CliError(
            f"a controller already answers on {sock}", fix="stop it with 'cosched controller stop'"
        )
    log_path = args.log or os.path.join(args.run_dir, CONTROLLER_LOG)
    try:
        os.makedirs(args.run_dir, exist_ok=True)
        log = append_private(log_path)  # handed to the child, closed below; 0600
    except OSError as exc:
        raise CliError(
            f"cannot prepare {args.run_dir}: {exc.strerror}", fix="run as root, or give --run-dir"
        ) from None
    # Not our whole environment, and not our directory (common/daemons.py, issue 28).
    env = daemon_env({RUN_DIR_ENV: os.path.abspath(args.run_dir)})
    try:
        # A new session: the daemon outlives this command and the user's terminal.
        proc = subprocess.Popen(
            daemon_argv(_absolute(args)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=env,
            cwd=DAEMON_CWD,
        )
    finally:
        log.close()
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CliError(
                f"the controller exited with status {proc.returncode}: "
                f"{_last_line(log_path)} (log: {log_path})"
            )
        if _answers(sock):
            print(f"controller started: pid {proc.pid}, socket {sock}, log {log_path}")
            return 0
        time.sleep(0.1)
    raise CliError(
        f"the controller (pid {proc.pid}) did not answer on {sock} within {args.wait:g} s",
        fix=f"see {log_path}; give it longer with --wait",
    )


def _absolute(args: argparse.Namespace) -> argparse.Namespace:
    """The paths the daemon is given, made absolute: it starts in /, not here."""
    out = argparse.Namespace(**vars(args))
    for name in ("run_dir", "cluster_state", "key_file", "checkpoint", "user_keys"):
        value = getattr(out, name, None)
        if isinstance(value, str) and value:
            setattr(out, name, os.path.abspath(value))
    return out


def _last_line(path: str) -> str:
    """The log's last line: the daemon's one-line error, without its own prefix."""
    try:
        lines = [x for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    last = lines[-1].strip() if lines else "no output"
    return last.removeprefix(DAEMON_PREFIX)


# -- registration -------------------------------------------------------------------


def add_commands(subparsers: Any) -> None:
    """Register ``controller`` (start/stop/status/checkpoint/set) on ``subparsers``."""
    top = subparsers.add_parser(
        "controller",
        help="start, stop, inspect and tune the controller daemon",
        description="Operate the cosched controller daemon (python -m controller).",
        epilog="examples:\n"
        "  cosched cluster up --nodes 4 && cosched controller start --policy paired-gang\n"
        "  cosched controller status\n"
        "  cosched controller set quantum=0.5 user_limit=4\n"
        "  cosched controller stop",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(
        dest="controller_command", metavar="{start,stop,status,checkpoint,set}"
    )
    sub.required = True
    common = [common_options()]

    p = command_parser(
        sub,
        "start",
        "start the daemon in the background",
        "Spawn 'python -m controller' detached (its own session, output to the log), wait "
        "until its socket answers and print its pid. Without --agents it drives the "
        "local cluster described by cluster.json ('cosched cluster up'). The daemon's "
        "flags below are handed on as given; those not given take the daemon's defaults.",
        "  cosched controller start --policy gang --quantum 1\n"
        "  cosched controller start --policy paired-gang --param band=0.2\n"
        f"  cosched controller start --policy gang --listen-tcp 10.212.0.254:{CONTROLLER_PORT}\n"
        "  cosched controller start --policy gang --checkpoint /var/lib/cosched/ckpt.json "
        "--restore",
    )
    add_daemon_flags(p.add_argument_group("the daemon (python -m controller)"), forward=True)
    p.add_argument("--log", default=None, metavar="FILE", help="daemon log (default RUN_DIR/)")
    p.add_argument(
        "--wait",
        type=float,
        default=20.0,
        metavar="S",
        help="how long to wait for the socket (default 20: longer than the daemon waits for "
        "its agents, 15 s, so a missing agent is reported here)",
    )
    p.set_defaults(func=cmd_start)

    p = command_parser(
        sub,
        "stop",
        "checkpoint and shut the daemon down",
        "Ask the controller to finish outstanding requests, write its checkpoint and exit "
        "(Gorda & Brooks 1991 §3.1); a new controller started with --restore picks up from there.",
        "  cosched controller stop\n  cosched controller stop --no-checkpoint",
        common,
    )
    p.add_argument(
        "--checkpoint",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write a checkpoint first (default yes)",
    )
    p.set_defaults(func=cmd_stop)

    p = command_parser(
        sub,
        "status",
        "policy, nodes, agents, quanta, skew",
        "Show the controller's status: policy, nodes and whether their agents are "
        "connected, quanta run, quantum command skew, fail-safe and checkpoint state.",
        "  cosched controller status\n  cosched controller status --json",
        common,
    )
    json_arg(p)
    p.set_defaults(func=cmd_status)

    p = command_parser(
        sub,
        "checkpoint",
        "write a checkpoint now",
        "Write the controller's checkpoint file now and print its path.",
        "  cosched controller checkpoint",
        common,
    )
    p.set_defaults(func=cmd_checkpoint)

    p = command_parser(
        sub,
        "set",
        "change operator settings (quantum, max_slots, ...)",
        "Change operator settings while the controller runs (Gorda & Brooks 1991 §3): quantum (s, "
        ">= "
        "0.01), max_slots (int or none), interactive_limit (s of run time before an "
        "interactive job is demoted), user_limit (jobs per user, int or none), queue_limit "
        "(queued jobs per user who is not an operator, default 100, int or none), disk_bps "
        "and net_bps (bytes/s a node's disk and link move: N + 1 gangs' device capacities).",
        "  cosched controller set quantum=0.5\n"
        "  cosched controller set max_slots=4 user_limit=none",
        common,
    )
    p.add_argument("settings", nargs="+", metavar="KEY=VALUE", help=", ".join(SETTABLE))
    p.set_defaults(func=cmd_set)
