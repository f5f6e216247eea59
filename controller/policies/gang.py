"""Strict gang scheduling over an Ousterhout matrix, with FCFS, greedy or backfilling admission.

* Time sharing (Wiseman & Feitelson 2003 §2.1): one matrix row runs per quantum, rows in
  round-robin order; alternate scheduling (Wiseman & Feitelson 2003 §2.6) fills the selected
  row's idle nodes with jobs of other rows.
* Admission (Rajaei et al. 2008 §3.2): the number of rows may be bounded (the
  multiprogramming level ``max_slots``); a job that fits no row waits. The
  queue is served ``fcfs`` (the head blocks everyone behind it), ``greedy``
  (§3.2.1: every waiting job that fits some row is placed, whatever its
  position) or ``backfill`` (§3.2.2: the head holds a reservation and later
  jobs may go first only if they do not delay it).

Reservation estimate used by ``backfill`` (the papers give none for time
sharing): a placed job's remaining dedicated work is ``estimate - service``,
where service is the wall time of the quanta in which it was runnable
(measured between consecutive :meth:`next_quantum` calls); because a job gets
one quantum in ``S`` when the matrix has ``S`` rows, it is expected to end
``remaining * S`` after now, with ``S`` the current row count. The head's
reservation is the earliest such end time at which some row has enough free
nodes (ties: the lowest row), and the nodes it will take there are the
lowest-numbered ones free at that time, matching the placement rule. A later
job may be placed in any other row, or in the reserved row if it is expected
to end by the reservation (``estimate * S``) or uses only free nodes outside
the reserved ones.

Round-robin pointer: it names the next row to run; a row appended at the end
is reached in the current round, and when compaction deletes rows the pointer
follows the surviving rows so that no surviving row loses its turn. A job that
compaction moves up into a row that already ran this round waits for the next
round (at most one extra round; compaction only happens when a job ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import add

from controller.policies.base import GangPolicy, JobRequest, PolicyError, QuantumPlan
from controller.policies.matrix import (
    BEST_FIT,
    BUDDY,
    FIRST_FIT,
    PLACEMENTS,
    OusterhoutMatrix,
    Placement,
)
from controller.policies.params import ParamSpec

FCFS = "fcfs"
GREEDY = "greedy"
BACKFILL = "backfill"
ADMISSIONS: tuple[str, ...] = (FCFS, GREEDY, BACKFILL)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Reservation:
    """The queue head's promise under ``backfill``: row, time and nodes."""

    job_id: int
    slot: int
    time: float
    nodes: tuple[int, ...]


def matrix_params(max_slots: int | None) -> tuple[ParamSpec, ...]:
    """The matrix's row limit and placement, as every matrix policy takes them."""
    return (
        ParamSpec(
            "max_slots",
            int,
            max_slots,
            "most matrix rows (multiprogramming level); none = unlimited",
        ),
        ParamSpec("placement", str, FIRST_FIT, "row choice for a new gang", PLACEMENTS),
    )


_Cells = tuple[tuple[tuple[int, ...], ...], frozenset[int], int]

_ALTERNATE = ParamSpec(
    "alternate",
    bool,
    True,
    "fill idle nodes with jobs of other rows (Wiseman & Feitelson 2003 §2.6)",
)
ADMISSION_PARAM = ParamSpec("admission", str, FCFS, "queue rule when no row fits", ADMISSIONS)


