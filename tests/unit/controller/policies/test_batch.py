"""Hand-checked examples for FCFS, EASY and conservative backfilling (Rajaei et al. 2008 §3.1)."""

from __future__ import annotations

import math

import pytest

from controller.policies.base import JobRequest, PolicyError
from controller.policies.batch import EASY, FCFS, RunningSet
from controller.policies.conservative import Conservative
from controller.policies.lookahead import Lookahead


def job(job_id: int, size: int, estimate: float, submit: float = 0.0) -> JobRequest:
    return JobRequest(job_id, size, estimate, submit)


def ids(jobs: list[JobRequest]) -> list[int]:
    return [j.job_id for j in jobs]


ALL = (FCFS, EASY, Conservative, Lookahead)


# --- contract ---------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
def test_too_large_job_is_refused_with_reason(cls: type[FCFS]) -> None:
    policy = cls(4)
    with pytest.raises(PolicyError, match="5 nodes"):
        policy.submit(job(1, 5, 10), 0.0)
    assert policy.queue_length == 0


@pytest.mark.parametrize("cls", ALL)
def test_finish_of_unknown_job_is_refused(cls: type[FCFS]) -> None:
    policy = cls(4)
    policy.submit(job(1, 2, 10), 0.0)
    with pytest.raises(PolicyError):
        policy.finish(1, 1.0)  # queued, not running
    with pytest.raises(PolicyError):
        policy.finish(99, 1.0)


@pytest.mark.parametrize("cls", ALL)
def test_duplicate_submission_is_refused(cls: type[FCFS]) -> None:
    policy = cls(4)
    policy.submit(job(1, 2, 10), 0.0)
    with pytest.raises(PolicyError):
        policy.submit(job(1, 1, 10), 0.0)
    policy.schedule(0.0)
    with pytest.raises(PolicyError):
        policy.submit(job(1, 1, 10), 1.0)


@pytest.mark.parametrize("cls", ALL)
def test_zero_nodes_is_refused(cls: type[FCFS]) -> None:
    with pytest.raises(PolicyError):
        cls(0)


@pytest.mark.parametrize("cls", ALL)
def test_counters_follow_starts_and_ends(cls: type[FCFS]) -> None:
    policy = cls(4)
    policy.submit(job(1, 3, 10), 0.0)
    policy.submit(job(2, 3, 10), 0.0)
    assert policy.queue_length == 2 and policy.free_nodes == 4
    assert ids(policy.schedule(0.0)) == [1]
    assert policy.queue_length == 1 and policy.free_nodes == 1
    assert policy.schedule(0.0) == []  # nothing changed
    policy.finish(1, 10.0)
    assert policy.free_nodes == 4
    assert ids(policy.schedule(10.0)) == [2]
    assert policy.queue_length == 0 and policy.free_nodes == 1


@pytest.mark.parametrize("cls", ALL)
def test_class_metadata(cls: type[FCFS]) -> None:
    assert isinstance(cls.name, str) and cls.name
    assert isinstance(cls.PARAMS, tuple)


# --- FCFS -------------------------------------------------------------------


def test_fcfs_blocks_behind_the_head() -> None:
    policy = FCFS(10)
    policy.submit(job(1, 8, 100), 0.0)
    assert ids(policy.schedule(0.0)) == [1]
    policy.submit(job(2, 4, 10), 1.0)  # does not fit: 2 free
    policy.submit(job(3, 1, 10), 1.0)  # would fit, but FCFS never jumps
    assert policy.schedule(1.0) == []
    assert policy.free_nodes == 2
    policy.finish(1, 50.0)
    assert ids(policy.schedule(50.0)) == [2, 3]


# --- EASY -------------------------------------------------------------------


def easy_setup(cls: type[EASY] = EASY) -> EASY:
    """10 nodes; job 1 (6 nodes, est. 100) runs; job 2 (8 nodes) is head."""
    policy = cls(10)
    policy.submit(job(1, 6, 100), 0.0)
    assert ids(policy.schedule(0.0)) == [1]
    policy.submit(job(2, 8, 50), 0.0)
    return policy


def test_easy_head_reservation_is_shadow_time_and_extra_nodes() -> None:
    policy = easy_setup()
    assert policy.schedule(0.0) == []
    head = policy.head_reservation
    assert head is not None
    # 4 free now; at t=100 job 1 frees 6 -> 10 free, head needs 8 -> 2 extra.
    assert (head.job_id, head.shadow, head.extra) == (2, 100.0, 2)


