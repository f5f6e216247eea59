"""Matching slots (or jobs) into complementary pairs (Wiseman & Feitelson 2003 §2.4-2.5, Fig. 4).

Utilizations are fractions (1.0 = 100%). Two items x and y may be paired when
``u(x) + u(y) + margin < 1`` (§2.4, margin m = 1%); for slots, u is the
largest predicted utilization of the slot's jobs (§2.5), which the caller
computes.

Results map an item to the partner to run *when that item's turn comes*.
Fig. 4 can give a job a partner that is itself already paired with somebody
else, so the mapping need not be symmetric.

Tie-breaking: items with equal utilization keep the iteration order of the
input mapping (the sort is stable), so results are deterministic for a given
input order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def fits(x: float, y: float, margin: float) -> bool:
    """The pairing condition of §2.4: x + y + m < 100%."""
    return x + y + margin < 1.0


def fig4_match(
    utils: Mapping[K, float], margin: float = 0.01, *, meet: bool = False
) -> dict[K, K | None]:
    """Wiseman & Feitelson 2003 Fig. 4, step for step (``meet=False``), or as its prose reads
    (``meet=True``).

    Sort ascending; ``pstart`` walks up from the low end and ``pend`` down
    from the high end. While the pair (pstart, pend) does not fit, pend is
    first marked unmatched and then searches back from ``pstart - 1`` towards
    the low end for an already-matched job it fits with (the first one found
    is its partner), and pend moves down. When the pair fits, pstart and
    pend are matched to each other. The loop stops when the pointers meet,
    so a job left at the meeting point is never visited and stays unmatched
    (None), exactly as in the pseudocode.

    ``meet=True`` gives that job the same back-search as every other
    unmatched ``pend``: §4.1.2 says that with one I/O job and three compute
    jobs "the I/O-bound job is matched with *all* the compute-bound jobs in
    turn", which the pseudocode does not do for the compute job where the
    pointers meet (it would run alone in its turn).
    """
    order = sorted(utils, key=lambda k: utils[k])  # stable: ties keep input order
    u = [utils[k] for k in order]
    partner: dict[K, K | None] = {k: None for k in order}
    visited = [False] * len(order)

    def back_search(i: int, below: int) -> None:
        # ``i`` keeps None unless a job under ``below`` fits it; that job keeps its own partner.
        pback = below - 1
        while pback >= 0:
            if fits(u[pback], u[i], margin):
                partner[order[i]] = order[pback]
                return
            pback -= 1

    pstart, pend = 0, len(order) - 1
    while pstart < pend:
        while not fits(u[pstart], u[pend], margin) and pstart < pend:
            partner[order[pend]] = None
            visited[pend] = True
            back_search(pend, pstart)
            pend -= 1
        if pstart < pend:
            partner[order[pstart]] = order[pend]
            partner[order[pend]] = order[pstart]
            visited[pstart] = visited[pend] = True
            pstart += 1
        pend -= 1
    if meet:
        for i, seen in enumerate(visited):
            if not seen:  # the meeting point (at most one job)
                back_search(i, i)
    return partner


def best_fit_match(utils: Mapping[K, float], key: K, margin: float = 0.01) -> K | None:
    """The naive matcher of §2.4: the partner for ``key`` with the largest y that fits.

    Candidates are every other item of ``utils``; among equal best values the
    last one in iteration order wins ("the last one will always be chosen").
    """
    x = utils[key]
    best: K | None = None
    best_y = -1.0
    for other, y in utils.items():
        if other == key or not fits(x, y, margin):
            continue
        if y >= best_y:
            best, best_y = other, y
    return best