class MatrixGang(GangPolicy):
    """Shared machinery: matrix, queue and admission, service accounting, round robin.

    Subclasses build the per-quantum plan (:meth:`_build_plan`) and may react
    to matrix changes (:meth:`_matrix_changed`) or act before a row is chosen
    (:meth:`_before_select`).
    """

    def __init__(
        self,
        nodes: int,
        *,
        max_slots: int | None = None,
        placement: str = FIRST_FIT,
        admission: str = FCFS,
        alternate: bool = True,
    ) -> None:
        super().__init__(nodes)
        if placement not in PLACEMENTS:
            raise PolicyError(f"unknown placement {placement!r}; expected one of {PLACEMENTS}")
        if admission not in ADMISSIONS:
            raise PolicyError(f"unknown admission {admission!r}; expected one of {ADMISSIONS}")
        if placement == BUDDY and admission == BACKFILL:
            # the reservation estimate counts free nodes, not free aligned blocks
            raise PolicyError("placement buddy does not support admission backfill")
        self.matrix = OusterhoutMatrix(nodes, max_slots)
        self.placement_rule = placement
        self.admission = admission
        self.alternate = alternate
        self.reservation: Reservation | None = None  # last one computed, for inspection
        self._jobs: dict[int, JobRequest] = {}
        self._queue: list[JobRequest] = []
        self._service: dict[int, float] = {}
        self._next = 0
        self._last_now: float | None = None
        self._last_running: frozenset[int] = frozenset()
        # _build_plan may leave the plan's job set here (cheaper than plan.running)
        self._built_running: frozenset[int] | None = None
        # (row stamp, partner row stamp or -1) -> node_jobs, jobs, busy nodes (bit set)
        self._cells: dict[tuple[int, int], _Cells] = {}
        # (id of node_jobs, alternates, their node bit sets) -> (that node_jobs, with them)
        self._alt_cells: dict[
            tuple[int, tuple[int, ...], tuple[int, ...]],
            tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]],
        ] = {}

    # ------------------------------------------------------------ GangPolicy
    def submit(self, job: JobRequest, now: float) -> None:
        """Queue the job and admit what the admission rule allows."""
        if job.size > self.nodes:
            raise PolicyError(f"job {job.job_id}: size {job.size} exceeds {self.nodes} nodes")
        if job.job_id in self._jobs:
            raise PolicyError(f"job {job.job_id} was already submitted")
        self._jobs[job.job_id] = job
        self._queue.append(job)
        self._admit(now)

    def finish(self, job_id: int, now: float) -> None:
        """Drop a job (placed or still queued), compact the matrix, admit waiting jobs."""
        job = self._jobs.pop(job_id, None)
        if job is None:
            raise PolicyError(f"job {job_id} is unknown")
        self._service.pop(job_id, None)
        self._forget(job_id)
        if job_id in self.matrix:
            self.matrix.remove(job_id)
            compaction = self.matrix.compact()
            self._next = sum(1 for old in compaction.slot_map if old < self._next)
            self._matrix_changed()
        else:
            self._queue = [q for q in self._queue if q.job_id != job_id]
        self._admit(now)

    def next_quantum(self, now: float) -> QuantumPlan:
        """Credit the last quantum, admit, pick the next row, build its plan."""
        self._credit(now)
        self._admit(now)
        self._before_select(now)
        count = self.matrix.slot_count
        if count == 0:
            self._last_running = frozenset()
            return QuantumPlan(slot=None, partner=None, node_jobs=((),) * self.nodes)
        slot = self._next if self._next < count else 0
        self._next = slot + 1
        plan = self._build_plan(slot)
        running = self._built_running
        self._built_running = None
        self._last_running = plan.running if running is None else running
        return plan

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    @property
    def slot_count(self) -> int:
        return self.matrix.slot_count

    def placement(self, job_id: int) -> tuple[int, tuple[int, ...]] | None:
        where = self.matrix.placement_of(job_id)
        return None if where is None else (where.slot, where.nodes)

    # ---------------------------------------------------------------- extras
    @property
    def queued(self) -> tuple[int, ...]:
        """Ids of waiting jobs in queue order."""
        return tuple(j.job_id for j in self._queue)

    def service(self, job_id: int) -> float:
        """Wall time the job has been runnable (0.0 if queued or unknown)."""
        return self._service.get(job_id, 0.0)

    def expected_end(self, job_id: int, now: float) -> float:
        """When a placed job is expected to end under time sharing (module docstring)."""
        job = self._jobs[job_id]
        remaining = max(0.0, job.estimate - self._service.get(job_id, 0.0))
        return now + remaining * max(1, self.matrix.slot_count)

    # -------------------------------------------------------------- admission
    def _admit(self, now: float) -> None:
        if self.admission == GREEDY:
            for job in list(self._queue):
                self._try_place(job)
            return
        while self._queue and self._try_place(self._queue[0]):
            pass
        if self.admission == FCFS or not self._queue:
            self.reservation = None
            return
        for job in list(self._queue[1:]):
            res = self._reserve(self._queue[0], now)
            self.reservation = res
            where = self._backfill_spot(job, res, now)
            if where is not None:
                self._place(job, where)
        self.reservation = self._reserve(self._queue[0], now)

    def _try_place(self, job: JobRequest) -> bool:
        where = self.matrix.find(job.size, self.placement_rule)
        if where is None:
            return False
        self._place(job, where)
        return True

    def _place(self, job: JobRequest, where: Placement) -> None:
        self.matrix.place_at(job.job_id, where.slot, where.nodes, where.block)
        self._queue.remove(job)
        self._service[job.job_id] = 0.0
        self._matrix_changed()

    def _reserve(self, head: JobRequest, now: float) -> Reservation:
        """Earliest (time, row) at which ``head`` would find enough free nodes."""
        best: Reservation | None = None
        for slot in range(self.matrix.slot_count):
            free = set(self.matrix.free_nodes(slot))
            ends = sorted((self.expected_end(j, now), j) for j in self.matrix.jobs_in(slot))
            when = now
            for end, job_id in ends:
                if len(free) >= head.size:
                    break
                free.update(self.matrix.nodes_of(job_id))
                when = end
            # Nodes of every job expected to be gone by then are free too.
            for end, job_id in ends:
                if end <= when + _EPS:
                    free.update(self.matrix.nodes_of(job_id))
            if best is None or when < best.time - _EPS:
                best = Reservation(head.job_id, slot, when, tuple(sorted(free))[: head.size])
        if best is None:  # unreachable: the head waits only when max_slots rows exist
            raise PolicyError("backfill reservation with an empty matrix")
        return best

    def _backfill_spot(self, job: JobRequest, res: Reservation, now: float) -> Placement | None:
        """Where ``job`` may go without delaying ``res``, by the placement rule."""
        stretch = max(1, self.matrix.slot_count)
        ends_in_time = now + job.estimate * stretch <= res.time + _EPS
        options: list[tuple[int, int, tuple[int, ...]]] = []  # (free left, slot, nodes)
        for slot in range(self.matrix.slot_count):
            free = self.matrix.free_nodes(slot)
            if slot == res.slot and not ends_in_time:
                free = tuple(n for n in free if n not in res.nodes)
            if len(free) >= job.size:
                left = len(self.matrix.free_nodes(slot)) - job.size
                options.append((left, slot, free[: job.size]))
        if not options:
            return None
        if self.placement_rule == BEST_FIT:
            _, slot, nodes = min(options)
        else:
            _, slot, nodes = min(options, key=lambda o: o[1])
        return Placement(slot, nodes)

    # ------------------------------------------------------------------ hooks
    def _credit(self, now: float) -> None:
        if self._last_now is not None:
            dt = max(0.0, now - self._last_now)
            if dt > 0.0:  # adding 0.0 changes nothing
                service = self._service
                for job_id in self._last_running:
                    if job_id in service:
                        service[job_id] += dt
        self._last_now = now

    def matrix_view(self) -> list[list[int | None]]:
        return self.matrix.render()

    def set_max_slots(self, max_slots: int | None) -> None:
        self.matrix.max_slots = max_slots

    def pin(self, job_id: int, nodes: tuple[int, ...]) -> None:
        where = self.placement(job_id)
        if where is not None and tuple(where[1]) == nodes:
            return
        if where is None and job_id not in self._jobs:
            raise PolicyError(f"pin: job {job_id} was not submitted")
        if where is not None:
            self.matrix.remove(job_id)
        self._queue = [j for j in self._queue if j.job_id != job_id]
        mask = sum(1 << n for n in nodes)
        for slot in range(self.matrix.slot_count + 1):
            free = slot == self.matrix.slot_count or not self.matrix.claimed_mask(slot) & mask
            if free:
                self.matrix.place_at(job_id, slot, nodes)
                break
        self.matrix.compact()
        self._matrix_changed()

    def _matrix_changed(self) -> None:
        """Called after any placement, removal, compaction or move."""

    def _forget(self, job_id: int) -> None:
        """Called when a job leaves the system."""

    def _before_select(self, now: float) -> None:
        """Called each quantum after admission, before the row is chosen."""

    def _build_plan(self, slot: int) -> QuantumPlan:
        raise NotImplementedError

    def _with_alternates(
        self,
        node_jobs: tuple[tuple[int, ...], ...],
        alternates: tuple[int, ...],
        *,
        beside: bool,
    ) -> tuple[tuple[int, ...], ...]:
        """``node_jobs`` with each alternate on its nodes: alone (strict gang) or,
        with ``beside``, first beside what runs there (paired gang).

        The same inputs give the same object back (cached by identity, with the
        alternates' nodes in the key), so the simulator's per-plan work keyed on
        ``node_jobs`` is done once per distinct plan rather than per quantum.
        """
        mask_of = self.matrix.job_mask
        key = (id(node_jobs), alternates, tuple(map(mask_of, alternates)))
        hit = self._alt_cells.get(key)
        if hit is not None and hit[0] is node_jobs:
            return hit[1]
        cells = list(node_jobs)
        nodes_of = self.matrix.nodes_of
        for job in alternates:
            for n in nodes_of(job):
                cells[n] = (job, *cells[n]) if beside else (job,)
        built = tuple(cells)
        if len(self._alt_cells) > 4 * len(self._cells) + 64:
            # keep only entries whose node_jobs is still a cached row's or pair's:
            # the others can never hit again (issue 13's soak)
            live = self._live_node_jobs()
            self._alt_cells = {k: v for k, v in self._alt_cells.items() if id(v[0]) in live}
            if len(self._alt_cells) >= 512:
                self._alt_cells.clear()
        self._alt_cells[key] = (node_jobs, built)
        return built

    def _live_node_jobs(self) -> set[int]:
        """Identities of the node_jobs the row caches still hold."""
        return {id(c[0]) for c in self._cells.values()}

    def _row_cells(self, slot: int, partner: int | None = None) -> _Cells:
        """node_jobs of ``slot`` alone or with ``partner`` (its job second on a
        shared node), the set of their jobs and their busy nodes as a bit set.

        Cached under the rows' stamps, so a row's cells are built once per
        content of the row rather than at every quantum.
        """
        snap = self.matrix.snapshot()
        stamps = snap.stamps
        key = (stamps[slot], -1 if partner is None else stamps[partner])
        cells = self._cells.get(key)
        if cells is not None:
            return cells
        if len(self._cells) > 6 * len(stamps) + 64:
            alive = set(stamps)
            alive.add(-1)
            self._cells = {k: v for k, v in self._cells.items() if k[0] in alive and k[1] in alive}
        if partner is None:
            # one (job,) per job, looked up per node: cheaper than a test per node
            one: dict[int | None, tuple[int, ...]] = {None: ()}
            for job in snap.jobs[slot]:
                one[job] = (job,)
            cells = (
                tuple(map(one.__getitem__, self.matrix.row_cells(slot))),
                frozenset(snap.jobs[slot]),
                snap.busy[slot],
            )
        else:
            alone = self._row_cells(slot)
            other = self._row_cells(partner)
            cells = (
                tuple(map(add, alone[0], other[0])),  # (a,) + (b,) per node
                alone[1] | other[1],
                alone[2] | other[2],
            )
        self._cells[key] = cells
        return cells


