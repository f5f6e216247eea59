"""The availability profile behind conservative backfilling."""

from __future__ import annotations

import random

from controller.policies.availability import Availability


def steps(p: Availability) -> list[tuple[float, int]]:
    return list(zip(p.times, p.free, strict=True))


def test_reserve_and_release_restore_the_profile() -> None:
    p = Availability(10)
    p.reserve(5.0, 10.0, 4)
    assert steps(p) == [(0.0, 10), (5.0, 6), (15.0, 10)]
    p.reserve(10.0, 10.0, 6)
    assert steps(p) == [(0.0, 10), (5.0, 6), (10.0, 0), (15.0, 4), (20.0, 10)]
    assert p.free_at(12.0) == 0 and p.free_at(15.0) == 4 and p.free_at(99.0) == 10
    p.release(10.0, 10.0, 6)
    p.release(5.0, 10.0, 4)
    assert steps(p) == [(0.0, 10)]  # equal neighbours merged again


def test_earliest_skips_holes_that_are_too_short() -> None:
    p = Availability(10)
    p.reserve(0.0, 5.0, 8)  # 2 free on [0, 5)
    p.reserve(7.0, 5.0, 8)  # 10 free on [5, 7), 2 free on [7, 12)
    assert p.earliest(2, 100.0) == 0.0
    assert p.earliest(5, 2.0) == 5.0  # fits the hole exactly
    assert p.earliest(5, 3.0) == 12.0  # too long for the hole
    assert p.earliest(5, 3.0, limit=12.0) is None
    assert p.earliest(10, 0.0) == 5.0  # zero length still needs the nodes


def test_advance_drops_the_past() -> None:
    p = Availability(4)
    p.reserve(0.0, 10.0, 4)
    p.reserve(10.0, 10.0, 2)
    p.advance(12.0)
    assert steps(p) == [(12.0, 2), (20.0, 4)]
    p.advance(5.0)  # not later: nothing happens
    assert p.origin == 12.0
    p.reserve(0.0, 20.0, 1)  # clipped to the origin
    assert steps(p) == [(12.0, 1), (20.0, 4)]


def test_earliest_moving_equals_release_then_search() -> None:
    rng = random.Random(11)
    for _ in range(500):
        p = Availability(8)
        slots = []
        for _ in range(rng.randint(1, 8)):
            size = rng.randint(1, 8)
            dur = float(rng.randint(0, 6))
            start = p.earliest(size, dur)
            assert start is not None
            p.reserve(start, dur, size)
            slots.append((start, dur, size))
        start, dur, size = rng.choice(slots)
        limit = start if rng.random() < 0.7 else float(rng.randint(0, 20))
        before = steps(p)
        got = p.earliest_moving(size, dur, start, limit)
        assert steps(p) == before  # the profile is left as it was
        p.release(start, dur, size)
        want = p.earliest(size, dur, limit)
        assert got == want
        # The last segment always has every node free.
        assert p.free[-1] == 8
