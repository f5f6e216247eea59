"""Link profile parsing and validation (pure)."""

from __future__ import annotations

import pytest

from testbed.cluster.profiles import (
    BUILTIN_PROFILES,
    LinkProfile,
    format_rate,
    parse_loss,
    parse_profile,
    parse_rate,
    parse_time_us,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("500mbit", 500_000_000),
        ("2gbit", 2_000_000_000),
        ("100kbit", 100_000),
        ("1.5gbit", 1_500_000_000),
        ("64000", 64_000),
        ("10Mbit", 10_000_000),
    ],
)
def test_parse_rate(text: str, bps: int) -> None:
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["10mbps", "fast", "10 furlongs", "", "nanmbit"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


@pytest.mark.parametrize(
    ("text", "us"),
    [("20us", 20.0), ("1ms", 1000.0), ("0.5s", 500_000.0), ("7", 7.0), ("500ns", 0.5)],
)
def test_parse_time(text: str, us: float) -> None:
    assert parse_time_us(text) == pytest.approx(us)


def test_parse_loss() -> None:
    assert parse_loss("0.1") == pytest.approx(0.1)
    assert parse_loss("2%") == pytest.approx(2.0)
    with pytest.raises(ValueError):
        parse_loss("2ms")


def test_builtin_figures() -> None:
    m = parse_profile("myrinet")
    assert (m.rate_bps, m.delay_us) == (2_000_000_000, 7.0)
    assert parse_profile("gige").rate_bps == 1_000_000_000
    assert parse_profile("fast-ethernet").rate_bps == 100_000_000
    for p in BUILTIN_PROFILES.values():
        assert p.source, f"{p.name} must say where its figures come from"


def test_custom_profile() -> None:
    p = parse_profile("custom:rate=500mbit,delay=20us,jitter=5us,loss=0.1")
    assert p == LinkProfile(
        "custom", 500_000_000, delay_us=20.0, jitter_us=5.0, loss_pct=0.1, source="user-supplied"
    )
    assert p.has_delay_effects()


def test_builtin_override() -> None:
    p = parse_profile("gige:loss=0.5")
    assert p.rate_bps == 1_000_000_000 and p.loss_pct == 0.5
    assert "overrides" in p.source


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("custom:rate=0", "rate must be > 0"),
        ("custom:rate=0mbit", "rate must be > 0"),
        ("custom:delay=1ms", "needs rate"),
        ("custom:rate=1gbit,delay=-5us", "delay must be >= 0"),
        ("custom:rate=1gbit,jitter=-1us", "jitter must be >= 0"),
        ("custom:rate=1gbit,loss=100", "loss must be"),
        ("custom:rate=1gbit,loss=-1", "loss must be"),
        ("custom:rate=100tbit", "above 32gbit"),
        ("custom:rate=1gbit,color=red", "unknown link option"),
        ("custom:rate=1gbit,rate=2gbit", "given twice"),
        ("custom:rate", "key=value"),
        ("token-ring", "unknown link profile"),
    ],
)
def test_impossible_profiles(spec: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_profile(spec)


def test_roundtrip_dict() -> None:
    p = parse_profile("custom:rate=200mbit,delay=1ms")
    assert LinkProfile.from_dict(p.to_dict()) == p


def test_format_rate() -> None:
    assert format_rate(2_000_000_000) == "2gbit"
    assert format_rate(100_000_000) == "100mbit"
    assert format_rate(500) == "500bit"
    assert "rate=2gbit" in parse_profile("myrinet").describe()
