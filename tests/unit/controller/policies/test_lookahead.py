"""Lookahead backfilling (Rajaei et al. 2008 §3.1): hand examples and the DP against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from controller.policies.base import JobRequest, PolicyError
from controller.policies.batch import EASY
from controller.policies.lookahead import Lookahead, best_fill


def job(job_id: int, size: int, estimate: float) -> JobRequest:
    return JobRequest(job_id, size, estimate)


def ids(jobs: list[JobRequest]) -> list[int]:
    return [j.job_id for j in jobs]


def blocked(policy: EASY, running: int, head: int, nodes_head_est: float = 10.0) -> None:
    """One job of ``running`` nodes runs until t=1000; the head needs ``head``."""
    policy.submit(job(100, running, 1000), 0.0)
    assert ids(policy.schedule(0.0)) == [100]
    policy.submit(job(101, head, nodes_head_est), 0.0)


def test_lookahead_fills_the_machine_where_first_fit_does_not() -> None:
    # 10 nodes, 6 free; the head needs all 10 (shadow 1000, no extra).
    # First fit takes job 1 (4 nodes) and strands 2; jobs 2 + 3 use all 6.
    queue = [job(1, 4, 10), job(2, 3, 10), job(3, 3, 10)]
    easy, look = EASY(10), Lookahead(10)
    for policy in (easy, look):
        blocked(policy, running=4, head=10)
        for j in queue:
            policy.submit(j, 0.0)
    assert ids(easy.schedule(0.0)) == [1]
    assert easy.free_nodes == 2
    assert ids(look.schedule(0.0)) == [2, 3]
    assert look.free_nodes == 0


def test_lookahead_respects_the_extra_nodes_of_the_head() -> None:
    # 10 nodes, 6 free; head needs 8 at t=1000 -> 2 extra nodes. Long jobs
    # (running past t=1000) may use only those 2.
    queue = [
        job(1, 2, 10),  # short
        job(2, 4, 5000),  # long, 4 > 2 extra: never
        job(3, 2, 5000),  # long, fits the extra
        job(4, 4, 10),  # short
    ]
    easy, look = EASY(10), Lookahead(10)
    for policy in (easy, look):
        blocked(policy, running=4, head=8)
        for j in queue:
            policy.submit(j, 0.0)
    assert ids(easy.schedule(0.0)) == [1, 3]  # 4 nodes used
    # 6 nodes: {1, 4} and {3, 4} both do it; the earlier job wins the tie.
    assert ids(look.schedule(0.0)) == [1, 4]
    head = look.head_reservation
    assert head is not None and head.extra == 2  # no long job was started


def test_lookahead_starts_the_head_first_when_it_fits() -> None:
    look = Lookahead(10)
    look.submit(job(1, 6, 10), 0.0)
    look.submit(job(2, 4, 10), 0.0)
    look.submit(job(3, 1, 10), 0.0)
    assert ids(look.schedule(0.0)) == [1, 2]
    assert look.head_reservation is not None and look.head_reservation.job_id == 3


def test_lookahead_depth_limits_the_jobs_considered() -> None:
    queue = [job(1, 4, 10), job(2, 3, 10), job(3, 3, 10)]
    look = Lookahead(10, depth=2)
    blocked(look, running=4, head=10)
    for j in queue:
        look.submit(j, 0.0)
    # Only jobs 1 and 2 are looked at: {1} (4 nodes) beats {2} (3 nodes).
    assert ids(look.schedule(0.0)) == [1]
    assert look.free_nodes == 2
    assert look.queue_length == 3


def test_lookahead_depth_is_validated_and_declared() -> None:
    with pytest.raises(PolicyError):
        Lookahead(4, depth=-1)
    assert [p.name for p in Lookahead.PARAMS] == ["depth"]
    assert Lookahead.PARAMS[0].default == 0


def test_lookahead_later_arrival_uses_remaining_nodes() -> None:
    look = Lookahead(10)
    blocked(look, running=4, head=10)
    look.submit(job(1, 5, 10), 0.0)
    assert ids(look.schedule(0.0)) == [1]
    look.submit(job(2, 2, 10), 1.0)  # 1 node left: no
    look.submit(job(3, 1, 10), 1.0)
    assert ids(look.schedule(1.0)) == [3]


# --- the DP -------------------------------------------------------------------


def brute(sizes: list[int], long: list[bool], free: int, extra: int) -> list[int]:
    """Lexicographically first subset using the most nodes, by enumeration."""
    best_used = -1
    best: list[int] = []
    # product((1, 0)) enumerates inclusion vectors from lexicographically
    # largest to smallest: the first subset reaching a value is the wanted one.
    for picks in itertools.product((1, 0), repeat=len(sizes)):
        chosen = [i for i, p in enumerate(picks) if p]
        used = sum(sizes[i] for i in chosen)
        used_long = sum(sizes[i] for i in chosen if long[i])
        if used <= free and used_long <= extra and used > best_used:
            best_used, best = used, chosen
    return best if free > 0 else []


def test_best_fill_matches_brute_force() -> None:
    rng = random.Random(2003)
    for _ in range(1500):
        n = rng.randint(0, 9)
        sizes = [rng.choice([1, 1, 2, 3, 4, 5, 8, 12]) for _ in range(n)]
        long = [rng.random() < 0.5 for _ in range(n)]
        free = rng.randint(0, 16)
        extra = rng.randint(0, 16)
        assert best_fill(sizes, long, free, extra) == brute(sizes, long, free, extra)


def test_best_fill_examples() -> None:
    assert best_fill([4, 3, 3], [False] * 3, 6, 0) == [1, 2]
    assert best_fill([], [], 5, 5) == []
    assert best_fill([3], [False], 0, 0) == []
    # Long job only if the extra nodes allow it.
    assert best_fill([3, 2], [True, False], 5, 2) == [1]
    assert best_fill([3, 2], [True, False], 5, 3) == [0, 1]
    # Many identical jobs: only as many as fit are needed (and the earliest).
    assert best_fill([2] * 50 + [1], [False] * 51, 5, 0) == [0, 1, 50]


def test_best_fill_large_queue_is_fast_enough_to_be_exact() -> None:
    rng = random.Random(7)
    sizes = [rng.randint(1, 64) for _ in range(2000)]
    long = [rng.random() < 0.5 for _ in range(2000)]
    chosen = best_fill(sizes, long, 128, 40)
    assert sum(sizes[i] for i in chosen) == 128
    assert sum(sizes[i] for i in chosen if long[i]) <= 40
