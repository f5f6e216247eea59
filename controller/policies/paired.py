"""Paired gang scheduling (seed 000 §2.4-2.6).

Each quantum the row whose turn it is runs together with a *partner* row of
complementary CPU utilization, so every node may run two processes and the
local scheduler interleaves them (§2.1).

How the pieces of the paper are realised here:

* **Prediction** -- :class:`~controller.policies.predictor.UtilizationPredictor`
  (eq. (1), new jobs and sharp changes predicted 1.0). A row's utilization is
  the largest prediction among its jobs, and rows ``x`` and ``y`` may pair when
  ``max(x) + max(y) + m < 100%`` (§2.5).
* **Matching** -- ``matching="fig4"`` runs Fig. 4 once per round of the
  matrix: when the row-0 turn comes (the round-robin pointer wrapped) or when
  the matrix changed since the last matching (a job placed, finished or
  moved). Within a round the stored partner is still checked against the
  current predictions before use and dropped if the pair no longer fits, so a
  sharp change observed mid-round does make the job run alone in its next
  quantum. ``matching="best-fit"`` is the naive §2.4 matcher, run at every
  quantum.
* **Exclusive jobs** (§2.4) -- a row holding a job with
  ``JobRequest.exclusive`` takes part in no matching, neither as the selected
  row nor as a partner.
* **Slot homogeneity** (§2.5) -- before each quantum (a context switch), in
  every row with two or more jobs, a job whose utilization is not below
  ``min(row) + band`` is moved, on the same nodes, to the lowest other row
  whose jobs it would fit within the band and where its nodes are free; else
  to a new row; if ``max_slots`` forbids a new row it stays where it is. The
  utilization used here is eq. (1) on the history (1.0 for a job never
  measured) *without* the one-quantum sharp-change override, so that a
  transient flag does not reshuffle the matrix.
* **Alternate scheduling** (§2.6) -- a job of a third row may run on nodes
  that are idle in *both* the selected row and its partner, and only if its
  utilization is within the band of the selected row's jobs. Such a node then
  runs that single job, so a node never runs more than two jobs (one of the
  selected row and one of the partner) and an exclusive job never shares a
  node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.policies.base import PolicyError, QuantumPlan
from controller.policies.gang import ADMISSIONS, FCFS, MatrixGang
from controller.policies.matching import best_fit_match, fig4_match, fits
from controller.policies.matrix import FIRST_FIT, PLACEMENTS
from controller.policies.params import ParamSpec
from controller.policies.predictor import UtilizationPredictor

FIG4 = "fig4"
BEST_FIT_MATCHING = "best-fit"
MATCHINGS: tuple[str, ...] = (FIG4, BEST_FIT_MATCHING)
_EPS = 1e-9


@dataclass(slots=True)
class PairedStats:
    """Counters for metrics and debugging."""

    quanta: int = 0  # quanta in which some row ran
    paired_quanta: int = 0  # ... of which with a partner row
    matchings: int = 0  # Fig. 4 runs
    homogeneity_moves: int = 0

    @property
    def matching_success_ratio(self) -> float:
        """Paired quanta / quanta (0.0 before the first quantum)."""
        return self.paired_quanta / self.quanta if self.quanta else 0.0


class PairedGang(MatrixGang):
    """Paired gang scheduling (seed 000 §2.4-2.6); see the module docstring."""

    name = "paired-gang"
    PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec(
            "max_slots", int, None, "most matrix rows (multiprogramming level); none = unlimited"
        ),
        ParamSpec("placement", str, FIRST_FIT, "row choice for a new gang", PLACEMENTS),
        ParamSpec("admission", str, FCFS, "queue rule when no row fits", ADMISSIONS),
        ParamSpec("margin", float, 0.01, "safety margin m in x + y + m < 100% (seed 000 §2.4)"),
        ParamSpec("band", float, 0.20, "slot homogeneity range M (seed 000 §2.5)"),
        ParamSpec(
            "sharp_change",
            float,
            0.20,
            "utilization jump that makes a job run alone (§4.2.3); none = off",
        ),
        ParamSpec(
            "matching", str, FIG4, "fig4 once per round, or best-fit every quantum", MATCHINGS
        ),
        ParamSpec("alternate", bool, True, "alternate scheduling within the band (seed 000 §2.6)"),
    )

    def __init__(
        self,
        nodes: int,
        *,
        max_slots: int | None = None,
        placement: str = FIRST_FIT,
        admission: str = FCFS,
        margin: float = 0.01,
        band: float = 0.20,
        sharp_change: float | None = 0.20,
        matching: str = FIG4,
        alternate: bool = True,
    ) -> None:
        if matching not in MATCHINGS:
            raise PolicyError(f"unknown matching {matching!r}; expected one of {MATCHINGS}")
        if not 0.0 <= margin < 1.0:
            raise PolicyError(f"margin must be in [0, 1), got {margin}")
        if not band > 0.0:
            raise PolicyError(f"band must be > 0, got {band}")
        self.predictor = UtilizationPredictor(sharp_change=sharp_change)
        self.margin = margin
        self.band = band
        self.matching = matching
        self.stats = PairedStats()
        self._round: dict[int, int | None] | None = None
        self._estimates = self.predictor.estimates_view()
        self._flagged = self.predictor.flagged_view()
        # row stamp -> slot utilization, band (count, min, max), exclusive flag
        self._util_cache: dict[int, float] = {}
        self._band_cache: dict[int, tuple[int, float, float]] = {}
        self._excl_cache: dict[int, bool] = {}
        self._homog_dirty: set[int] | None = None  # rows to check; None = all
        super().__init__(
            nodes,
            max_slots=max_slots,
            placement=placement,
            admission=admission,
            alternate=alternate,
        )
        self._snap = self.matrix.snapshot()

    # ----------------------------------------------------------------- public
    def observe(self, utilization: Mapping[int, float]) -> None:
        """Feed the predictor; jobs no longer in the system are ignored."""
        self.predictor.observe_known(utilization, self._jobs)

    @property
    def last_round_matching(self) -> dict[int, int | None]:
        """The Fig. 4 result in force (row -> partner row); empty for best-fit."""
        return dict(self._round or {})

    def band_utilization(self, job_id: int) -> float:
        """Utilization used for the band tests: eq. (1) without the sharp-change flag."""
        return self.predictor.estimate(job_id)

    # ------------------------------------------------------------------ hooks
    def snapshot(self) -> dict[int, tuple[float, ...]]:
        out: dict[int, tuple[float, ...]] = {}
        for job_id in sorted(self._jobs):
            h = self.predictor.history(job_id)
            if h:
                out[job_id] = tuple(h)
        return out

    def _matrix_changed(self) -> None:
        self._round = None
        self._homog_dirty = None

    def _forget(self, job_id: int) -> None:
        self.predictor.forget(job_id)

    def _before_select(self, now: float) -> None:
        self._enforce_homogeneity()

    def _build_plan(self, slot: int) -> QuantumPlan:
        self._sync()
        partner = self._choose_partner(slot)
        self.stats.quanta += 1
        if partner is not None:
            self.stats.paired_quanta += 1
        matrix = self.matrix
        # the selected row's cells, then the partner's (seed 000 §2.1: two per node)
        node_jobs, running, busy = self._row_cells(slot, partner)
        alternates: tuple[int, ...] = ()
        if self.alternate:
            alternates = matrix.alternates_masked(
                slot,
                busy,
                skip_slots=(partner,) if partner is not None else (),
                accept=self._band_test(slot),
            )
            if alternates:
                # only on nodes idle in both rows, so each such node runs that job alone
                cells = list(node_jobs)
                for job in alternates:
                    for n in matrix.nodes_of(job):
                        cells[n] = (job,)
                node_jobs = tuple(cells)
                running = running | frozenset(alternates)
        self._built_running = running
        return QuantumPlan(
            slot=slot,
            partner=partner,
            node_jobs=node_jobs,
            alternates=frozenset(alternates),
        )

    # ---------------------------------------------------------------- caches
    # Per-row values derived from the predictions are cached under the row's
    # stamp (matrix.row_stamp: renewed whenever the row's cells change) and
    # dropped when one of the row's jobs is observed (predictor.drain_changed).
    # Every method below expects _sync() to have run since the last change.

    def _sync(self) -> None:
        """Bring the row caches up to date with the matrix and the predictor."""
        matrix = self.matrix
        if matrix.version != self._snap.version:
            self._snap = matrix.snapshot()
            self._homog_dirty = None
            if len(self._util_cache) + len(self._band_cache) > 8 * len(self._snap.jobs) + 64:
                alive = set(self._snap.stamps)
                for cache in (self._util_cache, self._band_cache, self._excl_cache):
                    for stamp in [k for k in cache if k not in alive]:
                        del cache[stamp]
        changed = self.predictor.drain_changed()
        if not changed:
            return
        util, band, dirty = self._util_cache, self._band_cache, self._homog_dirty
        stamps = self._snap.stamps
        placement_of = matrix.placement_of
        for job in changed:
            where = placement_of(job)
            if where is None:
                continue
            slot = where.slot
            stamp = stamps[slot]
            util.pop(stamp, None)
            band.pop(stamp, None)
            if dirty is not None:
                dirty.add(slot)

    def _slot_util(self, slot: int) -> float:
        stamp = self._snap.stamps[slot]
        value = self._util_cache.get(stamp)
        if value is None:
            # predictor.predict(j) for every job of the row
            flagged = self._flagged
            get = self._estimates.get
            initial = self.predictor.initial
            value = max(1.0 if j in flagged else get(j, initial) for j in self._snap.jobs[slot])
            self._util_cache[stamp] = value
        return value

    def _exclusive(self, slot: int) -> bool:
        stamp = self._snap.stamps[slot]
        value = self._excl_cache.get(stamp)
        if value is None:
            value = any(self._jobs[j].exclusive for j in self._snap.jobs[slot])
            self._excl_cache[stamp] = value
        return value

    def _matchable_slot(self, slot: int) -> bool:
        return bool(self._snap.jobs[slot]) and not self._exclusive(slot)

    def _matchable(self) -> dict[int, float]:
        return {
            s: self._slot_util(s) for s in range(len(self._snap.jobs)) if self._matchable_slot(s)
        }

    def _band(self, slot: int) -> tuple[int, float, float]:
        """(measured jobs, lowest, highest eq. (1) estimate among them) of a row."""
        stamp = self._snap.stamps[slot]
        value = self._band_cache.get(stamp)
        if value is None:
            get = self._estimates.get  # None for a job never measured
            values = [e for e in map(get, self._snap.jobs[slot]) if e is not None]
            value = (len(values), min(values), max(values)) if values else (0, 0.0, 0.0)
            self._band_cache[stamp] = value
        return value

    def _band_test(self, slot: int) -> Callable[[int], bool]:
        """``_within_band(job, slot)`` for many jobs against one unchanging row."""
        count, lo, hi = self._band(slot)
        get = self._estimates.get
        band = self.band

        def accept(job_id: int) -> bool:
            value = get(job_id)
            if value is None:
                return True
            if count == 0:
                return value < value + band - _EPS
            low = lo if lo <= value else value
            high = hi if hi >= value else value
            return high < low + band - _EPS

        return accept

    # ---------------------------------------------------------------- helpers
    def _choose_partner(self, slot: int) -> int | None:
        if not self._matchable_slot(slot):
            return None
        if self.matching == BEST_FIT_MATCHING:
            return best_fit_match(self._matchable(), slot, self.margin)
        if self._round is None or slot == 0:
            self._round = fig4_match(self._matchable(), self.margin)
            self.stats.matchings += 1
        partner = self._round.get(slot)
        # The round's pair may have gone stale (sharp change, new measurement).
        if (
            partner is None
            or not 0 <= partner < len(self._snap.jobs)
            or not self._matchable_slot(partner)
        ):
            return None
        if not fits(self._slot_util(slot), self._slot_util(partner), self.margin):
            return None
        return partner

    def _within_band(self, job_id: int, slot: int) -> bool:
        # Jobs never measured have no characteristics yet (§2.5 checks "running"
        # jobs); they neither widen a row's band nor are held to it.
        self._sync()
        return self._band_test(slot)(job_id)

    def _enforce_homogeneity(self) -> None:
        """§2.5: move jobs that break their row's band (see module docstring).

        Only rows that may have changed are checked: all of them after a matrix
        change, else those holding a job observed since the last check or a
        job that broke the band and could not move. A row that passed and has
        not changed since would pass again, so the outcome is that of checking
        every row in order.
        """
        self._sync()
        dirty = self._homog_dirty
        if dirty is not None and not dirty:
            return
        self._homog_dirty = set()
        slot = -1
        if dirty is not None:
            band_of, width = self._band, self.band
            for s in sorted(dirty):
                count, lo, hi = band_of(s)
                # (_check_band's own first test, spared a call for rows that pass)
                if count >= 2 and hi >= lo + width - _EPS and self._check_band(s):
                    slot = s
                    break
            else:
                return
        # from here on (a full check, or a job moved) every later row, as in order
        slot += 1
        while slot < self.matrix.slot_count:
            self._check_band(slot)
            slot += 1

    def _check_band(self, slot: int) -> bool:
        """Relocate the row's jobs that break its band; True if the matrix changed."""
        count, lo, hi = self._band(slot)
        # some job is not below min + band (the test below, for every job)
        if count < 2 or hi < lo + self.band - _EPS:
            return False
        version = self.matrix.version
        estimate = self.band_utilization
        jobs = [j for j in self.matrix.jobs_in(slot) if not self.predictor.is_new(j)]
        low = min(estimate(j) for j in jobs)
        for job in jobs:
            if estimate(job) >= low + self.band - _EPS:
                self._relocate(job, slot)
        if self.matrix.version == version:
            if self._homog_dirty is not None:
                self._homog_dirty.add(slot)  # still broken: try again next quantum
            return False
        self._sync()
        return True

    def _relocate(self, job: int, slot: int) -> None:
        matrix = self.matrix
        mask = matrix.job_mask(job)
        for other in range(matrix.slot_count):
            if other == slot:
                continue
            if matrix.row_mask(other) & mask or not matrix.jobs_in(other):
                continue
            if self._within_band(job, other):
                matrix.move(job, other)
                self.stats.homogeneity_moves += 1
                self._matrix_changed()
                return
        if matrix.can_add_slot():
            matrix.move(job, matrix.slot_count)
            self.stats.homogeneity_moves += 1
            self._matrix_changed()
