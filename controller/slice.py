"""The ``slice`` view of gangster (Gorda & Brooks 1991 §3, Figs. 8-9): where would a new job run
at 100 %?

"This command causes gangster to space-wise pack all the known jobs as best it
can. The user can subsequently see any time-wise holes that may exist on the
machine (viewed as vertical groups of dots), and thus cleverly place a job."
(Gorda & Brooks 1991 §3)

Pure: no clock, no I/O; the controller calls :func:`slice_matrix` for the
``slice`` op (docs/controller-api.md) and ``cosched slice`` renders the result.

**Packing.** Every known job is a gang of ``size`` nodes. Rows are time slices.
Jobs are taken largest first (ties by job id, for a deterministic answer) and
each goes into the first row with room (first-fit decreasing), at the lowest
free node of that row. Because a row only ever fills from the left and nothing
is removed, a row's free nodes are always one run on its right, so every job's
nodes are contiguous without any search. First-fit decreasing minimises the
number of rows in practice (at most 11/9 of the optimum plus one row), which is what
"pack as best it can" asks: fewer rows means more time for every job.

**Free runs (the definition).** Under time slicing, a node that holds a job in
any row gives that job some of its time. A new job therefore gets 100 % of
its nodes' time exactly when all its nodes are free in *every* packed row: it
can then run in every slot (alternate scheduling, Wiseman & Feitelson 2003 §2.6) and never
shares a node. Placing it in a row with room gives it only 1/rows of the
time, and a new row of its own gives it 1/(rows+1). So ``free_runs`` are the
maximal runs of consecutive nodes free in every row ("vertical groups of
dots"), as inclusive ``(first, last)`` node indices; with no jobs at all the
whole machine is one run. ``fits`` says whether a job of ``size`` nodes fits
in one of them (with ``size`` None: whether any node is free in every row).

With left-aligned rows the nodes free in every row are the nodes to the right
of the fullest row; the packing does not try to shrink that fullest row at the
cost of extra rows, because that would slow every existing job down.
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
