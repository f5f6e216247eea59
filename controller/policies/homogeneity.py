"""Slot homogeneity (Wiseman & Feitelson 2003 §2.5): moving jobs that break their row's band.

Under ``band_rule`` "existing" or "new-row" a measured job whose estimate is
not below its row's lowest + M moves to another row whose band it fits (or a
new row); under "stay", the default, the matrix is never changed for the band
and these functions do nothing. Our reading of §2.5: docs/policies.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.policies.paired import PairedGang

STAY = "stay"
EXISTING_ROW = "existing"
NEW_ROW = "new-row"
BAND_RULES: tuple[str, ...] = (STAY, EXISTING_ROW, NEW_ROW)
EPS = 1e-9


def enforce_homogeneity(p: PairedGang) -> None:
    """§2.5: move jobs that break their row's band (docs/policies.md).

    Only rows that may have changed are checked: all of them after a matrix
    change, else those holding a job observed since the last check or a
    job that broke the band and could not move. A row that passed and has
    not changed since would pass again, so the outcome is that of checking
    every row in order.
    """
    if p.band_rule == STAY:
        return  # the band only decides who pairs (_core_util)
    p._sync()
    dirty = p._homog_dirty
    if dirty is not None and not dirty:
        return
    p._homog_dirty = set()
    slot = -1
    if dirty is not None:
        band_of, width = p._band, p.band
        for s in sorted(dirty):
            count, lo, hi = band_of(s)
            # (_check_band's own first test, spared a call for rows that pass)
            if count >= 2 and hi >= lo + width - EPS and _check_band(p, s):
                slot = s
                break
        else:
            return
    # from here on (a full check, or a job moved) every later row, as in order
    slot += 1
    while slot < p.matrix.slot_count:
        _check_band(p, slot)
        slot += 1


def _check_band(p: PairedGang, slot: int) -> bool:
    """Relocate the row's jobs that break its band; True if the matrix changed."""
    count, lo, hi = p._band(slot)
    # some job is not below min + band (the test below, for every job)
    if count < 2 or hi < lo + p.band - EPS:
        return False
    version = p.matrix.version
    estimate = p.band_utilization
    jobs = [j for j in p.matrix.jobs_in(slot) if not p.predictor.is_new(j)]
    low = min(estimate(j) for j in jobs)
    for job in jobs:
        if estimate(job) >= low + p.band - EPS:
            _relocate(p, job, slot)
    if p.matrix.version == version:
        if p._homog_dirty is not None:
            p._homog_dirty.add(slot)  # still broken: try again next quantum
        return False
    p._sync()
    return True


def _relocate(p: PairedGang, job: int, slot: int) -> None:
    matrix = p.matrix
    mask = matrix.held_mask(job)  # a buddy-placed job moves with its whole block
    for other in range(matrix.slot_count):
        if other == slot:
            continue
        if matrix.claimed_mask(other) & mask or not matrix.jobs_in(other):
            continue
        if _within_band(p, job, other):
            matrix.move(job, other)
            p.stats.homogeneity_moves += 1
            p._matrix_changed()
            return
    if p.band_rule == NEW_ROW and matrix.can_add_slot():
        matrix.move(job, matrix.slot_count)
        p.stats.homogeneity_moves += 1
        p._matrix_changed()


def _within_band(p: PairedGang, job_id: int, slot: int) -> bool:
    # Jobs never measured have no characteristics yet (§2.5 checks "running"
    # jobs); they neither widen a row's band nor are held to it.
    p._sync()
    return p._band_test(slot)(job_id)
