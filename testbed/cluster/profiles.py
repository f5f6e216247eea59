"""Link profiles: rate, one-way delay, jitter and loss of the emulated data network.

Built-in profiles and where their figures come from
----------------------------------------------------

``myrinet``
    Myrinet-2000 with the GM message layer: 2 Gb/s per direction (links are
    full duplex, 2+2 Gb/s; Myricom's Myrinet-2000 product documentation and
    the Myrinet link specification ANSI/VITA 26-1998) and about 7 µs one-way
    small-message latency for GM ping-pong (Myricom's published GM performance
    figures for LANai-9 PCI64 cards; see also Boden et al., "Myrinet: A
    Gigabit-per-Second Local Area Network", IEEE Micro 15(1), 1995, for the
    architecture). This is the network the coscheduling studies being
    reproduced ran on.

``gige``
    Gigabit Ethernet: 1 Gb/s (IEEE 802.3z-1998 / 802.3ab-1999). One-way delay
    50 µs: a representative small-message TCP/IP latency through a switch of
    that era; NetPIPE measurements of TCP over GigE on Linux clusters fall in
    the tens of µs (Turner and Chen, "Protocol-dependent message-passing
    performance on Linux clusters", IEEE Cluster 2002, doi:10.1109/CLUSTR.2002.1137746).
    The value is a chosen representative, not one quoted measurement.

``fast-ethernet``
    Fast Ethernet: 100 Mb/s (IEEE 802.3u-1995). One-way delay 80 µs: again a
    representative TCP/IP small-message figure (serialisation of a minimum
    frame alone is ~6.7 µs at 100 Mb/s; host stack and switch dominate; cf.
    Snell, Mikler and Gustafson, "NetPIPE: A Network Protocol Independent
    Performance Evaluator", IASTED 1996, and Turner and Chen 2002).

``custom``
    Everything from options: ``custom:rate=500mbit,delay=20us,jitter=5us,loss=0.1``.

Any built-in profile accepts the same ``key=value`` overrides, e.g.
``gige:loss=0.5``. Rates use tc's bit units (``bit``, ``kbit``, ``mbit``,
``gbit``; SI multiples of 1000); times ``ns``, ``us``, ``ms``, ``s`` (a bare
number is µs, as in tc); loss is a percentage.

This module is pure: parsing and validation only, no kernel access.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Any

# HTB's 32-bit rate field holds bytes/s; beyond ~34 Gb/s the kernel needs the
# 64-bit attribute, which we do not use. Nothing here needs more.
MAX_RATE_BPS = 32_000_000_000
# netem takes delay/jitter in integer µs via pyroute2; keep the range sane.
MAX_DELAY_US = 10_000_000.0


@dataclass(frozen=True)
class LinkProfile:
    """Shaping parameters for every node's data link.

    ``delay_us`` is the one-way node-to-node latency to add; ``jitter_us``
    its spread; ``loss_pct`` the packet loss probability in percent.
    """

    name: str
    rate_bps: int
    delay_us: float = 0.0
    jitter_us: float = 0.0
    loss_pct: float = 0.0
    source: str = ""

    def has_delay_effects(self) -> bool:
        return self.delay_us > 0 or self.jitter_us > 0 or self.loss_pct > 0

    def describe(self) -> str:
        parts = [f"rate={format_rate(self.rate_bps)}", f"delay={format_time(self.delay_us)}"]
        if self.jitter_us:
            parts.append(f"jitter={format_time(self.jitter_us)}")
        if self.loss_pct:
            parts.append(f"loss={self.loss_pct:g}%")
        return f"{self.name} ({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LinkProfile:
        return cls(
            name=str(d["name"]),
            rate_bps=int(d["rate_bps"]),
            delay_us=float(d.get("delay_us", 0.0)),
            jitter_us=float(d.get("jitter_us", 0.0)),
            loss_pct=float(d.get("loss_pct", 0.0)),
            source=str(d.get("source", "")),
        )


BUILTIN_PROFILES: dict[str, LinkProfile] = {
    "myrinet": LinkProfile(
        "myrinet",
        rate_bps=2_000_000_000,
        delay_us=7.0,
        source="Myrinet-2000 (2+2 Gb/s, ANSI/VITA 26-1998), GM one-way latency ~7 us (Myricom)",
    ),
    "gige": LinkProfile(
        "gige",
        rate_bps=1_000_000_000,
        delay_us=50.0,
        source="IEEE 802.3ab 1 Gb/s; TCP latency tens of us (Turner & Chen, IEEE Cluster 2002)",
    ),
    "fast-ethernet": LinkProfile(
        "fast-ethernet",
        rate_bps=100_000_000,
        delay_us=80.0,
        source="IEEE 802.3u 100 Mb/s; TCP latency representative (Snell et al. 1996 NetPIPE)",
    ),
}

DEFAULT_PROFILE = "myrinet"

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_TIME_UNITS = {"ns": 1e-3, "us": 1.0, "usec": 1.0, "ms": 1e3, "msec": 1e3, "s": 1e6, "sec": 1e6}
_NUM_UNIT = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z%]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    m = _NUM_UNIT.match(text)
    if not m:
        raise ValueError(f"cannot parse {what} {text!r}")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise ValueError(f"{what} {text!r} is not finite")
    return value, m.group(2).lower()


def parse_rate(text: str) -> int:
    """Parse a tc-style rate into bit/s. ``"500mbit"`` -> 500_000_000.

    Byte units (tc's ``bps``/``mbps``, which mean *bytes*) are refused on
    purpose: they are a classic source of 8x mistakes.
    """
    value, unit = _split(text, "rate")
    unit = unit or "bit"
    if unit.endswith("bps"):
        raise ValueError(f"rate {text!r}: byte units are ambiguous; use bit/kbit/mbit/gbit")
    if unit not in _RATE_UNITS:
        raise ValueError(f"rate {text!r}: unknown unit {unit!r} (use bit, kbit, mbit, gbit)")
    return round(value * _RATE_UNITS[unit])


def parse_time_us(text: str) -> float:
    """Parse a tc-style time into microseconds (bare numbers are µs)."""
    value, unit = _split(text, "time")
    unit = unit or "us"
    if unit not in _TIME_UNITS:
        raise ValueError(f"time {text!r}: unknown unit {unit!r} (use ns, us, ms, s)")
    return value * _TIME_UNITS[unit]


def parse_loss(text: str) -> float:
    value, unit = _split(text, "loss")
    if unit not in ("", "%"):
        raise ValueError(f"loss {text!r}: give a percentage, e.g. 0.1 or 0.1%")
    return value


def format_rate(bps: int) -> str:
    for unit, mult in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= mult:
            return f"{bps / mult:g}{unit}"
    return f"{bps}bit"


def format_time(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:g}ms"
    return f"{us:g}us"


def validate(profile: LinkProfile) -> LinkProfile:
    """Refuse profiles that cannot be emulated. Returns the profile unchanged."""
    if profile.rate_bps <= 0:
        raise ValueError(f"link rate must be > 0 (got {profile.rate_bps} bit/s)")
    if profile.rate_bps < 8_000:
        # HTB cannot do anything useful below a few kbit/s of 1500-byte frames.
        raise ValueError(f"link rate {format_rate(profile.rate_bps)} is below 8kbit")
    if profile.rate_bps > MAX_RATE_BPS:
        raise ValueError(f"link rate {format_rate(profile.rate_bps)} is above 32gbit")
    for label, value in (("delay", profile.delay_us), ("jitter", profile.jitter_us)):
        if value < 0:
            raise ValueError(f"{label} must be >= 0 (got {format_time(value)})")
        if value > MAX_DELAY_US:
            raise ValueError(f"{label} {format_time(value)} is above 10s")
    if not 0 <= profile.loss_pct < 100:
        raise ValueError(f"loss must be in [0, 100) percent (got {profile.loss_pct:g})")
    return profile


def parse_profile(spec: str) -> LinkProfile:
    """Parse ``NAME[:key=value,...]`` into a validated :class:`LinkProfile`.

    Keys: ``rate``, ``delay``, ``jitter``, ``loss``. ``custom`` requires
    ``rate``. Raises :class:`ValueError` with a message fit for the user.
    """
    name, _, opts = spec.strip().partition(":")
    name = name.strip().lower()
    if name == "custom":
        base: LinkProfile | None = None
    elif name in BUILTIN_PROFILES:
        base = BUILTIN_PROFILES[name]
    else:
        known = ", ".join([*BUILTIN_PROFILES, "custom"])
        raise ValueError(f"unknown link profile {name!r} (known: {known})")

    fields: dict[str, Any] = {}
    seen: set[str] = set()
    for item in filter(None, (p.strip() for p in opts.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or not value.strip():
            raise ValueError(f"link option {item!r} must be key=value")
        if key in seen:
            raise ValueError(f"link option {key!r} given twice")
        seen.add(key)
        if key == "rate":
            fields["rate_bps"] = parse_rate(value)
        elif key == "delay":
            fields["delay_us"] = parse_time_us(value)
        elif key == "jitter":
            fields["jitter_us"] = parse_time_us(value)
        elif key == "loss":
            fields["loss_pct"] = parse_loss(value)
        else:
            raise ValueError(f"unknown link option {key!r} (use rate, delay, jitter, loss)")

    if base is None:
        if "rate_bps" not in fields:
            raise ValueError("custom link profile needs rate=..., e.g. custom:rate=500mbit")
        profile = LinkProfile(name="custom", source="user-supplied", **fields)
    else:
        profile = replace(base, **fields)
        if fields:
            profile = replace(profile, source=base.source + " (with overrides)")
    return validate(profile)
