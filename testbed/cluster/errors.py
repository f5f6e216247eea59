"""The one exception type the cluster code raises for problems a user can act on."""

from __future__ import annotations

from common.errors import CoschedError


class ClusterError(CoschedError):
    """A clear, user-facing failure (bad input, missing privilege or kernel feature).

    ``cosched`` prints it as one line, ``cosched: error: ...``, and exits with
    status 2 (as the cluster commands always have); no traceback, because the
    message is meant to tell the user what to do.
    """

    exit_code = 2
