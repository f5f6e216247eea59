"""Strict gang: round robin, alternates, multiprogramming limit and admission rules."""

from __future__ import annotations

import inspect

import pytest

from controller.policies.base import JobRequest, PolicyError
from controller.policies.gang import GangBackfill, GangGreedy, MatrixGang, StrictGang


def job(job_id: int, size: int, estimate: float = 10.0, **kw: object) -> JobRequest:
    return JobRequest(job_id, size, estimate, **kw)  # type: ignore[arg-type]


def test_empty_matrix_gives_idle_plan() -> None:
    g = StrictGang(3)
    plan = g.next_quantum(0.0)
    assert plan.slot is None and plan.partner is None
    assert plan.node_jobs == ((), (), ())


def test_round_robin_over_rows() -> None:
    g = StrictGang(2)
    for j in (1, 2, 3):
        g.submit(job(j, 2), 0.0)
    assert g.slot_count == 3
    slots = [g.next_quantum(float(q)).slot for q in range(7)]
    assert slots == [0, 1, 2, 0, 1, 2, 0]
    assert g.next_quantum(7.0).node_jobs == ((2,), (2,))


def test_row_added_mid_round_is_served_before_wrapping() -> None:
    g = StrictGang(2)
    g.submit(job(1, 2), 0.0)
    g.submit(job(2, 2), 0.0)
    assert g.next_quantum(0.0).slot == 0
    assert g.next_quantum(1.0).slot == 1
    g.submit(job(3, 2), 1.5)
    assert g.next_quantum(2.0).slot == 2
    assert g.next_quantum(3.0).slot == 0


def test_alternate_scheduling_fills_idle_nodes() -> None:
    g = StrictGang(4)
    g.submit(job(1, 3), 0.0)  # row 0: nodes 0-2
    g.submit(job(2, 3), 0.0)  # row 1: nodes 0-2
    g.submit(job(3, 1), 0.0)  # row 0: node 3
    assert g.placement(3) == (0, (3,))
    g.next_quantum(0.0)
    plan = g.next_quantum(1.0)
    assert plan.slot == 1
    assert plan.node_jobs == ((2,), (2,), (2,), (3,))
    assert plan.alternates == frozenset({3})

    strict = StrictGang(4, alternate=False)
    for j in (job(1, 3), job(2, 3), job(3, 1)):
        strict.submit(j, 0.0)
    strict.next_quantum(0.0)
    plan = strict.next_quantum(1.0)
    assert plan.node_jobs == ((2,), (2,), (2,), ())
    assert plan.alternates == frozenset()


def test_best_fit_placement_in_policy() -> None:
    g = StrictGang(4, placement="best-fit")
    g.submit(job(1, 2), 0.0)
    g.submit(job(2, 3), 0.0)
    g.submit(job(3, 1), 0.0)
    assert g.placement(3) == (1, (3,))
    f = StrictGang(4, placement="first-fit")
    for j in (job(1, 2), job(2, 3), job(3, 1)):
        f.submit(j, 0.0)
    assert f.placement(3) == (0, (2,))


def test_max_slots_queues_and_finish_admits() -> None:
    g = StrictGang(4, max_slots=1)
    g.submit(job(1, 4), 0.0)
    g.submit(job(2, 2), 0.0)
    assert g.queue_length == 1
    assert g.placement(2) is None
    g.finish(1, 5.0)
    assert g.queue_length == 0
    assert g.placement(2) == (0, (0, 1))


def test_unlimited_slots_never_queue() -> None:
    g = StrictGang(2)
    for j in range(10):
        g.submit(job(j, 2), 0.0)
    assert g.queue_length == 0
    assert g.slot_count == 10


def _admission_example(policy: MatrixGang) -> MatrixGang:
    # 4 nodes, one row. A (2 nodes, ends at 10) runs; the head H needs all 4 nodes.
    # J (2 nodes, 100 s) and K (2 nodes, 5 s) wait behind H.
    policy.submit(job(1, 2, 10.0), 0.0)  # A
    policy.submit(job(2, 4, 5.0), 0.0)  # H
    policy.submit(job(3, 2, 100.0), 0.0)  # J
    policy.submit(job(4, 2, 5.0), 0.0)  # K
    return policy


def test_fcfs_head_blocks_the_queue() -> None:
    g = _admission_example(StrictGang(4, max_slots=1, admission="fcfs"))
    assert g.matrix.render() == [[1, 1, None, None]]
    assert g.queued == (2, 3, 4)


def test_greedy_places_first_job_that_fits() -> None:
    g = _admission_example(StrictGang(4, max_slots=1, admission="greedy"))
    assert g.matrix.render() == [[1, 1, 3, 3]]  # J, which delays H until 100
    assert g.queued == (2, 4)


