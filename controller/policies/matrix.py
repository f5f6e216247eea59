"""The Ousterhout matrix: rows are time slots, columns are nodes (Wiseman & Feitelson 2003 §2.1).

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
* **Buddy placement** (``buddy``): a gang of ``k`` holds an aligned block of the least
  power of two >= ``k`` in its row and runs on its lowest ``k`` nodes; the rest of the
  block is held from placement but idle, so alternates may use it. The rule, what the
  papers say and what we chose: :mod:`controller.policies.buddy`.
* **Compaction** (:meth:`OusterhoutMatrix.compact`). Empty rows are deleted.
  Then, from the last row upwards, a row is *eliminated* when every one of its
  jobs can move, keeping its nodes (processes do not migrate between nodes),
  into some earlier row where those nodes are free; each job goes to the
  earliest such row. A row whose jobs cannot all move is left untouched, so
  jobs are only shuffled when doing so removes a row. A buddy-placed job moves
  only to a row where its whole block is free, so blocks stay aligned.
* **Alternate scheduling** (Wiseman & Feitelson 2003 §2.6, after Feitelson's alternate
  scheduling). :meth:`OusterhoutMatrix.alternates` scans the other rows
  cyclically starting after the selected one (so the rows that wait longest
  for their turn are served first), jobs in a row in node order, and takes
  each job whose nodes are all idle and not already taken by an earlier pick.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from itertools import compress, repeat
from operator import is_, is_not
from typing import cast

from controller.policies.base import PolicyError
from controller.policies.buddy import buddy_block
from controller.policies.matrixcheck import check_matrix
from controller.policies.matrixtypes import Compaction, RowsSnapshot
from controller.policies.matrixtypes import Placement as Placement  # re-exported

FIRST_FIT = "first-fit"
BEST_FIT = "best-fit"
BUDDY = "buddy"
PLACEMENTS: tuple[str, ...] = (FIRST_FIT, BEST_FIT, BUDDY)


class OusterhoutMatrix:
    """Rows = time slots, columns = nodes; cells hold job ids (Wiseman & Feitelson 2003 §2.1)."""

    def __init__(self, nodes: int, max_slots: int | None = None) -> None:
        if nodes < 1:
            raise PolicyError(f"nodes must be >= 1, got {nodes}")
        if max_slots is not None and max_slots < 1:
            raise PolicyError(f"max_slots must be >= 1 or None, got {max_slots}")
        self.nodes = nodes
        self.max_slots = max_slots
        self._rows: list[list[int | None]] = []
        self._where: dict[int, Placement] = {}
        self._mask: dict[int, int] = {}  # job -> its nodes as a bit set
        self._held: dict[int, int] = {}  # job -> the cells it holds (its block) as a bit set
        #: Bumped by every change of the cells; callers key derived data on it.
        self.version = 0
        # Each row carries a stamp, renewed whenever its cells change and kept
        # when compaction renumbers it. Per-row queries are asked at every
        # quantum and rows change rarely, so their answers are cached by stamp.
        self._stamps: list[int] = []
        self._next_stamp = 0
        self._jobs_cache: dict[int, tuple[int, ...]] = {}
        self._busy_cache: dict[int, tuple[int, ...]] = {}
        self._free_cache: dict[int, tuple[int, ...]] = {}
        self._row_mask_cache: dict[int, int] = {}
        self._claimed_cache: dict[int, int] = {}
        self._snapshot: RowsSnapshot | None = None

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
        stamp = self.row_stamp(slot)
        cached = self._jobs_cache.get(stamp)
        if cached is not None:
            return cached
        # first appearance order, empty cells dropped (C loops: rows are wide)
        seen: dict[int | None, None] = dict.fromkeys(self._rows[slot])
        seen.pop(None, None)
        jobs = cast(tuple[int, ...], tuple(seen))
        self._jobs_cache[stamp] = jobs
        return jobs

    def snapshot(self) -> RowsSnapshot:
        """Stamps, jobs and busy-node bit sets of every row (one object per state)."""
        snap = self._snapshot
        if snap is None or snap.version != self.version:
            slots = range(len(self._rows))
            snap = RowsSnapshot(
                self.version,
                tuple(self._stamps),
                tuple(map(self.jobs_in, slots)),
                tuple(map(self.row_mask, slots)),
            )
            self._snapshot = snap
        return snap

    def row_stamp(self, slot: int) -> int:
        """A token of the row's contents: it changes whenever the row's cells
        change, and stays with the row when compaction renumbers it. Tokens are
        never reused, so callers may cache per-row data under them."""
        if 0 <= slot < len(self._stamps):
            return self._stamps[slot]
        raise PolicyError(f"no slot {slot} (matrix has {len(self._rows)})")

    def free_nodes(self, slot: int) -> tuple[int, ...]:
        """Nodes of ``slot`` a new job may take (ascending): empty, held by no block."""
        stamp = self.row_stamp(slot)
        cached = self._free_cache.get(stamp)
        if cached is None:
            row = self._rows[slot]
            cached = tuple(compress(range(len(row)), map(is_, row, repeat(None))))
            claimed = self.claimed_mask(slot)
            if claimed != self.row_mask(slot):
                cached = tuple(n for n in cached if not claimed >> n & 1)
            self._free_cache[stamp] = cached
        return cached

    def claimed_mask(self, slot: int) -> int:
        """Cells of ``slot`` its jobs hold (their nodes, buddy blocks) as a bit set."""
        stamp = self.row_stamp(slot)
        cached = self._claimed_cache.get(stamp)
        if cached is None:
            cached = 0
            held = self._held
            for job in self.jobs_in(slot):
                cached |= held[job]
            self._claimed_cache[stamp] = cached
        return cached

    def held_mask(self, job_id: int) -> int:
        """The cells a placed job holds in its row (its block, or its nodes) as a bit set."""
        mask = self._held.get(job_id)
        if mask is None:
            raise PolicyError(f"job {job_id} is not in the matrix")
        return mask

    def busy_nodes(self, slot: int) -> tuple[int, ...]:
        """Nodes with a job in ``slot`` (ascending)."""
        stamp = self.row_stamp(slot)
        cached = self._busy_cache.get(stamp)
        if cached is None:
            row = self._rows[slot]
            cached = tuple(compress(range(len(row)), map(is_not, row, repeat(None))))
            self._busy_cache[stamp] = cached
        return cached

    def row_mask(self, slot: int) -> int:
        """Busy nodes of ``slot`` as a bit set (bit ``n`` = node ``n``)."""
        stamp = self.row_stamp(slot)
        cached = self._row_mask_cache.get(stamp)
        if cached is None:
            cached = 0
            masks = self._mask
            for job in self.jobs_in(slot):
                cached |= masks[job]
            self._row_mask_cache[stamp] = cached
        return cached

    def job_mask(self, job_id: int) -> int:
        """Nodes of a placed job as a bit set; PolicyError if unknown."""
        mask = self._mask.get(job_id)
        if mask is None:
            raise PolicyError(f"job {job_id} is not in the matrix")
        return mask

    def row_cells(self, slot: int) -> tuple[int | None, ...]:
        """The cells of ``slot``, node by node (a copy)."""
        return tuple(self._row(slot))

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
        if placement == BUDDY:
            return self._find_buddy(size)
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

    def _find_buddy(self, size: int) -> Placement | None:
        """:meth:`find` for ``buddy``: the first row with a free aligned block."""
        for slot in range(len(self._rows)):
            got = buddy_block(self.claimed_mask(slot), self.nodes, size)
            if got is not None:
                return Placement(slot, *got)
        if self.can_add_slot():
            got = buddy_block(0, self.nodes, size)
            if got is not None:  # always: an empty row has the block at 0
                return Placement(len(self._rows), *got)
        return None

    def place(self, job_id: int, size: int, placement: str = FIRST_FIT) -> Placement | None:
        """Place a gang by the placement rule; None if no row can take it."""
        where = self.find(size, placement)
        if where is not None:
            self.place_at(job_id, where.slot, where.nodes, where.block)
        return where

    def place_at(
        self, job_id: int, slot: int, nodes: Iterable[int], block: Iterable[int] = ()
    ) -> Placement:
        """Put a job on given free cells; ``slot == slot_count`` opens a new row. ``block``
        (buddy placement): the cells it holds, a superset of ``nodes``, all free."""
        if job_id in self._where:
            raise PolicyError(f"job {job_id} is already placed")
        chosen = tuple(sorted(set(nodes)))
        if not chosen:
            raise PolicyError(f"job {job_id}: no nodes given")
        if chosen[0] < 0 or chosen[-1] >= self.nodes:
            raise PolicyError(f"job {job_id}: node out of range in {chosen}")
        held = tuple(sorted(set(block)))
        if held and (not set(chosen) <= set(held) or held[0] < 0 or held[-1] >= self.nodes):
            raise PolicyError(f"job {job_id}: block {held} out of range or without {chosen}")
        held = () if held == chosen else held
        if slot == len(self._rows):
            if not self.can_add_slot():
                raise PolicyError(f"job {job_id}: no new slot allowed (max_slots={self.max_slots})")
            self._rows.append([None] * self.nodes)
            self._stamps.append(-1)
        row = self._row(slot)
        held_mask = sum(1 << n for n in held or chosen)
        clash = self.claimed_mask(slot) & held_mask
        if clash:
            cells = [n for n in range(self.nodes) if clash >> n & 1]
            raise PolicyError(f"job {job_id}: cells {cells} of slot {slot} are occupied or held")
        mask = 0
        for n in chosen:
            row[n] = job_id
            mask |= 1 << n
        self._touch(slot)
        where = Placement(slot, chosen, held)
        self._where[job_id] = where
        self._mask[job_id] = mask
        self._held[job_id] = held_mask
        return where

    def remove(self, job_id: int) -> Placement:
        """Free a job's cells. Rows are not deleted here: see :meth:`compact`."""
        where = self._placed(job_id)
        row = self._rows[where.slot]
        for n in where.nodes:
            row[n] = None
        self._touch(where.slot)
        del self._where[job_id]
        del self._mask[job_id]
        del self._held[job_id]
        return where

    def move(self, job_id: int, slot: int) -> Placement:
        """Move a job to another row on the same nodes (``slot_count`` = new row)."""
        old = self._placed(job_id)
        if slot == old.slot:
            return old
        if slot < len(self._rows):
            self._row(slot)
            if self.claimed_mask(slot) & self._held[job_id]:
                raise PolicyError(f"job {job_id}: its nodes are not free in slot {slot}")
        elif slot != len(self._rows) or not self.can_add_slot():
            raise PolicyError(f"job {job_id}: cannot move to slot {slot}")
        self.remove(job_id)
        return self.place_at(job_id, slot, old.nodes, old.block)

    def compact(self) -> Compaction:
        """Delete empty rows, then eliminate trailing rows whose jobs fit above.

        See the module docstring for the exact rule. Returns the row renumbering
        and the jobs that moved, so callers can keep round-robin pointers and
        per-slot data consistent.
        """
        moved_old: dict[int, tuple[int, int]] = {}  # job -> (original row, target row)
        rows = self._rows
        masks = self._held  # a job needs its whole block free (buddy), else its nodes
        # Work on original indices, rows as bit sets of held cells; a row is
        # alive until deleted (empty, or all its jobs moved up).
        busy = [self.claimed_mask(s) for s in range(len(rows))]
        alive = [b != 0 for b in busy]
        for r in range(len(rows) - 1, 0, -1):
            if not alive[r]:
                continue
            plan: dict[int, int] = {}
            earlier = [s for s in range(r) if alive[s]]
            trial = {s: busy[s] for s in earlier}
            ok = True
            for job in self.jobs_in(r):
                mask = masks[job]
                target = next((s for s in earlier if not trial[s] & mask), None)
                if target is None:
                    ok = False
                    break
                trial[target] |= mask
                plan[job] = target
            if not ok:
                continue
            self._touch(r)
            for target in set(plan.values()):
                self._touch(target)
            for job, target in plan.items():
                old_where = self._where[job]
                nodes = old_where.nodes
                for n in nodes:
                    rows[r][n] = None
                    rows[target][n] = job
                self._where[job] = Placement(target, nodes, old_where.block)
                first = moved_old.get(job)
                moved_old[job] = (r if first is None else first[0], target)
                busy[target] |= masks[job]
            busy[r] = 0
            alive[r] = False
        slot_map: dict[int, int] = {}
        new_rows: list[list[int | None]] = []
        new_stamps: list[int] = []
        for old, row in enumerate(rows):
            if alive[old]:
                slot_map[old] = len(new_rows)
                new_rows.append(row)
                new_stamps.append(self._stamps[old])
            else:
                self._touch(old)  # drops what was cached for the deleted row
        self._rows = new_rows
        self._stamps = new_stamps
        self.version += 1
        if any(old != new for old, new in slot_map.items()):
            for job, where in list(self._where.items()):
                new = slot_map[where.slot]
                if new != where.slot:
                    self._where[job] = Placement(new, where.nodes, where.block)
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
        """Jobs of other rows that can run on the idle nodes of ``slot`` (Wiseman & Feitelson 2003
        §2.6).

        A job qualifies when all its nodes are free in ``slot``, none is in
        ``busy_nodes`` (e.g. nodes used by a paired row), its row is not in
        ``skip_slots`` and ``accept(job)`` holds. Rows are scanned cyclically
        from ``slot + 1``; picks never share a node.
        """
        taken = self.row_mask(slot)
        for n in busy_nodes:
            taken |= 1 << n
        return self.alternates_masked(slot, taken, skip_slots, accept)

    def alternates_masked(
        self,
        slot: int,
        taken: int,
        skip_slots: Collection[int] = (),
        accept: Callable[[int], bool] | None = None,
    ) -> tuple[int, ...]:
        """:meth:`alternates` with the unavailable nodes given as a bit set.

        ``taken`` must include the busy nodes of ``slot`` itself.
        """
        snap = self.snapshot()
        rows, busy = snap.jobs, snap.busy
        count = len(rows)
        if not 0 <= slot < count:
            raise PolicyError(f"no slot {slot} (matrix has {count})")
        picked: list[int] = []
        masks = self._mask
        for step in range(1, count):
            other = slot + step
            if other >= count:
                other -= count
            # every job of a row whose nodes are all taken clashes: skip the row
            if busy[other] | taken == taken or other in skip_slots:
                continue
            for job in rows[other]:
                mask = masks[job]
                if mask & taken:
                    continue
                if accept is not None and not accept(job):
                    continue
                taken |= mask
                picked.append(job)
        return tuple(picked)

    # ----------------------------------------------------------------- checks
    def check(self) -> None:
        """Assert the cell/index invariants (used by tests); PolicyError if broken."""
        check_matrix(self)

    # ---------------------------------------------------------------- helpers
    def _touch(self, slot: int) -> None:
        """The cells of ``slot`` changed: give it a new stamp, drop its cached values."""
        self.version += 1
        old = self._stamps[slot]
        for cache in (self._jobs_cache, self._busy_cache, self._free_cache):
            cache.pop(old, None)
        self._row_mask_cache.pop(old, None)
        self._claimed_cache.pop(old, None)
        self._stamps[slot] = self._next_stamp
        self._next_stamp += 1

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