class StrictGang(MatrixGang):
    """Strict gang scheduling: one row per quantum, round robin, plus alternates.

    Wiseman & Feitelson 2003 §2.1 and §2.6; admission as in Rajaei et al. 2008 §3.2 (see module
    docstring).
    A node runs the job of the selected row, or else the alternate placed on
    it, or nothing.
    """

    name = "gang"
    PARAMS: tuple[ParamSpec, ...] = (*matrix_params(None), ADMISSION_PARAM, _ALTERNATE)

    def __init__(
        self,
        nodes: int,
        *,
        max_slots: int | None = None,
        placement: str = FIRST_FIT,
        admission: str = FCFS,
        alternate: bool = True,
    ) -> None:
        super().__init__(
            nodes,
            max_slots=max_slots,
            placement=placement,
            admission=admission,
            alternate=alternate,
        )

    def _build_plan(self, slot: int) -> QuantumPlan:
        matrix = self.matrix
        node_jobs, running, busy = self._row_cells(slot)
        alternates = matrix.alternates_masked(slot, busy) if self.alternate else ()
        if alternates:
            node_jobs = self._with_alternates(node_jobs, alternates, beside=False)
            running = running | frozenset(alternates)
        self._built_running = running
        return QuantumPlan(
            slot=slot, partner=None, node_jobs=node_jobs, alternates=frozenset(alternates)
        )


class _BoundedGang(StrictGang):
    """Strict gang over a bounded matrix (3 rows by default) with a fixed admission rule."""

    ADMISSION: str = FCFS
    PARAMS: tuple[ParamSpec, ...] = (*matrix_params(3), _ALTERNATE)

    def __init__(
        self,
        nodes: int,
        *,
        max_slots: int | None = 3,
        placement: str = FIRST_FIT,
        alternate: bool = True,
    ) -> None:
        super().__init__(
            nodes,
            max_slots=max_slots,
            placement=placement,
            admission=self.ADMISSION,
            alternate=alternate,
        )


class GangGreedy(_BoundedGang):
    """Gang scheduling with greedy admission (Rajaei et al. 2008 §3.2.1), 3 rows by default."""

    name = "gang-greedy"
    ADMISSION = GREEDY


class GangBackfill(_BoundedGang):
    """Gang scheduling with backfilling admission (Rajaei et al. 2008 §3.2.2), 3 rows by default."""

    name = "gang-backfill"
    ADMISSION = BACKFILL
