"""Paired gang scheduling (Wiseman & Feitelson 2003 §2.4-2.6).

Each quantum the row whose turn it is runs together with a *partner* row of
complementary CPU utilization, so every node may run two processes and the
local scheduler interleaves them (§2.1): eq. (1) predictions (predictor.py), Fig. 4
or best-fit matching (matching.py), the band rule's moves (homogeneity.py).
docs/policies.md ("Paired gang") says how §2.4-2.6 is realised, and our choices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import compress

from controller.policies.base import PolicyError, QuantumPlan
from controller.policies.gang import ADMISSIONS, FCFS, MatrixGang
from controller.policies.homogeneity import BAND_RULES, STAY, enforce_homogeneity
from controller.policies.homogeneity import EPS as _EPS
from controller.policies.matching import best_fit_match, fig4_match, fits
from controller.policies.matrix import FIRST_FIT, PLACEMENTS
from controller.policies.params import ParamSpec
from controller.policies.predictor import UtilizationPredictor

FIG4 = "fig4"
FIG4_PROSE = "fig4-prose"
BEST_FIT_MATCHING = "best-fit"
MATCHINGS: tuple[str, ...] = (FIG4, FIG4_PROSE, BEST_FIT_MATCHING)


@dataclass(slots=True)
class PairedStats:
    """Counters for metrics and debugging."""

    quanta: int = 0  # quanta in which some row ran
    paired_quanta: int = 0  # ... of which with a partner row (at least one partner job ran)
    matchings: int = 0  # Fig. 4 runs
    homogeneity_moves: int = 0

    @property
    def matching_success_ratio(self) -> float:
        """Paired quanta / quanta (0.0 before the first quantum)."""
        return self.paired_quanta / self.quanta if self.quanta else 0.0


class PairedGang(MatrixGang):
    """Paired gang scheduling (Wiseman & Feitelson 2003 §2.4-2.6); see docs/policies.md."""

    name = "paired-gang"
    PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec(
            "max_slots", int, None, "most matrix rows (multiprogramming level); none = unlimited"
        ),
        ParamSpec("placement", str, FIRST_FIT, "row choice for a new gang", PLACEMENTS),
        ParamSpec("admission", str, FCFS, "queue rule when no row fits", ADMISSIONS),
        ParamSpec(
            "margin",
            float,
            0.01,
            "safety margin m in x + y + m < 100% (Wiseman & Feitelson 2003 §2.4)",
        ),
        ParamSpec("band", float, 0.20, "slot homogeneity range M (Wiseman & Feitelson 2003 §2.5)"),
        ParamSpec(
            "band_rule",
            str,
            STAY,
            "where a job outside its row's band goes: stay (unpaired), existing row, new-row",
            BAND_RULES,
        ),
        ParamSpec(
            "sharp_change",
            float,
            0.20,
            "utilization jump that makes a job run alone (§4.2.3); none = off",
            nullable=True,
        ),
        ParamSpec(
            "matching",
            str,
            FIG4,
            "fig4 once per round (fig4-prose: also the job where the pointers meet), "
            "or best-fit every quantum",
            MATCHINGS,
        ),
        ParamSpec(
            "alternate",
            bool,
            True,
            "alternate scheduling within the band (Wiseman & Feitelson 2003 §2.6)",
        ),
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
        band_rule: str = STAY,
        sharp_change: float | None = 0.20,
        matching: str = FIG4,
        alternate: bool = True,
    ) -> None:
        if matching not in MATCHINGS:
            raise PolicyError(f"unknown matching {matching!r}; expected one of {MATCHINGS}")
        if band_rule not in BAND_RULES:
            raise PolicyError(f"unknown band_rule {band_rule!r}; expected one of {BAND_RULES}")
        if not 0.0 <= margin < 1.0:
            raise PolicyError(f"margin must be in [0, 1), got {margin}")
        if not band > 0.0:
            raise PolicyError(f"band must be > 0, got {band}")
        self.predictor = UtilizationPredictor(sharp_change=sharp_change)
        self.margin = margin
        self.band = band
        self.band_rule = band_rule
        self.matching = matching
        self.stats = PairedStats()
        self._round: dict[int, int | None] | None = None
        self._last_slot = -1  # the row selected last quantum (a wrap starts a round)
        self._estimates = self.predictor.estimates_view()
        self._flagged = self.predictor.flagged_view()
        # row stamp -> (core jobs, their largest prediction or None), band (count, min, max),
        # exclusive flag
        self._util_cache: dict[int, tuple[frozenset[int], float | None, float]] = {}
        self._band_cache: dict[int, tuple[int, float, float]] = {}
        self._excl_cache: dict[int, bool] = {}
        self._homog_dirty: set[int] | None = None  # rows to check; None = all
        # _matchable() and the Fig. 4 result for it: both change only when a row
        # does or one of its jobs is observed (_sync drops them), yet Fig. 4 is
        # asked for at every round (issue 11: a fifth of a fluid run)
        self._matchable_memo: dict[int, float] | None = None
        # (row stamp, partner stamp, their cores) -> _pair_cells when a core is partial
        self._pair_cache: dict[
            tuple[int, int, frozenset[int], frozenset[int]],
            tuple[tuple[tuple[int, ...], ...], frozenset[int], int],
        ] = {}
        self._fig4_memo: tuple[dict[int, float], float, bool, dict[int, int | None]] | None = None
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
        enforce_homogeneity(self)

    def _build_plan(self, slot: int) -> QuantumPlan:
        self._sync()
        partner = self._choose_partner(slot)
        self.stats.quanta += 1
        matrix = self.matrix
        # the selected row's cells, then the partner's (Wiseman & Feitelson 2003 §2.1: two per node)
        node_jobs, running, shared = self._pair_cells(slot, partner)
        if partner is not None and len(running) > len(self._snap.jobs[slot]):
            self.stats.paired_quanta += 1
        else:
            partner = None  # no job of the partner row could run beside this one
        alternates: tuple[int, ...] = ()
        if self.alternate:
            alternates = matrix.alternates_masked(
                slot,
                self._snap.busy[slot],
                skip_slots=(partner,) if partner is not None else (),
                accept=self._alternate_test(slot, partner, shared),
            )
            if alternates:
                # the alternate joins the selected row: first on its nodes, then the partner's job
                node_jobs = self._with_alternates(node_jobs, alternates, beside=True)
                running = running | frozenset(alternates)
        self._built_running = running
        return QuantumPlan(
            slot=slot,
            partner=partner,
            node_jobs=node_jobs,
            alternates=frozenset(alternates),
        )

    def _live_node_jobs(self) -> set[int]:
        live = super()._live_node_jobs()
        live.update(id(v[0]) for v in self._pair_cache.values())
        return live

    def _pair_cells(
        self, slot: int, partner: int | None
    ) -> tuple[tuple[tuple[int, ...], ...], frozenset[int], int]:
        """node_jobs, running jobs and the partner's running nodes (bit set).

        Only the partner's core jobs run, and only those that share no node
        with a job of ``slot`` outside its core (docs/policies.md, the band).
        """
        if partner is None:
            row = self._row_cells(slot)
            return row[0], row[1], 0
        jobs = self._snap.jobs
        core_s = self._core(slot)
        core_p = self._core(partner)
        if len(core_s) == len(jobs[slot]) and len(core_p) == len(jobs[partner]):
            both = self._row_cells(slot, partner)  # both rows pair in full (cached)
            return both[0], both[1], self._snap.busy[partner]
        # cached on the rows' contents and cores, so that an unchanged pair gives
        # the same node_jobs object back (the simulator's work keyed on it is reused)
        stamps = self._snap.stamps
        key = (stamps[slot], stamps[partner], core_s, core_p)
        hit = self._pair_cache.get(key)
        if hit is not None:
            return hit
        if len(self._pair_cache) > 4 * len(stamps) ** 2 + 64:
            # stamps are never reused: an entry of a row that changed or left never
            # hits again, and keeping it until a hard cap looked like a leak in the
            # soak (issue 13); a cap remains for many core sets of the same rows
            alive = set(stamps)
            self._pair_cache = {
                k: v for k, v in self._pair_cache.items() if k[0] in alive and k[1] in alive
            }
            if len(self._pair_cache) >= 1024:
                self._pair_cache.clear()
        masks = self.matrix.job_mask
        blocked = 0
        for j in jobs[slot]:
            if j not in core_s:
                blocked |= masks(j)
        alone, _, _ = self._row_cells(slot)
        cells = list(alone)
        running = set(jobs[slot])
        shared = 0
        nodes_of = self.matrix.nodes_of
        for j in jobs[partner]:
            mask = masks(j)
            if j in core_p and not mask & blocked:
                running.add(j)
                shared |= mask
                for n in nodes_of(j):
                    cells[n] = (*cells[n], j)
        result = (tuple(cells), frozenset(running), shared)
        self._pair_cache[key] = result
        return result

    def _alternate_test(
        self, slot: int, partner: int | None, shared: int
    ) -> Callable[[int], bool] | None:
        """Which jobs may run as alternates in ``slot``'s quantum (docs/policies.md, §2.6)."""
        if partner is None or not shared:
            return None  # every alternate runs alone on its nodes, as under strict gang
        in_band = self._band_test(slot)
        partner_util = self._slot_util(partner)
        masks = self._mask_of
        flagged, get, jobs = self._flagged, self._estimates.get, self._jobs
        margin = self.margin

        def accept(job_id: int) -> bool:
            if not masks(job_id) & shared:
                return True
            if jobs[job_id].exclusive or job_id in flagged:
                return False
            value = get(job_id)
            return value is not None and in_band(job_id) and fits(value, partner_util, margin)

        return accept

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
            self._matchable_memo = None
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
            self._matchable_memo = None
            util.pop(stamp, None)
            band.pop(stamp, None)
            if dirty is not None:
                dirty.add(slot)

    def _core_util(self, slot: int) -> tuple[frozenset[int], float | None]:
        """(core jobs, their largest prediction) of a row; None when the core is empty."""
        core, hi, _ = self._util_cache_entry(slot)
        return core, hi

    def _util_cache_entry(self, slot: int) -> tuple[frozenset[int], float | None, float]:
        """(core jobs, highest and lowest estimate among them) of a row.

        The core (docs/policies.md): measured, unflagged jobs whose eq. (1)
        estimate is below the lowest such estimate + M. Unflagged measured
        jobs are predicted their estimate, so the prediction is the estimate.
        """
        value = self._util_cache.get(self._snap.stamps[slot])
        return self._compute_util(slot) if value is None else value

    def _compute_util(self, slot: int) -> tuple[frozenset[int], float | None, float]:
        """:meth:`_util_cache_entry` on a cache miss: compute and store."""
        flagged = self._flagged
        get = self._estimates.get
        ids: list[int] = []
        ests: list[float] = []
        for j in self._snap.jobs[slot]:
            e = get(j)
            if e is not None and j not in flagged:
                ids.append(j)
                ests.append(e)
        value: tuple[frozenset[int], float | None, float]
        if not ests:
            value = (frozenset(), None, 0.0)
        else:
            low = min(ests)
            limit = low + self.band - _EPS
            core = [e < limit for e in ests]
            value = (
                frozenset(compress(ids, core)),
                max(compress(ests, core)),  # holds the lowest unless band <= _EPS
                low,
            )
        self._util_cache[self._snap.stamps[slot]] = value
        return value

    def _mask_of(self, job_id: int) -> int:
        return self.matrix.job_mask(job_id)

    def _core(self, slot: int) -> frozenset[int]:
        return self._util_cache_entry(slot)[0]

    def _slot_util(self, slot: int) -> float:
        """The row's utilization for matching (§2.5's max over its core); 1.0 if no core."""
        util = self._util_cache_entry(slot)[1]
        return 1.0 if util is None else util

    def _exclusive(self, slot: int) -> bool:
        stamp = self._snap.stamps[slot]
        value = self._excl_cache.get(stamp)
        if value is None:
            value = any(self._jobs[j].exclusive for j in self._snap.jobs[slot])
            self._excl_cache[stamp] = value
        return value

    def _matchable_slot(self, slot: int) -> bool:
        return (
            bool(self._snap.jobs[slot])
            and not self._exclusive(slot)
            and self._util_cache_entry(slot)[1] is not None
        )

    def _matchable(self) -> dict[int, float]:
        """Row -> utilization of every row that may pair (shared: callers only read it).

        The rows :meth:`_matchable_slot` accepts, with :meth:`_slot_util`, in
        one pass over the caches (this runs once per round of every event).
        """
        memo = self._matchable_memo
        if memo is None:
            memo = {}
            snap = self._snap
            util_cache, excl_cache = self._util_cache, self._excl_cache
            for s, (jobs, stamp) in enumerate(zip(snap.jobs, snap.stamps, strict=True)):
                if not jobs:
                    continue
                excl = excl_cache.get(stamp)
                if excl is None:
                    excl = self._exclusive(s)
                if excl:
                    continue
                entry = util_cache.get(stamp)
                if entry is None:
                    entry = self._compute_util(s)
                hi = entry[1]
                if hi is not None:
                    memo[s] = hi
            self._matchable_memo = memo
        return memo

    def _fig4(self) -> dict[int, int | None]:
        """Fig. 4 on :meth:`_matchable`, recomputed only when its input changed."""
        utils = self._matchable()
        meet = self.matching == FIG4_PROSE
        memo = self._fig4_memo
        if memo is None or memo[0] is not utils or memo[1] != self.margin or memo[2] != meet:
            result = fig4_match(utils, self.margin, meet=meet)
            memo = self._fig4_memo = (utils, self.margin, meet, result)
        return memo[3]

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
        """``homogeneity._within_band(self, job, slot)`` for many jobs against one unchanging row.

        The row's band is that of its core: a row that keeps an outlier (band
        rule "stay") still takes jobs that fit its core's band.
        """
        core, hi_core, lo_core = self._util_cache_entry(slot)
        count, lo, hi = (len(core), lo_core, hi_core) if hi_core is not None else (0, 0.0, 0.0)
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
        if self.matching == BEST_FIT_MATCHING:
            if not self._matchable_slot(slot):
                return None
            return best_fit_match(self._matchable(), slot, self.margin)
        # A round starts when the pointer wraps: decided before anything about
        # the selected row, so an unpairable row cannot skip the refresh.
        if self._round is None or slot <= self._last_slot:
            self._round = self._fig4()
            self.stats.matchings += 1
        self._last_slot = slot
        if not self._matchable_slot(slot):
            return None
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
