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
import sys
from collections.abc import Sequence

from common.errors import CoschedError
from common.exits import report
from testbed.commands import controller, experiment, jobs, simulate

PROG = "cosched"

DESCRIPTION = """\
cosched: coscheduling parallel jobs, emulated on real Linux processes or simulated.

  cosched policies                          list the scheduling policies and their parameters
  cosched simulate --policy easy --workload lublin --nodes 128
                                            run a policy in the discrete-event simulator
  cosched simulate --policy gang,paired-gang,easy --workload lublin --nodes 16 \\
                   --profile heterogeneous --loads 0.5,0.7,0.9 --plot
                                            compare policies over a load sweep, with plots
  cosched cluster up --nodes 4              build a local emulated cluster (root)
  cosched controller start --policy paired-gang
                                            start the controller on that cluster
  cosched submit --size 4 -- python3 -m apps.synthetic --gio 20 --gcomp 0
  cosched jobs | matrix --watch | slice --size 2 | kill JOB | class JOB CLASS
                                            gangster-like views and controls (seed 003)
  cosched experiment run experiments/paired-vs-gang.toml
                                            a live experiment and its report (root)

Every COMMAND has --help with a description and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    simulate.add_commands(sub)
    controller.add_commands(sub)
    jobs.add_commands(sub)
    experiment.add_commands(sub)
    try:
        from testbed.commands import cluster
    except ImportError:  # the cluster needs pyroute2; the simulator does not
        pass
    else:
        cluster.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rc: int = args.func(args)
    except CoschedError as err:
        return report(PROG, err)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
