"""The Ousterhout matrix: rows are time slots, columns are nodes (seed 000 §2.1).

A cell holds the id of the job whose process sits on that node in that slot,
or ``None``. A gang of size ``k`` occupies ``k`` distinct nodes of one row.

Conventions chosen here where the papers say nothing precise:

* **Placement.** ``first-fit`` takes the lowest-numbered row with at least
  ``k`` free cells; ``best-fit`` takes the row that would be left with the
  fewest free cells (ties: the lowest-numbered row). In both cases a new row
  is opened only when no existing row fits, and only if the multiprogramming
  level (``max_slots``, None = unlimited) allows it. Within the chosen row the
  job gets the ``k`` lowest-numbered free nodes -- a deterministic rule that
  packs jobs towards node 0 and leaves the high nodes as one free block.
* **Compaction** (:meth:`OusterhoutMatrix.compact`). Empty rows are deleted.
  Then, from the last row upwards, a row is *eliminated* when every one of its
  jobs can move, keeping its nodes (processes do not migrate between nodes),
  into some earlier row where those nodes are free; each job goes to the
  earliest such row. A row whose jobs cannot all move is left untouched, so
  jobs are only shuffled when doing so removes a row.
* **Alternate scheduling** (seed 000 §2.6, after Feitelson's alternate
  scheduling). :meth:`OusterhoutMatrix.alternates` scans the other rows
  cyclically starting after the selected one (so the rows that wait longest
  for their turn are served first), jobs in a row in node order, and takes
  each job whose nodes are all idle and not already taken by an earlier pick.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from controller.policies.base import PolicyError

FIRST_FIT = "first-fit"
BEST_FIT = "best-fit"
PLACEMENTS: tuple[str, ...] = (FIRST_FIT, BEST_FIT)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job sits: its row and its nodes (ascending)."""

    slot: int
    nodes: tuple[int, ...]


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