def test_easy_backfills_short_job_and_long_job_on_extra_nodes_only() -> None:
    policy = easy_setup()
    policy.submit(job(3, 3, 200), 0.0)  # runs past t=100 and needs 3 > 2 extra
    policy.submit(job(4, 2, 200), 0.0)  # runs past t=100 but fits in the 2 extra
    policy.submit(job(5, 2, 90), 0.0)  # ends before t=100
    policy.submit(job(6, 1, 10), 0.0)  # would fit too, but no node is left
    assert ids(policy.schedule(0.0)) == [4, 5]
    assert policy.free_nodes == 0
    head = policy.head_reservation
    assert head is not None and head.extra == 0
    # The head gets its reservation: at t=90 job 5 ends, at t=100 job 1 ends.
    policy.finish(5, 90.0)
    assert ids(policy.schedule(90.0)) == [6]  # short again: ends at 100
    policy.finish(1, 100.0)
    policy.finish(6, 100.0)
    assert ids(policy.schedule(100.0)) == [2]


def test_easy_does_not_backfill_a_job_that_would_delay_the_head() -> None:
    policy = easy_setup()
    policy.submit(job(3, 4, 101), 0.0)  # fits now, ends 1 s after the shadow
    assert policy.schedule(0.0) == []
    # A later arrival is still examined (incremental path).
    policy.submit(job(4, 4, 100), 5.0)  # ends at 105 > 100
    assert policy.schedule(5.0) == []
    policy.submit(job(5, 4, 95), 5.0)  # ends exactly at the shadow time
    assert ids(policy.schedule(5.0)) == [5]


def test_easy_recomputes_after_an_early_end() -> None:
    policy = easy_setup()
    policy.submit(job(3, 4, 60), 0.0)  # ends at 60 <= 100: backfilled
    assert ids(policy.schedule(0.0)) == [3]
    policy.finish(1, 30.0)  # job 1 ends 70 s early; 6 free, head needs 8
    assert policy.schedule(30.0) == []
    head = policy.head_reservation
    assert head is not None and (head.shadow, head.extra) == (60.0, 2)
    policy.finish(3, 40.0)
    assert ids(policy.schedule(40.0)) == [2]
    assert policy.head_reservation is None


def test_easy_job_running_past_its_estimate_makes_shadow_now() -> None:
    policy = easy_setup()
    assert policy.schedule(0.0) == []
    # Job 1 was estimated to end at 100 but is still running at 150: its
    # nodes are expected back at any moment, so the shadow time is now and
    # only zero-length jobs or the 2 extra nodes can be used.
    policy.submit(job(3, 2, 10), 150.0)  # long: takes the 2 extra nodes
    policy.submit(job(4, 2, 10), 150.0)  # long, no extra left
    policy.submit(job(5, 2, 0), 150.0)  # ends "by now": allowed
    started = policy.schedule(150.0)
    head = policy.head_reservation
    assert head is not None and head.shadow == 150.0 and head.extra == 0
    assert ids(started) == [3, 5]
    policy.finish(1, 160.0)
    policy.finish(5, 160.0)
    assert ids(policy.schedule(160.0)) == [2]


def test_easy_starts_several_heads_in_order() -> None:
    policy = EASY(10)
    for i, size in enumerate([3, 3, 3, 3], start=1):
        policy.submit(job(i, size, 10), 0.0)
    assert ids(policy.schedule(0.0)) == [1, 2, 3]
    head = policy.head_reservation
    assert head is not None and head.job_id == 4 and head.shadow == 10.0


# --- conservative -----------------------------------------------------------


def test_conservative_protects_every_reservation_where_easy_does_not() -> None:
    # 10 nodes; job 1 (5 nodes, est. 100) runs. Job 2 (8 nodes) reserves
    # [100, 200); job 3 (10 nodes) reserves [200, 300). Job 4 (2 nodes, est.
    # 1000) fits now in EASY's extra nodes but would push job 3 back.
    def load(policy: EASY | Conservative) -> list[int]:
        policy.submit(job(1, 5, 100), 0.0)
        policy.schedule(0.0)
        policy.submit(job(2, 8, 100), 0.0)
        policy.submit(job(3, 10, 100), 0.0)
        policy.submit(job(4, 2, 1000), 0.0)
        return ids(policy.schedule(0.0))

    assert load(EASY(10)) == [4]
    cons = Conservative(10)
    assert load(cons) == []
    assert [cons.reservation(i) for i in (2, 3, 4)] == [100.0, 200.0, 300.0]


def test_conservative_backfills_only_into_holes() -> None:
    policy = Conservative(10)
    policy.submit(job(1, 5, 100), 0.0)
    assert ids(policy.schedule(0.0)) == [1]
    policy.submit(job(2, 10, 50), 0.0)  # [100, 150)
    policy.submit(job(3, 5, 100), 0.0)  # fits [0, 100) exactly
    policy.submit(job(4, 5, 101), 0.0)  # would overlap job 2 -> after it
    assert policy.reservation(3) == 0.0
    assert policy.reservation(4) == 150.0
    assert ids(policy.schedule(0.0)) == [3]
    assert policy.reservation(3) is None  # running, no longer waiting


