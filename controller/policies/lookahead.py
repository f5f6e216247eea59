"""Backfilling with lookahead (Shmueli & Feitelson's "basic" algorithm, Rajaei et al. 2008 §3.1).

Rajaei et al. 2008 §3.1: the head of the queue starts if it fits; otherwise it gets a
reservation at the shadow time, and instead of considering the other waiting
jobs one at a time (as EASY does) the scheduler picks, by dynamic programming,
the set of waiting jobs that uses the most nodes now without violating that
reservation.

Formulation used here (the seed states the goal, not the recurrence):

* ``free`` -- nodes free now; ``extra`` -- nodes free at the shadow time that
  the head will not need (see :meth:`controller.policies.batch.RunningSet.shadow`).
* A waiting job ``i`` other than the head has size ``s_i``. It is *short* if
  ``now + estimate_i <= shadow`` (it is expected to be gone when the head
  starts) and *long* otherwise.
* Choose a subset ``S`` maximizing ``sum(s_i for i in S)`` subject to
  ``sum(s_i for i in S) <= free`` and ``sum(s_i for long i in S) <= extra``: a
  two-dimensional 0/1 knapsack whose value equals its first weight.
* Ties: among all maximizing subsets, the one that is lexicographically first
  in queue order (include the earliest job whenever some maximizing subset
  with the decisions made so far includes it). This keeps the spirit of
  first-come first-served among equals and makes the choice deterministic.

How it is computed, and why it is fast:

1. Candidates are the jobs that fit on their own. If EASY's first-fit pass over
   them already reaches an upper bound on the optimum, it *is* the
   lexicographically first optimum (each job it takes extends to an optimum;
   each it skips fits in none), so no DP is run. On a busy machine this is the
   usual case.
2. Otherwise the DP runs over suffixes of the candidate list with the
   reachable ``(nodes, long nodes)`` pairs of each suffix stored as bits of one
   Python integer (row-major, ``extra + 1`` bits per row): adding a job is a
   shift and an OR, so a step costs a few machine-word loops in C. A forward
   walk over the suffix sets then recovers the lexicographically first optimum.
3. Identical jobs (same size, same short/long class) are interchangeable, and
   the lexicographically first optimum only ever uses the earliest
   ``free // size`` of them, so later copies are dropped before the DP. This
   bounds the DP to O(free log free) jobs whatever the queue length.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.policies.base import JobRequest, PolicyError
from controller.policies.batch import EASY
from controller.policies.params import ParamSpec

__all__ = ["Lookahead", "best_fill"]


def best_fill(sizes: Sequence[int], long: Sequence[bool], free: int, extra: int) -> list[int]:
    """Indices of the lexicographically first subset that uses the most nodes.

    Maximizes ``sum(sizes[i])`` subject to ``sum(sizes[i]) <= free`` and
    ``sum(sizes[i] for long i) <= extra`` (the formulation in the module
    docstring). Items that cannot fit alone are simply never chosen. Returns
    indices in ascending order.
    """
    if free <= 0:
        return []
    cap_e = min(extra, free) if extra > 0 else 0
    idx: list[int] = []
    w_s: list[int] = []
    w_x: list[int] = []
    copies: dict[tuple[int, bool], int] = {}
    for i, (s, lg) in enumerate(zip(sizes, long, strict=True)):
        if s < 1 or s > free or (lg and s > cap_e):
            continue
        # Later copies of an interchangeable job are never in the
        # lexicographically first optimum once free // s earlier ones exist.
        key = (s, lg)
        seen = copies.get(key, 0)
        if seen * s >= free:
            continue
        copies[key] = seen + 1
        idx.append(i)
        w_s.append(s)
        # With extra >= free the long-node limit can never bind: drop it to
        # work in one dimension.
        w_x.append(s if lg and cap_e < free else 0)
    if not idx:
        return []
    if not any(w_x):
        cap_e = 0
    width = cap_e + 1
    rows = free + 1
    full = (1 << (rows * width)) - 1
    # One bit per column 0..width-1 in every row; columns <= c via multiplication.
    rowrep = full // ((1 << width) - 1)
    n = len(idx)
    suffix: list[int] = [0] * (n + 1)
    reach = 1  # the empty set: 0 nodes, 0 long nodes
    suffix[n] = reach
    for k in range(n - 1, -1, -1):
        s = w_s[k]
        x = w_x[k]
        if x:
            # Only states with room for x more long nodes may take this job;
            # masking first keeps the shift from spilling into the next row.
            src = reach & (rowrep * ((1 << (cap_e - x + 1)) - 1))
            reach |= (src << (s * width + x)) & full
        else:
            reach |= (reach << (s * width)) & full
        suffix[k] = reach
    best = (reach.bit_length() - 1) // width
    chosen: list[int] = []
    need = best
    budget = cap_e
    for k in range(n):
        if need == 0:
            break
        s = w_s[k]
        x = w_x[k]
        if s > need or x > budget:
            continue
        row = (suffix[k + 1] >> ((need - s) * width)) & ((1 << (budget - x + 1)) - 1)
        if row:
            chosen.append(idx[k])
            need -= s
            budget -= x
    return chosen


class Lookahead(EASY):
    """Lookahead backfilling: EASY's reservation, DP choice of the backfill set.

    ``depth`` bounds how many waiting jobs behind the head are considered
    (0, the default, means the whole queue; Rajaei et al. 2008 §3.1 considers "the whole
    contents of the queue").
    """

    name = "lookahead"
    PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec(
            "depth",
            int,
            0,
            "waiting jobs behind the head considered by the DP (0 = whole queue)",
        ),
    )

    def __init__(self, nodes: int, depth: int = 0) -> None:
        super().__init__(nodes)
        if depth < 0:
            raise PolicyError(f"depth must be >= 0, got {depth}")
        self.depth = depth
        # Queue index up to which the last decision examined jobs (depth only).
        self._verified_end = -1

    def _backfill(self, first: int, now: float, out: list[JobRequest]) -> None:
        q = self._queue
        run = self._run
        free = run.free
        extra = self._extra
        horizon = self._shadow - now
        end = len(q) if self.depth == 0 else min(len(q), 1 + self.depth)
        # Candidates: jobs that fit on their own. Run EASY's first fit over
        # them at the same time; it is often already optimal.
        cand: list[int] = []
        long: list[bool] = []
        greedy: list[int] = []
        g_free = free
        g_extra = extra
        sum_short = 0
        sum_long = 0
        for i in range(first, end):
            job = q[i]
            size = job.size
            if size > free:
                continue
            if job.estimate <= horizon:
                lg = False
                sum_short += size
            elif size <= extra:
                lg = True
                sum_long += size
            else:
                continue
            cand.append(i)
            long.append(lg)
            if size <= g_free and (not lg or size <= g_extra):
                greedy.append(i)
                g_free -= size
                if lg:
                    g_extra -= size
        if not cand:
            self._verified_end = end
            return
        bound = min(free, sum_short + min(extra, sum_long))
        if free - g_free >= bound:
            picked = greedy
        else:
            sel = best_fill([q[i].size for i in cand], long, free, extra)
            picked = [cand[k] for k in sel]
        used_long = 0
        for i in picked:
            job = q[i]
            if job.estimate > horizon:
                used_long += job.size
            self._start(job, now, out)
        self._extra = extra - used_long
        for i in reversed(picked):
            del q[i]
        # Jobs that moved into the depth window were not examined.
        self._verified_end = end - len(picked)

    def schedule(self, now: float) -> list[JobRequest]:
        self._verified_end = -1
        out = super().schedule(now)
        if self.depth and self._verified_end >= 0:
            self._verified = min(self._verified, self._verified_end)
        return out