def test_backfill_places_only_jobs_that_respect_the_reservation() -> None:
    g = _admission_example(StrictGang(4, max_slots=1, admission="backfill"))
    assert g.matrix.render() == [[1, 1, 4, 4]]  # K ends by 10, J would not
    assert g.queued == (2, 3)
    assert g.reservation is not None
    assert g.reservation.job_id == 2
    assert g.reservation.time == pytest.approx(10.0)
    assert g.reservation.nodes == (0, 1, 2, 3)


def test_backfill_stretches_estimates_by_row_count() -> None:
    def setup(k_estimate: float) -> StrictGang:
        g = StrictGang(4, max_slots=2, admission="backfill")
        g.submit(job(1, 2, 10.0), 0.0)  # row 0: expected end 10 * 2 rows = 20
        g.submit(job(2, 4, 100.0), 0.0)  # row 1
        g.submit(job(3, 4, 1.0), 0.0)  # head: waits for row 0 at t = 20
        g.submit(job(4, 2, k_estimate), 0.0)
        return g

    ok = setup(8.0)  # 8 * 2 = 16 <= 20
    assert ok.placement(4) == (0, (2, 3))
    late = setup(12.0)  # 12 * 2 = 24 > 20
    assert late.placement(4) is None
    assert late.reservation is not None
    assert late.reservation.time == pytest.approx(20.0)


def test_backfill_may_use_nodes_the_head_does_not_need() -> None:
    g = StrictGang(6, max_slots=1, admission="backfill")
    g.submit(job(1, 2, 10.0), 0.0)  # nodes 0, 1 until 10
    g.submit(job(2, 5, 1.0), 0.0)  # head: gets nodes 0-4 at t = 10
    g.submit(job(3, 1, 100.0), 0.0)  # long, but node 5 is not reserved
    assert g.placement(3) == (0, (5,))


def test_service_shortens_expected_end() -> None:
    g = StrictGang(2)
    g.submit(job(1, 2, 10.0), 0.0)
    g.next_quantum(0.0)
    g.next_quantum(4.0)
    assert g.service(1) == pytest.approx(4.0)
    assert g.expected_end(1, 4.0) == pytest.approx(10.0)


def test_finish_compacts_and_keeps_round_robin_order() -> None:
    g = StrictGang(2)
    for j in (1, 2, 3):
        g.submit(job(j, 2), 0.0)
    assert g.next_quantum(0.0).running == {1}
    assert g.next_quantum(1.0).running == {2}
    g.finish(2, 1.5)
    assert g.slot_count == 2
    assert g.next_quantum(2.0).running == {3}
    assert g.next_quantum(3.0).running == {1}
    g.finish(1, 3.5)
    assert g.next_quantum(4.0).running == {3}


def test_finish_of_queued_job_and_errors() -> None:
    g = StrictGang(2, max_slots=1)
    g.submit(job(1, 2), 0.0)
    g.submit(job(2, 2), 0.0)
    g.finish(2, 1.0)
    assert g.queue_length == 0
    with pytest.raises(PolicyError):
        g.finish(2, 1.0)
    with pytest.raises(PolicyError):
        g.submit(job(1, 1), 1.0)
    with pytest.raises(PolicyError):
        g.submit(job(9, 3), 1.0)
    with pytest.raises(PolicyError):
        StrictGang(2, admission="lottery")
    with pytest.raises(PolicyError):
        StrictGang(2, placement="worst-fit")


def test_named_variants() -> None:
    greedy = GangGreedy(4)
    backfill = GangBackfill(4)
    assert (StrictGang.name, GangGreedy.name, GangBackfill.name) == (
        "gang",
        "gang-greedy",
        "gang-backfill",
    )
    assert greedy.admission == "greedy" and greedy.matrix.max_slots == 3
    assert backfill.admission == "backfill" and backfill.matrix.max_slots == 3


@pytest.mark.parametrize("cls", [StrictGang, GangGreedy, GangBackfill])
def test_params_match_constructor(cls: type[StrictGang]) -> None:
    sig = inspect.signature(cls.__init__)
    kwonly = {n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert {p.name: p.default for p in cls.PARAMS} == kwonly


def test_buddy_placement_in_policy() -> None:
    from controller.policies.registry import lookup, make_policy, parse_params

    for name in ("gang", "paired-gang"):
        params = parse_params(lookup(name), {"placement": "buddy"})
        g = make_policy(name, 4, params)
        g.submit(job(1, 3), 0.0)  # holds the whole 4-node row
        g.submit(job(2, 1), 0.0)
        assert g.placement(1) == (0, (0, 1, 2)) and g.placement(2) == (1, (0,))
        g.finish(1, 1.0)  # row 0 empties; job 2 moves up
        assert g.placement(2) == (0, (0,))
    with pytest.raises(PolicyError, match="backfill"):
        StrictGang(4, placement="buddy", admission="backfill")
