"""What a sweep refuses or reports: one line each, through :class:`common.errors.CoschedError`."""

from __future__ import annotations

from common.errors import CoschedError, UsageError


class SweepUsageError(UsageError):
    """Options a sweep cannot run with (``--workers 0``, a malformed scheduler address)."""


class SchedulerError(CoschedError):
    """The Dask scheduler cannot be used: unreachable, or its workers run other code."""


class StoreError(CoschedError):
    """The result store cannot be used as it is (unreadable, another format version)."""


class RunsFailed(CoschedError):
    """Some runs raised; their errors are stored and listed (exit status 1).

    The message is several lines on purpose: one per failed run, so the
    user sees which parameters failed and why.
    """
