"""The ``slice`` view of gangster (Gorda & Brooks 1991 §3, Figs. 8-9): where would a new job run
at 100 %?

Pure: no clock, no I/O; the controller calls :func:`slice_matrix` for the ``slice`` op
(docs/controller-api.md) and ``cosched slice`` renders the result. The packing and the
definition of a free run: docs/controller.md, "The slice view".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SliceResult:
    """Packed rows (node -> job id or None), runs free in every row, and the verdict."""

    packed: list[list[int | None]]
    free_runs: list[tuple[int, int]]
    fits: bool
    size: int | None = None

    def to_dict(self) -> dict[str, object]:
        """The ``slice`` op's result shape (docs/controller-api.md)."""
        return {
            "packed": [list(row) for row in self.packed],
            "free_runs": [[a, b] for a, b in self.free_runs],
            "size": self.size,
            "fits": self.fits,
        }


def pack(nodes: int, jobs: Mapping[int, int]) -> list[list[int | None]]:
    """First-fit decreasing, left-aligned, one contiguous run per job."""
    if nodes < 1:
        raise ValueError(f"the machine needs at least one node, got {nodes}")
    for job_id, size in jobs.items():
        if not 1 <= size <= nodes:
            raise ValueError(f"job {job_id} has size {size}, outside 1..{nodes}")
    rows: list[list[int | None]] = []
    used: list[int] = []  # nodes taken from the left of each row
    for job_id, size in sorted(jobs.items(), key=lambda kv: (-kv[1], kv[0])):
        r = next((i for i, taken in enumerate(used) if nodes - taken >= size), len(rows))
        if r == len(rows):
            rows.append([None] * nodes)
            used.append(0)
        start = used[r]
        rows[r][start : start + size] = [job_id] * size
        used[r] = start + size
    return rows


def free_runs(nodes: int, rows: list[list[int | None]]) -> list[tuple[int, int]]:
    """Maximal runs of nodes that are free (None) in every row, inclusive bounds."""
    runs: list[tuple[int, int]] = []
    first: int | None = None
    for n in range(nodes):
        if all(row[n] is None for row in rows):
            if first is None:
                first = n
        elif first is not None:
            runs.append((first, n - 1))
            first = None
    if first is not None:
        runs.append((first, nodes - 1))
    return runs


def slice_matrix(nodes: int, jobs: Mapping[int, int], size: int | None = None) -> SliceResult:
    """Pack ``jobs`` (job id -> gang size) on ``nodes`` nodes; where does a new ``size`` fit?"""
    if size is not None and size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    rows = pack(nodes, jobs)
    runs = free_runs(nodes, rows)
    need = 1 if size is None else size
    fits = any(last - first + 1 >= need for first, last in runs)
    return SliceResult(packed=rows, free_runs=runs, fits=fits, size=size)
