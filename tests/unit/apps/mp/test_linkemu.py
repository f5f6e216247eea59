"""Userspace link emulation (apps/mp/linkemu.py): the delay a ping-pong sees between two
processes, and the model -- serialization, jitter, per-sender order, the loss penalty."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from apps.mp import Comm, LinkEmu, MPError
from apps.mp.linkemu import MSS, RTO_MIN_NS


def test_due_time_serialization_delay_and_order() -> None:
    rng = random.Random(1)
    emu = LinkEmu(delay_us=100, rate_bps=8e6)  # 1 MB/s: 1 s for 1e6 bytes with the header
    assert emu.due_ns(999_960, send_ns=0, read_ns=0, prev_due_ns=0, rng=rng) == 1_000_100_000
    # never before it was read, never before the previous message from the same sender
    assert emu.due_ns(10, 0, read_ns=7 * 10**9, prev_due_ns=0, rng=rng) == 7 * 10**9
    assert emu.due_ns(10, 0, read_ns=0, prev_due_ns=5 * 10**9, rng=rng) == 5 * 10**9


def test_jitter_is_uniform_around_the_delay_and_clamped_at_zero() -> None:
    rng = random.Random(2)
    emu = LinkEmu(delay_us=100, jitter_us=50)
    dues = [emu.due_ns(0, 0, 0, 0, rng) for _ in range(4000)]
    assert min(dues) >= 50_000 and max(dues) <= 150_000
    assert abs(statistics.mean(dues) - 100_000) < 2_000
    wide = LinkEmu(delay_us=10, jitter_us=100)  # delay - jitter < 0: clamped at 0
    dues = [wide.due_ns(0, 0, 0, 0, rng) for _ in range(2000)]
    assert min(dues) == 0 and max(dues) <= 110_000
    assert sum(d == 0 for d in dues) > 0.3 * len(dues)  # P(jitter < -10 us) = 0.45


def test_loss_penalty_is_one_rto_per_lost_segment_with_a_fixed_rng() -> None:
    emu = LinkEmu(loss_pct=30.0)
    size = 10_000  # with the 40-byte header: ceil(10040 / 1448) = 7 segments
    for seed in range(20):
        draws = random.Random(seed)
        expected = sum(draws.random() < 0.3 for _ in range(7)) * RTO_MIN_NS
        assert emu.loss_penalty_ns(size, random.Random(seed)) == expected
    assert emu.loss_penalty_ns(0, random.Random(0)) in (0, RTO_MIN_NS)  # one segment
    # on average: segments x p x 200 ms
    big = LinkEmu(loss_pct=1.0)
    segs = math.ceil((40 + (1 << 20)) / MSS)
    rng = random.Random(3)
    mean = statistics.mean(big.loss_penalty_ns(1 << 20, rng) for _ in range(3000))
    assert abs(mean - segs * 0.01 * RTO_MIN_NS) < 0.05 * segs * 0.01 * RTO_MIN_NS
    assert LinkEmu(delay_us=1).loss_penalty_ns(10**6, rng) == 0


def test_the_rng_is_seeded_per_job_and_rank() -> None:
    a, b, c = Comm(0, 1, job="j"), Comm(0, 1, job="j"), Comm(0, 1, job="k")
    assert a.rng.random() == b.rng.random() != c.rng.random()
    for x in (a, b, c):
        x.close()


def test_environment() -> None:
    assert LinkEmu.from_env({}) is None
    assert LinkEmu.from_env({"COSCHED_NET_RATE_BPS": "1e9"}) is None  # HTB shapes the rate
    assert LinkEmu.from_env({"COSCHED_NET_DELAY_US": "50", "COSCHED_NET_RATE_BPS": "1e9"}) == (
        LinkEmu(delay_us=50.0, rate_bps=1e9)
    )
    with pytest.raises(MPError, match="COSCHED_NET_LOSS_PCT must be below 100"):
        LinkEmu.from_env({"COSCHED_NET_LOSS_PCT": "100"})
    with pytest.raises(MPError, match="COSCHED_NET_JITTER_US='-1' must be >= 0"):
        LinkEmu.from_env({"COSCHED_NET_JITTER_US": "-1"})
    with pytest.raises(MPError, match="COSCHED_NET_DELAY_US='x' is not a number"):
        LinkEmu.from_env({"COSCHED_NET_DELAY_US": "x"})