class OusterhoutMatrix:
    """Rows = time slots, columns = nodes; cells hold job ids (seed 000 §2.1)."""

    def __init__(self, nodes: int, max_slots: int | None = None) -> None:
        if nodes < 1:
            raise PolicyError(f"nodes must be >= 1, got {nodes}")
        if max_slots is not None and max_slots < 1:
            raise PolicyError(f"max_slots must be >= 1 or None, got {max_slots}")
        self.nodes = nodes
        self.max_slots = max_slots
        self._rows: list[list[int | None]] = []
        self._where: dict[int, Placement] = {}
        # jobs_in() is asked for every row at every quantum; rows change rarely.
        self._jobs_cache: dict[int, tuple[int, ...]] = {}

    # ----------------------------------------------------------------- queries
    @property
    def slot_count(self) -> int:
        """Rows currently in the matrix (empty rows included until compaction)."""
        return len(self._rows)

    @property
    def job_count(self) -> int:
        """Jobs placed in the matrix."""
        return len(self._where)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._where

    def jobs(self) -> Iterator[int]:
        """Every placed job, by row then lowest node."""
        for slot in range(len(self._rows)):
            yield from self.jobs_in(slot)

    def can_add_slot(self) -> bool:
        """True if the multiprogramming level allows one more row."""
        return self.max_slots is None or len(self._rows) < self.max_slots

    def cell(self, slot: int, node: int) -> int | None:
        """Job in ``slot`` on ``node``, or None."""
        return self._row(slot)[node]

    def jobs_in(self, slot: int) -> tuple[int, ...]:
        """Jobs of a row, ordered by their lowest node."""
        cached = self._jobs_cache.get(slot)
        if cached is not None:
            return cached
        seen: dict[int, None] = {}
        for job in self._row(slot):
            if job is not None:
                seen[job] = None
        jobs = tuple(seen)
        self._jobs_cache[slot] = jobs
        return jobs

    def free_nodes(self, slot: int) -> tuple[int, ...]:
        """Nodes with an empty cell in ``slot`` (ascending)."""
        return tuple(n for n, job in enumerate(self._row(slot)) if job is None)

    def busy_nodes(self, slot: int) -> tuple[int, ...]:
        """Nodes with a job in ``slot`` (ascending)."""
        return tuple(n for n, job in enumerate(self._row(slot)) if job is not None)

    def placement_of(self, job_id: int) -> Placement | None:
        """Row and nodes of a job, or None if it is not placed."""
        return self._where.get(job_id)

    def slot_of(self, job_id: int) -> int:
        """Row of a placed job; PolicyError if unknown."""
        return self._placed(job_id).slot

    def nodes_of(self, job_id: int) -> tuple[int, ...]:
        """Nodes of a placed job; PolicyError if unknown."""
        return self._placed(job_id).nodes

    def render(self) -> list[list[int | None]]:
        """A copy of the matrix, one list per row, for displays and tests."""
        return [list(row) for row in self._rows]

    def render_text(self) -> list[str]:
        """One line per row, '.' for an empty cell (for a text display)."""
        width = max((len(str(j)) for j in self._where), default=1)
        return [
            " ".join("." * width if j is None else str(j).rjust(width) for j in row)
            for row in self._rows
        ]

    # --------------------------------------------------------------- placement
    def find(self, size: int, placement: str = FIRST_FIT) -> Placement | None:
        """Where a gang of ``size`` would go (without placing it), or None.

        The returned slot equals :attr:`slot_count` when a new row would be
        opened.
        """
        self._check_size(size)
        if placement not in PLACEMENTS:
            raise PolicyError(f"unknown placement {placement!r}; expected one of {PLACEMENTS}")
        best: tuple[int, int] | None = None  # (free cells left, slot)
        for slot in range(len(self._rows)):
            free = self.free_nodes(slot)
            if len(free) < size:
                continue
            if placement == FIRST_FIT:
                return Placement(slot, free[:size])
            left = len(free) - size
            if best is None or left < best[0]:
                best = (left, slot)
        if best is not None:
            slot = best[1]
            return Placement(slot, self.free_nodes(slot)[:size])
        if self.can_add_slot():
            return Placement(len(self._rows), tuple(range(size)))
        return None

    def place(self, job_id: int, size: int, placement: str = FIRST_FIT) -> Placement | None:
        """Place a gang by the placement rule; None if no row can take it."""
        where = self.find(size, placement)
        if where is not None:
            self.place_at(job_id, where.slot, where.nodes)
        return where

    def place_at(self, job_id: int, slot: int, nodes: Iterable[int]) -> Placement:
        """Put a job on given free cells; ``slot == slot_count`` opens a new row."""
        if job_id in self._where:
            raise PolicyError(f"job {job_id} is already placed")
        chosen = tuple(sorted(set(nodes)))
        if not chosen:
            raise PolicyError(f"job {job_id}: no nodes given")
        if chosen[0] < 0 or chosen[-1] >= self.nodes:
            raise PolicyError(f"job {job_id}: node out of range in {chosen}")
        if slot == len(self._rows):
            if not self.can_add_slot():
                raise PolicyError(f"job {job_id}: no new slot allowed (max_slots={self.max_slots})")
            self._rows.append([None] * self.nodes)
        row = self._row(slot)
        busy = [n for n in chosen if row[n] is not None]
        if busy:
            raise PolicyError(f"job {job_id}: nodes {busy} of slot {slot} are occupied")
        for n in chosen:
            row[n] = job_id
        self._jobs_cache.clear()
        where = Placement(slot, chosen)
        self._where[job_id] = where
        return where

    def remove(self, job_id: int) -> Placement:
        """Free a job's cells. Rows are not deleted here: see :meth:`compact`."""
        where = self._placed(job_id)
        row = self._rows[where.slot]
        for n in where.nodes:
            row[n] = None
        self._jobs_cache.clear()
        del self._where[job_id]
        return where

    def move(self, job_id: int, slot: int) -> Placement:
        """Move a job to another row on the same nodes (``slot_count`` = new row)."""
        old = self._placed(job_id)
        if slot == old.slot:
            return old
        if slot < len(self._rows):
            row = self._row(slot)
            if any(row[n] is not None for n in old.nodes):
                raise PolicyError(f"job {job_id}: its nodes are not free in slot {slot}")
        elif slot != len(self._rows) or not self.can_add_slot():
            raise PolicyError(f"job {job_id}: cannot move to slot {slot}")
        self.remove(job_id)
        return self.place_at(job_id, slot, old.nodes)

    def compact(self) -> Compaction:
        """Delete empty rows, then eliminate trailing rows whose jobs fit above.

        See the module docstring for the exact rule. Returns the row renumbering
        and the jobs that moved, so callers can keep round-robin pointers and
        per-slot data consistent.
        """
        moved_old: dict[int, tuple[int, int]] = {}  # job -> (original row, target row)
        rows = self._rows
        # Work on original indices; `alive` marks rows not (yet) deleted.
        alive = [any(c is not None for c in row) for row in rows]
        origin = {job: where.slot for job, where in self._where.items()}
        for r in range(len(rows) - 1, 0, -1):
            if not alive[r]:
                continue
            plan: dict[int, int] = {}
            trial = {s: list(rows[s]) for s in range(r) if alive[s]}
            ok = True
            for job in self.jobs_in(r):
                nodes = self._where[job].nodes
                target = next(
                    (s for s in sorted(trial) if all(trial[s][n] is None for n in nodes)), None
                )
                if target is None:
                    ok = False
                    break
                for n in nodes:
                    trial[target][n] = job
                plan[job] = target
            if not ok:
                continue
            self._jobs_cache.clear()
            for job, target in plan.items():
                nodes = self._where[job].nodes
                for n in nodes:
                    rows[r][n] = None
                    rows[target][n] = job
                self._where[job] = Placement(target, nodes)
                moved_old[job] = (origin[job], target)
            alive[r] = False
        slot_map: dict[int, int] = {}
        new_rows: list[list[int | None]] = []
        for old, row in enumerate(rows):
            if alive[old]:
                slot_map[old] = len(new_rows)
                new_rows.append(row)
        self._rows = new_rows
        self._jobs_cache.clear()
        for job, where in list(self._where.items()):
            self._where[job] = Placement(slot_map[where.slot], where.nodes)
        moved = {job: (old, slot_map[target]) for job, (old, target) in moved_old.items()}
        return Compaction(slot_map=slot_map, moved=moved)

    # --------------------------------------------------------------- alternates
    def alternates(
        self,
        slot: int,
        *,
        skip_slots: Collection[int] = (),
        busy_nodes: Collection[int] = (),
        accept: Callable[[int], bool] | None = None,
    ) -> tuple[int, ...]:
        """Jobs of other rows that can run on the idle nodes of ``slot`` (seed 000 §2.6).

        A job qualifies when all its nodes are free in ``slot``, none is in
        ``busy_nodes`` (e.g. nodes used by a paired row), its row is not in
        ``skip_slots`` and ``accept(job)`` holds. Rows are scanned cyclically
        from ``slot + 1``; picks never share a node.
        """
        self._row(slot)
        taken = set(self.busy_nodes(slot)) | set(busy_nodes)
        picked: list[int] = []
        count = len(self._rows)
        for step in range(1, count):
            other = (slot + step) % count
            if other in skip_slots:
                continue
            for job in self.jobs_in(other):
                nodes = self._where[job].nodes
                if any(n in taken for n in nodes):
                    continue
                if accept is not None and not accept(job):
                    continue
                taken.update(nodes)
                picked.append(job)
        return tuple(picked)

    # ----------------------------------------------------------------- checks
    def check(self) -> None:
        """Assert the cell/index invariants (used by tests); PolicyError if broken."""
        seen: dict[int, tuple[int, list[int]]] = {}
        for s, row in enumerate(self._rows):
            if len(row) != self.nodes:
                raise PolicyError(f"row {s} has {len(row)} cells, expected {self.nodes}")
            for n, job in enumerate(row):
                if job is None:
                    continue
                if job in seen and seen[job][0] != s:
                    raise PolicyError(f"job {job} appears in rows {seen[job][0]} and {s}")
                seen.setdefault(job, (s, []))[1].append(n)
        if set(seen) != set(self._where):
            raise PolicyError("cell contents and job index disagree")
        for job, (s, nodes) in seen.items():
            if self._where[job] != Placement(s, tuple(nodes)):
                raise PolicyError(f"job {job}: index says {self._where[job]}, cells say {s}")
        if self.max_slots is not None and len(self._rows) > self.max_slots:
            raise PolicyError(f"{len(self._rows)} rows exceed max_slots={self.max_slots}")

    # ---------------------------------------------------------------- helpers
    def _row(self, slot: int) -> list[int | None]:
        if not 0 <= slot < len(self._rows):
            raise PolicyError(f"no slot {slot} (matrix has {len(self._rows)})")
        return self._rows[slot]

    def _placed(self, job_id: int) -> Placement:
        where = self._where.get(job_id)
        if where is None:
            raise PolicyError(f"job {job_id} is not in the matrix")
        return where

    def _check_size(self, size: int) -> None:
        if not 1 <= size <= self.nodes:
            raise PolicyError(f"gang size {size} does not fit {self.nodes} nodes")