def test_conservative_compresses_after_an_early_end() -> None:
    policy = Conservative(10)
    policy.submit(job(1, 5, 100), 0.0)
    policy.schedule(0.0)
    policy.submit(job(2, 10, 50), 0.0)  # [100, 150)
    policy.submit(job(3, 6, 10), 0.0)  # [150, 160)
    assert (policy.reservation(2), policy.reservation(3)) == (100.0, 150.0)
    policy.finish(1, 40.0)
    assert ids(policy.schedule(40.0)) == [2]
    assert policy.reservation(3) == 90.0  # moved up behind job 2's new slot


def test_conservative_compression_repeats_until_nothing_moves() -> None:
    # Job 3 is looked at first and can only go to 3.5, behind job 5's old
    # slot; job 5 then moves to 2, which frees [3, 3.5): a second pass must
    # move job 3 to 3 (an instant where something ends), or nobody would
    # ever wake it up at 3.5.
    policy = Conservative(2)
    policy.submit(job(1, 1, 4), 0.0)  # [0, 4)
    policy.submit(job(2, 1, 3), 0.0)  # [0, 3)
    assert ids(policy.schedule(0.0)) == [1, 2]
    policy.submit(job(3, 2, 1), 0.0)  # [4, 5)
    policy.submit(job(5, 1, 0.5), 0.0)  # [3, 3.5)
    assert (policy.reservation(3), policy.reservation(5)) == (4.0, 3.0)
    policy.finish(1, 2.0)
    assert ids(policy.schedule(2.0)) == [5]
    assert policy.reservation(3) == 3.0


def test_conservative_compression_never_moves_a_job_later() -> None:
    policy = Conservative(4)
    policy.submit(job(1, 4, 10), 0.0)
    policy.schedule(0.0)
    for i in range(2, 8):
        policy.submit(job(i, 1 + i % 4, 5 + i), 0.0)
    before = {i: policy.reservation(i) for i in range(2, 8)}
    policy.finish(1, 3.0)
    policy.schedule(3.0)
    for i, planned in before.items():
        now = policy.reservation(i)
        assert planned is not None
        assert now is None or now <= planned


def test_conservative_job_running_past_its_estimate() -> None:
    policy = Conservative(10)
    policy.submit(job(1, 5, 100), 0.0)
    policy.schedule(0.0)
    policy.submit(job(2, 10, 50), 0.0)
    assert policy.reservation(2) == 100.0
    # At 150 job 1 is still running: job 2 cannot start, is replanned just
    # after now, and starts when job 1 is finally reported done.
    policy.submit(job(3, 5, 10), 150.0)
    assert policy.schedule(150.0) == []
    planned = policy.reservation(2)
    assert planned is not None and 150.0 < planned < 150.001
    assert policy.reservation(3) is not None and policy.reservation(3) > 150.0
    policy.finish(1, 170.0)
    assert ids(policy.schedule(170.0)) == [2]
    assert policy.free_nodes == 0


def test_conservative_waits_for_a_same_instant_finish() -> None:
    # Job 2 is planned at t=10, when job 1 is estimated to end; if the caller
    # asks at t=10 before reporting job 1's end, job 2 must wait for it.
    policy = Conservative(4)
    policy.submit(job(1, 4, 10), 0.0)
    policy.schedule(0.0)
    policy.submit(job(2, 4, 10), 0.0)
    assert policy.schedule(10.0) == []
    assert policy.free_nodes == 0
    policy.finish(1, 10.0)
    assert ids(policy.schedule(10.0)) == [2]


def test_conservative_zero_estimate_needs_free_nodes_at_its_start() -> None:
    policy = Conservative(2)
    policy.submit(job(1, 2, 5), 0.0)
    policy.schedule(0.0)
    policy.submit(job(2, 1, 0), 0.0)
    assert policy.reservation(2) == 5.0
    assert policy.schedule(0.0) == []


# --- running set --------------------------------------------------------------


def test_running_set_shadow_counts_ties_and_overdue_jobs() -> None:
    run = RunningSet(10)
    run.start(job(1, 3, 10), 0.0)
    run.start(job(2, 3, 10), 0.0)
    run.start(job(3, 2, 20), 0.0)
    assert run.free == 2
    # Need 5: at t=10 jobs 1 and 2 end together -> 8 free, 3 extra.
    assert run.shadow(5, 0.0) == (10.0, 3)
    # At t=12 jobs 1 and 2 are overdue: shadow is now, both still count.
    assert run.shadow(5, 12.0) == (12.0, 3)
    assert run.shadow(10, 0.0) == (20.0, 0)
    assert run.overrun(12.0) and not run.overrun(10.0)
    assert run.finish(2) == (10.0, 3)
    assert [e[1] for e in run.ends] == [1, 3]
    with pytest.raises(PolicyError):
        run.finish(2)


def test_shadow_with_nothing_running_and_enough_free() -> None:
    run = RunningSet(4)
    assert run.shadow(3, 7.0) == (7.0, 1)
    assert not math.isinf(run.shadow(4, 7.0)[0])
