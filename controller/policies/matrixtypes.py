"""The Ousterhout matrix's value types (controller/policies/matrix.py re-exports them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job sits: its row, its nodes (ascending) and, for a buddy-placed job, the
    aligned block it holds in the row (ascending, a superset of ``nodes``; empty when
    the job holds just its nodes)."""

    slot: int
    nodes: tuple[int, ...]
    block: tuple[int, ...] = ()

    @property
    def held(self) -> tuple[int, ...]:
        """The cells the job holds in its row: its block, or its nodes."""
        return self.block or self.nodes


@dataclass(frozen=True, slots=True)
class RowsSnapshot:
    """Per-row facts of one matrix state (:meth:`OusterhoutMatrix.snapshot`), by row index."""

    version: int  # OusterhoutMatrix.version it describes
    stamps: tuple[int, ...]  # row_stamp of every row
    jobs: tuple[tuple[int, ...], ...]  # jobs_in of every row
    busy: tuple[int, ...]  # row_mask of every row


@dataclass(frozen=True, slots=True)
class Compaction:
    """What :meth:`OusterhoutMatrix.compact` did.

    ``slot_map`` maps every surviving row's old index to its new index;
    rows absent from it were deleted. ``moved`` maps a relocated job to
    (old row, new row), the old row in the numbering before compaction and the
    new one in the numbering after it.
    """

    slot_map: Mapping[int, int]
    moved: Mapping[int, tuple[int, int]]

    @property
    def changed(self) -> bool:
        """True if any row was deleted or any job moved."""
        return bool(self.moved) or any(old != new for old, new in self.slot_map.items())
