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

from collections.abc import Mapping
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
        super().__init__(
            nodes,
            max_slots=max_slots,
            placement=placement,
            admission=admission,
            alternate=alternate,
        )

    # ----------------------------------------------------------------- public
    def observe(self, utilization: Mapping[int, float]) -> None:
        """Feed the predictor; jobs no longer in the system are ignored."""
        for job_id, value in utilization.items():
            if job_id in self._jobs:
                self.predictor.observe(job_id, value)

    @property
    def last_round_matching(self) -> dict[int, int | None]:
        """The Fig. 4 result in force (row -> partner row); empty for best-fit."""
        return dict(self._round or {})

    def slot_utilization(self, slot: int) -> float:
        """max(x) of §2.5: the largest predicted utilization among the row's jobs."""
        return max(self.predictor.predict(j) for j in self.matrix.jobs_in(slot))

    def is_exclusive_slot(self, slot: int) -> bool:
        """True if the row holds a job that must not be paired (§2.4)."""
        return any(self._jobs[j].exclusive for j in self.matrix.jobs_in(slot))

    def matchable_utilizations(self) -> dict[int, float]:
        """Row -> utilization for every non-empty row without an exclusive job."""
        return {
            s: self.slot_utilization(s)
            for s in range(self.matrix.slot_count)
            if self.matrix.jobs_in(s) and not self.is_exclusive_slot(s)
        }

    def band_utilization(self, job_id: int) -> float:
        """Utilization used for the band tests: eq. (1) without the sharp-change flag."""
        return self.predictor.estimate(job_id)

    # ------------------------------------------------------------------ hooks
    def _matrix_changed(self) -> None:
        self._round = None

    def _forget(self, job_id: int) -> None:
        self.predictor.forget(job_id)

    def _before_select(self, now: float) -> None:
        self._enforce_homogeneity()

    def _build_plan(self, slot: int) -> QuantumPlan:
        partner = self._choose_partner(slot)
        self.stats.quanta += 1
        if partner is not None:
            self.stats.paired_quanta += 1
        cells: list[list[int]] = [[] for _ in range(self.nodes)]
        for row in (slot,) if partner is None else (slot, partner):
            for n in self.matrix.busy_nodes(row):
                job = self.matrix.cell(row, n)
                if job is not None:
                    cells[n].append(job)
        alternates: tuple[int, ...] = ()
        if self.alternate:
            busy = self.matrix.busy_nodes(partner) if partner is not None else ()
            skip = (partner,) if partner is not None else ()
            alternates = self.matrix.alternates(
                slot,
                skip_slots=skip,
                busy_nodes=busy,
                accept=lambda job: self._within_band(job, slot),
            )
            for job in alternates:
                for n in self.matrix.nodes_of(job):
                    cells[n].append(job)
        return QuantumPlan(
            slot=slot,
            partner=partner,
            node_jobs=tuple(tuple(c) for c in cells),
            alternates=frozenset(alternates),
        )

    # ---------------------------------------------------------------- helpers
    def _choose_partner(self, slot: int) -> int | None:
        utils = self.matchable_utilizations()
        if slot not in utils:
            return None
        if self.matching == BEST_FIT_MATCHING:
            return best_fit_match(utils, slot, self.margin)
        if self._round is None or slot == 0:
            self._round = fig4_match(utils, self.margin)
            self.stats.matchings += 1
        partner = self._round.get(slot)
        # The round's pair may have gone stale (sharp change, new measurement).
        if partner is None or partner not in utils:
            return None
        if not fits(utils[slot], utils[partner], self.margin):
            return None
        return partner

    def _spread_ok(self, values: list[float]) -> bool:
        """Every value is below min + band (§2.5's CPUutil(J) < min(s) + M)."""
        return max(values) < min(values) + self.band - _EPS

    def _within_band(self, job_id: int, slot: int) -> bool:
        # Jobs never measured have no characteristics yet (§2.5 checks "running"
        # jobs); they neither widen a row's band nor are held to it.
        if self.predictor.is_new(job_id):
            return True
        values = [
            self.band_utilization(j)
            for j in self.matrix.jobs_in(slot)
            if not self.predictor.is_new(j)
        ]
        values.append(self.band_utilization(job_id))
        return self._spread_ok(values)

    def _enforce_homogeneity(self) -> None:
        """§2.5: move jobs that break their row's band (see module docstring)."""
        slot = 0
        while slot < self.matrix.slot_count:
            jobs = [j for j in self.matrix.jobs_in(slot) if not self.predictor.is_new(j)]
            if len(jobs) >= 2:
                low = min(self.band_utilization(j) for j in jobs)
                for job in jobs:
                    if self.band_utilization(job) >= low + self.band - _EPS:
                        self._relocate(job, slot)
            slot += 1

    def _relocate(self, job: int, slot: int) -> None:
        nodes = self.matrix.nodes_of(job)
        for other in range(self.matrix.slot_count):
            if other == slot:
                continue
            free = set(self.matrix.free_nodes(other))
            if not free.issuperset(nodes) or not self.matrix.jobs_in(other):
                continue
            if self._within_band(job, other):
                self.matrix.move(job, other)
                self.stats.homogeneity_moves += 1
                self._matrix_changed()
                return
        if self.matrix.can_add_slot():
            self.matrix.move(job, self.matrix.slot_count)
            self.stats.homogeneity_moves += 1
            self._matrix_changed()
