"""The policy contract the live scheduler relies on (no reach-ins past policies/base.py)."""

from __future__ import annotations

import pytest

from controller.families import BatchFamily, GangFamily, make_family
from controller.policies.base import JobRequest, PolicyError
from controller.policies.registry import make_policy
from controller.scheduler import Scheduler
from tests.support.controller_fakes import FakePool


def test_pin_places_a_job_exactly_where_asked() -> None:
    p = make_policy("gang", 4, {})
    p.submit(JobRequest(1, 2, 10.0), 0.0)
    p.submit(JobRequest(2, 2, 10.0), 0.0)
    p.pin(2, (1, 3))
    where = p.placement(2)
    assert where is not None and where[1] == (1, 3)
    rows = p.matrix_view()
    assert any(row[1] == 2 and row[3] == 2 for row in rows)
    with pytest.raises(PolicyError):
        p.pin(99, (0,))


def test_max_slots_bounds_new_rows_only() -> None:
    p = make_policy("gang", 2, {})
    p.submit(JobRequest(1, 2, 10.0), 0.0)
    p.set_max_slots(1)
    p.submit(JobRequest(2, 2, 10.0), 0.0)
    assert p.placement(2) is None and p.queue_length == 1
    p.set_max_slots(None)
    p.next_quantum(0.0)
    assert p.placement(2) is not None


def test_paired_snapshot_restore_round_trip() -> None:
    a = make_policy("paired-gang", 2, {})
    for j in (1, 2):
        a.submit(JobRequest(j, 2, 10.0), 0.0)
    for u in (0.2, 0.3, 0.9):
        a.observe({1: u})
    snap = a.snapshot()
    assert snap[1][0] == pytest.approx(0.9)  # most recent first
    b = make_policy("paired-gang", 2, {})
    for j in (1, 2):
        b.submit(JobRequest(j, 2, 10.0), 0.0)
    b.restore(snap)
    assert b.snapshot() == snap
    assert make_policy("gang", 2, {}).snapshot() == {}


def test_family_follows_the_policy_contract() -> None:
    gang = Scheduler("gang", {}, FakePool(2))
    batch = Scheduler("easy", {}, FakePool(2))
    assert isinstance(gang.fam, GangFamily) and isinstance(batch.fam, BatchFamily)
    with pytest.raises(TypeError, match="no scheduler family"):
        make_family(gang.core, object())  # type: ignore[arg-type]
