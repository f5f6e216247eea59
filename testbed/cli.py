"""The ``cosched`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from testbed import simulate_cmd

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
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cosched",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    simulate_cmd.add_commands(sub)
    from testbed.controller_cli import add_controller_commands

    add_controller_commands(sub)
    from testbed.experiment.cli import add_experiment_commands

    add_experiment_commands(sub)
    try:
        from testbed.cluster.cli import add_cluster_commands
    except ImportError:  # the cluster needs pyroute2; the simulator does not
        pass
    else:
        add_cluster_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
