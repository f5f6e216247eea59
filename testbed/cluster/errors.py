"""The one exception type the cluster code raises for problems a user can act on."""

from __future__ import annotations


class ClusterError(Exception):
    """A clear, user-facing failure (bad input, missing privilege or kernel feature).

    The CLI prints ``str(err)`` and exits non-zero; no traceback, because the
    message is meant to tell the user what to do.
    """
