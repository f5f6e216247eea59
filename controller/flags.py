"""The controller daemon's flags, declared once.

``python -m controller`` parses them (controller/__main__.py) and
``cosched controller start`` offers the very same flags and hands them on
(testbed/commands/controller.py): :func:`add_daemon_flags` declares them on
either parser and :func:`daemon_argv` turns parsed values back into the
daemon's command line, so the two cannot drift apart.

With ``forward=True`` (the ``start`` command) every flag the user does not give
stays unset and is not passed on: the daemon applies its own default.
Exceptions: ``--run-dir`` (``start`` needs it to find the socket) and
``--quantum``, whose default under ``start`` is 1 s, for interactive use
(the daemon's own is 0.1 s).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.addr import addr_arg, format_addr
from common.daemons import python_argv
from common.names import (
    AGENT_PORT,
    CONTROLLER_METRICS_PORT,
    DEFAULT_RUN_DIR,
    RUN_DIR_ENV,
    run_dir,
)
from controller.policies.registry import REGISTRY
from controller.policies.registry import names as policy_names

START_QUANTUM = 1.0
#: Time-triggered switches by default: 20 ms covers the decision, the launch of
#: nothing new and the fan-out on this host with room to spare (docs/cluster.md).
DEFAULT_LEAD_MS = 20.0
MAX_LEAD_MS = 1000.0


@dataclass(frozen=True)
class Flag:
    """One daemon flag: its argparse arguments and how to write a value back."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    to_text: Callable[[Any], str] = str

    @property
    def dest(self) -> str:
        return str(self.kwargs.get("dest") or self.name.lstrip("-").replace("-", "_"))


def _num(value: float) -> str:
    return f"{value:g}"


#: Flags that are parameters of the space-sharing (cdc) policies: flag -> parameter.
SCHEME_FLAGS: dict[str, str] = {
    "--mpl": "mpl",
    "--tick-ms": "tick_ms",
    "--spin-us": "spin_us",
    "--boost": "boost",
}


def cdc_policies() -> list[str]:
    return [e.name for e in REGISTRY.values() if e.family == "cdc"]


