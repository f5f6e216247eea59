"""The library's one error type: what went wrong, with which rank, in one line."""

from __future__ import annotations


class MPError(RuntimeError):
    """A message-passing failure of this job (bad frame, lost peer, bad argument)."""
