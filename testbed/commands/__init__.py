"""The ``cosched`` command groups, one module each.

==========================  ===============================================
module                      commands
==========================  ===============================================
``simulate``                ``simulate``, ``policies``
``cluster``                 ``cluster up|status|down``, ``clean``
``controller``              ``controller start|stop|status|checkpoint|set``
``jobs``                    ``submit``, ``jobs``, ``matrix``, ``slice``, ``kill``, ``class``
``experiment``              ``experiment list|run|report|ledger|migrate``
``calibrate``               ``calibrate``
``app``                     ``app list|run``
``monitor``                 ``monitor up|down|status``
``remote``                  ``remote status|start|stop|logs|clean``
``host``                    ``host cgroups status|v2-only|restore``
==========================  ===============================================

Each module exposes ``add_commands(subparsers)``; each command is a function
``cmd_<name>(args) -> int``. Commands raise :class:`common.errors.CoschedError`
for anything a user can fix; ``testbed.cli.main`` catches it once and prints
one line. ``_api`` holds what ``controller`` and ``jobs`` share: reaching the
controller.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any


def command_parser(
    subparsers: Any,
    name: str,
    help_: str,
    description: str,
    examples: str,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` teaches: a description and ``examples:``."""
    text = "\n\n".join(textwrap.fill(part, 79) for part in description.split("\n\n"))
    return subparsers.add_parser(  # type: ignore[no-any-return]
        name,
        help=help_,
        description=text,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )
