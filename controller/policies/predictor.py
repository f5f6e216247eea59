"""CPU-utilization prediction for paired gang scheduling (Wiseman & Feitelson 2003 §2.2-2.3, eq.
(1)).

Eq. (1) predicts a job's utilization in its next quantum as a weighted sum of
its utilization (averaged over its processes) in the four last quanta it ran,
with weights (5 - i) / 10 for i = 1..4, i.e. 0.4, 0.3, 0.2, 0.1, most recent
first.

Choices made where the paper is silent:

* **Short history.** With ``k < 4`` measured quanta, the weights of the ``k``
  available quanta are renormalised to sum to one (one quantum: that value;
  two: (0.4 a + 0.3 b) / 0.7; ...). Padding with the speculative 100% would
  keep a fresh I/O-bound job looking CPU-bound for three more quanta, whereas
  the paper runs a new job alone only "in its first time quantum" (§2.3) so
  that its true utilization can be used afterwards.
* **New jobs** (no measurement yet) are predicted 1.0 (§2.3).
* **Sharp change** (§4.2.3): when two consecutive measurements of a job differ
  by more than ``sharp_change`` (0.20), in either direction, the next
  prediction is 1.0 so the job runs alone for one quantum; the flag is cleared
  by the next measurement, i.e. after that quantum ran. A tolerance of 1e-9
  keeps float noise (0.5 -> 0.7 is 0.19999999999999996) from deciding the
  boundary case. ``sharp_change=None`` disables the rule.
* Measurements are clamped to [0, 1] (accounting jitter can overshoot a
  little); NaN is rejected.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Container, Mapping, Sequence
from collections.abc import Set as AbstractSet
from operator import mul

from controller.policies.base import PolicyError

#: Eq. (1) weights, most recent quantum first: (5 - i) / 10 for i = 1..4.
WEIGHTS: tuple[float, ...] = tuple((5 - i) / 10 for i in range(1, 5))
#: sum(WEIGHTS[:k]) for k = 0..4, computed as eq. (1)'s denominator always was.
_WEIGHT_SUMS: tuple[float, ...] = tuple(sum(WEIGHTS[:k]) for k in range(len(WEIGHTS) + 1))
_EPS = 1e-9


class UtilizationPredictor:
    """Per-job history of measured utilizations and the eq. (1) prediction."""

    def __init__(self, *, sharp_change: float | None = 0.20, initial: float = 1.0) -> None:
        if sharp_change is not None and not 0.0 <= sharp_change <= 1.0:
            raise PolicyError(f"sharp_change must be in [0, 1] or None, got {sharp_change}")
        if not 0.0 <= initial <= 1.0:
            raise PolicyError(f"initial must be in [0, 1], got {initial}")
        self.sharp_change = sharp_change
        self.initial = initial
        self._history: dict[int, deque[float]] = {}
        self._flagged: set[int] = set()
        # eq. (1) is read many times per quantum and changes only on observe()
        self._estimate: dict[int, float] = {}
        # jobs observed since the last drain_changed(), for callers' caches
        self._changed: set[int] = set()

    def observe(self, job_id: int, utilization: float) -> None:
        """Record the job's utilization (averaged over its processes) in a quantum it ran."""
        if math.isnan(utilization):
            raise PolicyError(f"job {job_id}: utilization is NaN")
        value = min(1.0, max(0.0, utilization))
        hist = self._history.get(job_id)
        if hist is None:
            hist = self._history[job_id] = deque(maxlen=len(WEIGHTS))
        # The measurement just taken is the quantum the flag asked for: clear it.
        was_flagged = job_id in self._flagged
        self._flagged.discard(job_id)
        flag = bool(
            self.sharp_change is not None
            and hist
            and abs(value - hist[0]) > self.sharp_change + _EPS
        )
        if flag:
            self._flagged.add(job_id)
        hist.appendleft(value)
        old = self._estimate.get(job_id)
        # sum(w * u for w, u in zip(WEIGHTS, hist)) / sum(WEIGHTS[: len(hist)])
        new = self._estimate[job_id] = sum(map(mul, WEIGHTS, hist)) / _WEIGHT_SUMS[len(hist)]
        if new != old or flag != was_flagged:
            self._changed.add(job_id)

    def observe_known(self, utilization: Mapping[int, float], known: Container[int]) -> None:
        """:meth:`observe` every job of ``utilization`` that is in ``known``, in order."""
        history, flagged, estimate, changed = (
            self._history,
            self._flagged,
            self._estimate,
            self._changed,
        )
        sharp = self.sharp_change
        limit = math.inf if sharp is None else sharp + _EPS
        weights, sums = WEIGHTS, _WEIGHT_SUMS
        for job_id, u in utilization.items():
            if job_id not in known:
                continue
            if u != u:  # NaN (math.isnan without the call: this runs per job per quantum)
                raise PolicyError(f"job {job_id}: utilization is NaN")
            # min(1.0, max(0.0, u)) written out: the same value, spelled for speed
            value = u if 0.0 < u < 1.0 else (0.0 if u <= 0.0 else 1.0)
            hist = history.get(job_id)
            if hist is None:
                hist = history[job_id] = deque(maxlen=len(WEIGHTS))
            if job_id in flagged:
                flagged.discard(job_id)
                was_flagged = True
            else:
                was_flagged = False
            flag = bool(hist) and abs(value - hist[0]) > limit
            if flag:
                flagged.add(job_id)
            hist.appendleft(value)
            old = estimate.get(job_id)
            new = estimate[job_id] = sum(map(mul, weights, hist)) / sums[len(hist)]
            # callers' caches depend on the estimate and the flag only: a job
            # measured as before (most are, most quanta) invalidates nothing
            if new != old or flag != was_flagged:
                changed.add(job_id)

    def observe_processes(self, job_id: int, per_process: Sequence[float]) -> None:
        """Record per-process utilizations; eq. (1)'s inner sum averages them."""
        if not per_process:
            raise PolicyError(f"job {job_id}: no process utilizations given")
        self.observe(job_id, sum(per_process) / len(per_process))

    def observe_many(self, utilization: Mapping[int, float]) -> None:
        """Record one quantum's utilization for several jobs."""
        for job_id, value in utilization.items():
            self.observe(job_id, value)

    def estimate(self, job_id: int) -> float:
        """Eq. (1) on the history alone (no sharp-change override); ``initial`` if none."""
        return self._estimate.get(job_id, self.initial)

    def predict(self, job_id: int) -> float:
        """Utilization expected in the job's next quantum: 1.0 if new or flagged."""
        if job_id in self._flagged:
            return 1.0
        return self.estimate(job_id)

    def is_new(self, job_id: int) -> bool:
        """True if the job has not been measured yet."""
        return not self._history.get(job_id)

    def is_flagged(self, job_id: int) -> bool:
        """True if a sharp change makes the job run alone in its next quantum."""
        return job_id in self._flagged

    def history(self, job_id: int) -> tuple[float, ...]:
        """Up to four last measurements, most recent first."""
        return tuple(self._history.get(job_id, ()))

    def estimates_view(self) -> Mapping[int, float]:
        """Job -> :meth:`estimate` of every measured job (a live, read-only view)."""
        return self._estimate

    def flagged_view(self) -> AbstractSet[int]:
        """Jobs :meth:`is_flagged` (a live, read-only view)."""
        return self._flagged

    def drain_changed(self) -> set[int]:
        """Jobs whose :meth:`estimate` or flag changed since the previous call (for
        callers that cache predictions; a job observed again at the same value
        is not listed)."""
        changed = self._changed
        self._changed = set()
        return changed

    def forget(self, job_id: int) -> None:
        """Drop a finished job's data."""
        self._history.pop(job_id, None)
        self._estimate.pop(job_id, None)
        self._flagged.discard(job_id)
        self._changed.discard(job_id)
