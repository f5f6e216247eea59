"""Kept so ``from testbed.cluster import cli; cli.main([...])`` still works.

The cluster commands live in :mod:`testbed.commands.cluster`; :func:`main` is
the whole ``cosched`` command line (``testbed.cli.main``), which reports
errors in one line.
"""

from __future__ import annotations

from testbed.cli import main
from testbed.commands.cluster import add_commands as add_cluster_commands

__all__ = ["add_cluster_commands", "main"]