def _flags() -> tuple[Flag, ...]:
    # The order is the order of daemon_argv's output.
    cdc = ", ".join(cdc_policies())
    return (
        Flag(
            "--policy",
            {"required": True, "help": f"scheduling policy, one of: {', '.join(policy_names())}"},
        ),
        Flag(
            "--quantum",
            {"type": float, "default": 0.1, "metavar": "S", "help": "time slice, s (>= 0.01)"},
            _num,
        ),
        Flag(
            "--lead-ms",
            {
                "type": float,
                "default": DEFAULT_LEAD_MS,
                "metavar": "MS",
                "help": "time-triggered switches (gang policies): send each quantum's plan"
                " this long before the quantum boundary and have every agent apply it at"
                " that instant on its clock; at most half the quantum; 0 = apply on"
                f" arrival (default {DEFAULT_LEAD_MS:g})",
            },
            _num,
        ),
        Flag(
            "--ack-devices",
            {
                "choices": ["policy", "all"],
                "default": "policy",
                "help": "which I/O devices' bytes (disk, net) the agents read for each ack:"
                " those the policy uses (default; strict gang uses none), or all of them,"
                " as before issue 32 (for comparison: benchmarks/gang_quantum_loss.py)",
            },
        ),
        Flag(
            "--run-dir",
            {
                "default": None,  # set when the parser is built: the environment may change
                "metavar": "DIR",
                "help": f"socket directory (default ${RUN_DIR_ENV} or {DEFAULT_RUN_DIR})",
            },
        ),
        Flag(
            "--param",
            {"action": "append", "default": [], "metavar": "K=V", "help": "policy parameter"},
        ),
        # Scheme options (Yu & Byun 2011; docs/cdc.md). Plain strings: the policy's
        # parameter parsing checks them, so a bad value is one line.
        Flag(
            "--mpl",
            {
                "default": None,
                "metavar": "N",
                "help": f"jobs per node at most, for {cdc} (default 5; batch: always 1)",
            },
        ),
        Flag(
            "--tick-ms",
            {
                "default": None,
                "metavar": "MS",
                "help": "agents' decision period of the local scheme, ms (default: the cluster's "
                "decision interval, `cosched cluster up --decision-interval-ms`, 10 if not set)",
            },
        ),
        Flag(
            "--spin-us",
            {
                "default": None,
                "metavar": "US",
                "help": "spin time before blocking under sb, us (default 150, Yu & Byun 2011 §5.1)",
            },
        ),
        Flag(
            "--boost",
            {
                "default": None,
                "metavar": "weight|freeze",
                "help": "how the agents enforce a boost (default weight)",
            },
        ),
        Flag(
            "--cluster-state",
            {
                "default": None,
                "metavar": "PATH",
                "help": "cluster.json to drive (default: $COSCHED_STATE_DIR/cluster.json)",
            },
        ),
        Flag(
            "--agents",
            {
                "default": None,
                "metavar": "n0=IP:PORT,...",
                "help": "explicit agents instead of --cluster-state",
            },
        ),
        Flag(
            "--capacity",
            {
                "type": float,
                "default": None,
                "metavar": "CPUS",
                "help": "CPUs per node (default: from the cluster state; 1 with --agents)",
            },
            _num,
        ),
        Flag(
            "--agent-port",
            {
                "type": int,
                "default": AGENT_PORT,
                "metavar": "PORT",
                "help": f"agents' port with --cluster-state (default {AGENT_PORT})",
            },
        ),
        Flag(
            "--key-file",
            {
                "default": None,
                "metavar": "F",
                "help": "cluster HMAC key (default: the cluster state's)",
            },
        ),
        Flag(
            "--listen-tcp",
            {
                "type": addr_arg(),
                "default": None,
                "metavar": "HOST:PORT",
                "help": "also serve the API over TCP (HMAC-authenticated with the key)",
            },
            format_addr,
        ),
        Flag(
            "--user-keys",
            {
                "default": None,
                "metavar": "DIR",
                "help": "TCP clients authenticate as a user: DIR/NAME.key (0600) is NAME's key,"
                " the client is NAME whatever it claims, and the cluster key is refused on TCP"
                " (docs/security.md)",
            },
        ),
        Flag(
            "--metrics",
            {
                "type": addr_arg(),
                "default": None,
                "metavar": "HOST:PORT",
                "help": "serve the Prometheus exporter on this address (default off; its"
                f" documented port is {CONTROLLER_METRICS_PORT}, e.g."
                f" 10.212.0.254:{CONTROLLER_METRICS_PORT}; docs/monitoring.md)",
            },
            format_addr,
        ),
        Flag(
            "--checkpoint",
            {
                "default": None,
                "metavar": "PATH",
                "help": "checkpoint file (written on stop and every --checkpoint-every seconds)",
            },
        ),
        Flag(
            "--checkpoint-every",
            {
                "type": float,
                "default": 5.0,
                "metavar": "S",
                "help": "autosave period, s (default 5)",
            },
            _num,
        ),
        Flag("--restore", {"action": "store_true", "help": "resume from --checkpoint"}),
        Flag(
            "--keep-ended",
            {
                "type": int,
                "default": 200,
                "metavar": "N",
                "help": "ended jobs kept in memory (default 200); older ones move to the job "
                "archive beside the checkpoint (or in the run dir), where `jobs --all` and "
                "`job` still find them",
            },
            _num,
        ),
        Flag(
            "--connect-timeout",
            {
                "type": float,
                "default": 15.0,
                "metavar": "S",
                "help": "wait this long for every agent at start (default 15); then run with "
                "the nodes that answered and keep trying the others, or stop if none did",
            },
            _num,
        ),
        Flag(
            "--operator",
            {
                "action": "append",
                "default": [],
                "metavar": "USER",
                "help": "extra operator user (repeatable; root and the daemon's user always are)",
            },
        ),
        Flag(
            "--fifo-priority",
            {
                "type": int,
                "default": 20,
                "metavar": "P",
                "help": "the daemon's SCHED_FIFO priority (0: ordinary scheduling; default 20)",
            },
        ),
        Flag(
            "--log-level",
            {"default": "INFO", "metavar": "LEVEL", "help": "DEBUG, INFO, WARNING (default INFO)"},
        ),
    )


DAEMON_FLAGS = _flags()


def add_daemon_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, forward: bool = False
) -> None:
    """Declare the daemon's flags on ``parser`` (``forward``: for ``cosched controller start``)."""
    for flag in DAEMON_FLAGS:
        kwargs = dict(flag.kwargs)
        if flag.name == "--run-dir":
            kwargs["default"] = run_dir()
        elif flag.name == "--quantum" and forward:
            kwargs["default"] = START_QUANTUM
            kwargs["help"] = f"time slice, s (>= 0.01; default {START_QUANTUM:g} here)"
        elif forward and kwargs.get("action") not in ("append", "store_true"):
            kwargs["default"] = None  # unset: the daemon's default applies
        parser.add_argument(flag.name, **kwargs)


def daemon_argv(args: argparse.Namespace, python: str = sys.executable) -> list[str]:
    """The ``python -I|-P -m controller`` command line for the daemon flags in ``args``
    (common/daemons.py: never importing from the caller's directory)."""
    argv = python_argv("controller", python=python)
    for flag in DAEMON_FLAGS:
        value = getattr(args, flag.dest, None)
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag.name)
        elif isinstance(value, list):
            for item in value:
                argv += [flag.name, flag.to_text(item)]
        else:
            argv += [flag.name, flag.to_text(value)]
    return argv
