"""The ``cosched`` command line: the parser and the one place errors are reported.

The command groups live in :mod:`testbed.commands`, one module each. Every
failure a user can act on is a :class:`common.errors.CoschedError`;
:func:`main` catches it here, once, and prints one line on stderr,
``cosched: error: <what, why> — <how to fix>``, exiting with the error's
status (2 for usage errors, 1 otherwise). Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from common.errors import CoschedError
from common.exits import report

PROG = "cosched"

# Module of testbed.commands -> the top-level commands it registers. The
# parser imports only the module of the command being run, so that
# `cosched simulate` does not pay for the cluster, agent and controller
# client code (issue 11: start-up was most of a 2 s KTH run). `cosched`
# without a command, --help or an unknown command builds every group.
# tests/unit/testbed/sim/test_engine_fastpaths.py checks this table against what the
# modules register.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "simulate": ("simulate", "policies"),
    "controller": ("controller",),
    "jobs": ("submit", "jobs", "matrix", "slice", "kill", "class"),
    "experiment": ("experiment",),
    "calibrate": ("calibrate",),
    "app": ("app",),
    "cluster": ("cluster", "clean"),
    "monitor": ("monitor",),
    "remote": ("remote",),
    "host": ("host",),
}

DESCRIPTION = """\
cosched: coscheduling parallel jobs, on real Linux processes or simulated.

  cosched policies                          list the scheduling policies and their parameters
  cosched simulate --policy easy --workload lublin --nodes 128
                                            run a policy in the discrete-event simulator
  cosched simulate --policy gang,paired-gang,easy --workload lublin --nodes 16 \\
                   --profile heterogeneous --loads 0.5,0.7,0.9 --plot
                                            compare policies over a load sweep, with plots
  cosched cluster up --nodes 4              build a local cluster (root)
  cosched controller start --policy paired-gang
                                            start the controller on that cluster
  cosched submit --size 4 -- python3 -m apps.synthetic --gio 20 --gcomp 0
  cosched jobs | matrix --watch | slice --size 2 | kill JOB | class JOB CLASS
                                            gangster-like views and controls (Gorda & Brooks 1991)
  cosched experiment list | run SPEC | report RESULTS | ledger
                                            studies from their specs, live (root) or
                                            simulated, their reports, docs/reproduction.md
  cosched calibrate                         measure the simulator's interference and
                                            context switch on the live cluster (root)
  cosched app list | run cg --ranks 4       the apps (NPB-like kernels, synthetic presets,
                                            QCRD) as local processes, no scheduler
  cosched monitor up | status | down        Prometheus scraping the local cluster's
                                            agents and controller (rules, alerts)
  cosched remote status | start | stop | logs | clean -i INVENTORY
                                            operate deployed (or --ssh local) nodes
                                            over SSH, hosts from an Ansible inventory
  cosched host cgroups [v2-only | restore]  this host's cgroup hierarchies (root to change)

Every COMMAND has --help with a description and examples.
"""


def _module_of(command: str | None) -> str | None:
    for module, commands in COMMAND_MODULES.items():
        if command in commands:
            return module
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only the group that registers it (faster start-up)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    only = _module_of(command)
    for module in COMMAND_MODULES if only is None else (only,):
        try:
            group = importlib.import_module(f"testbed.commands.{module}")
        except ImportError:  # the cluster needs pyroute2; the simulator does not
            if module != "cluster":
                raise
            continue
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the command is the first word (the top-level parser has no options but --help)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    tail: list[str] | None = None
    if command == "app" and "--" in argv:
        # argparse hands a nested subcommand's "--" back up as unrecognized: split here
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1 :]
    args = build_parser(command).parse_args(argv)
    if tail is not None:
        args.extra = [*getattr(args, "extra", []), *tail]
    args.cli_argv = argv if tail is None else [*argv, "--", *tail]  # what made a results.json
    try:
        rc: int = args.func(args)
    except CoschedError as err:
        return report(PROG, err)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`cosched simulate ... | head`): not an error of ours;
        # point stdout at /dev/null so the interpreter's final flush stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return rc


if __name__ == "__main__":
    sys.exit(main())
