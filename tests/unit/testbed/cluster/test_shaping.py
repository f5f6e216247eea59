"""HTB/netem parameter computation and read-back checks (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.cluster.profiles import parse_profile
from testbed.cluster.shaping import (
    check_applied,
    delay_mechanism,
    handle_str,
    htb_params,
    netem_params,
    summarize_tc,
)


def test_burst_is_one_millisecond_of_rate() -> None:
    p = htb_params(100_000_000)
    assert p.burst_bytes == 12_500 and p.cburst_bytes == 12_500
    assert p.rate_bytes == 12_500_000 and p.ceil_bps == 100_000_000
    assert htb_params(2_000_000_000).burst_bytes == 250_000


def test_burst_floor_is_two_frames() -> None:
    assert htb_params(1_000_000).burst_bytes == 2 * 1514
    assert htb_params(1_000_000, mtu=9000).burst_bytes == 2 * 9014


def test_htb_rejects_nonpositive() -> None:
    with pytest.raises(ValueError):
        htb_params(0)
    with pytest.raises(ValueError):
        htb_params(1000, burst_time_s=0)


def test_netem_params() -> None:
    assert netem_params(parse_profile("custom:rate=1gbit")) is None
    n = netem_params(parse_profile("custom:rate=1gbit,delay=20.4us,jitter=5.6us,loss=0.1"))
    assert n is not None
    assert (n.delay_us, n.jitter_us, n.loss_pct) == (20, 6, 0.1)


def test_delay_mechanism() -> None:
    assert delay_mechanism(True) == "netem"
    assert delay_mechanism(False) == "userspace"


def test_handle_str() -> None:
    assert handle_str(0x10000) == "1:"
    assert handle_str(0x10010) == "1:10"
    assert handle_str(0x100000) == "10:"


def test_check_applied_and_summary() -> None:
    p = htb_params(100_000_000)
    good: list[dict[str, Any]] = [
        {"type": "qdisc", "kind": "htb", "handle": "1:"},
        {"type": "class", "kind": "htb", "handle": "1:10", "rate_bps": 100_000_000,
         "ceil_bps": 100_000_000},
    ]  # fmt: skip
    assert check_applied(good, p) == []
    assert "rate 100mbit" in summarize_tc(good)
    assert check_applied(good[:1], p) == ["htb class 1:10 missing"]
    bad = [dict(good[1], rate_bps=50_000_000)]
    assert check_applied(bad, p)
    assert summarize_tc([]) == "(none)"
