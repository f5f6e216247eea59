"""Traffic shaping of the data links: HTB for rate, netem (where present) for delay.

Layout on every shaped interface (both the node end and the bridge-port end of
a node's data veth, so traffic into and out of a node is rate-limited)::

    1:   htb root, default class 0x10
    1:10 htb class, rate = ceil = profile rate
    10:  netem child of 1:10 (only on the node end, only if the kernel has netem)

Delay, jitter and loss go on the node (sender) side only, so a node-to-node
packet crosses exactly one netem and sees the profile's one-way delay once.
When the kernel has no netem (the case on the development VMs), the delay
mechanism is recorded as ``"userspace"`` and the message library adds it.

Burst sizing: HTB needs a bucket of at least one full frame or it cannot send a
packet at all, and a bucket that covers about one timer period so the rate is
reached despite timer granularity. We use max(rate * 1 ms, 2 frames); 1 ms is
a trade-off between rate accuracy on a loaded 2-core VM and the extra queueing
delay a larger burst allows (1 ms of line rate can leave at once).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from .profiles import LinkProfile

DelayMechanism = Literal["netem", "userspace"]

HTB_ROOT_HANDLE = 0x10000  # "1:"
HTB_DEFAULT_CLASS = 0x10  # an int: pyroute2 would read "10" as decimal
HTB_CLASS_HANDLE = 0x10010  # "1:10"
NETEM_HANDLE = 0x100000  # "10:"

ETH_FRAME = 1514  # MTU 1500 + Ethernet header
BURST_TIME_S = 0.001
MIN_BURST_FRAMES = 2


@dataclass(frozen=True)
class HtbParams:
    """Parameters of the single HTB class; rates in bit/s, bursts in bytes."""

    rate_bps: int
    ceil_bps: int
    burst_bytes: int
    cburst_bytes: int

    @property
    def rate_bytes(self) -> int:
        # pyroute2 takes an integer rate in bytes/s.
        return self.rate_bps // 8

    @property
    def ceil_bytes(self) -> int:
        return self.ceil_bps // 8


@dataclass(frozen=True)
class NetemParams:
    delay_us: int
    jitter_us: int
    loss_pct: float


def htb_params(rate_bps: int, mtu: int = 1500, burst_time_s: float = BURST_TIME_S) -> HtbParams:
    """HTB class parameters for a link of ``rate_bps``.

    >>> htb_params(100_000_000).burst_bytes
    12500
    >>> htb_params(1_000_000).burst_bytes  # floor: two full frames
    3028
    """
    if rate_bps <= 0:
        raise ValueError("rate must be > 0")
    if burst_time_s <= 0:
        raise ValueError("burst time must be > 0")
    frame = mtu + 14
    burst = max(math.ceil(rate_bps / 8 * burst_time_s), MIN_BURST_FRAMES * frame)
    return HtbParams(rate_bps=rate_bps, ceil_bps=rate_bps, burst_bytes=burst, cburst_bytes=burst)


def netem_params(profile: LinkProfile) -> NetemParams | None:
    """netem parameters, or None when the profile adds no delay, jitter or loss."""
    if not profile.has_delay_effects():
        return None
    # netem via pyroute2 takes integer microseconds; round to nearest.
    return NetemParams(
        delay_us=round(profile.delay_us),
        jitter_us=round(profile.jitter_us),
        loss_pct=profile.loss_pct,
    )


def delay_mechanism(netem_available: bool) -> DelayMechanism:
    return "netem" if netem_available else "userspace"


class TcBackend(Protocol):
    """The few tc operations shaping needs (implemented by links.Pyroute2Backend)."""

    def add_htb(self, netns: str, ifname: str, params: HtbParams) -> None: ...

    def add_netem(self, netns: str, ifname: str, params: NetemParams) -> None: ...

    def get_tc(self, netns: str, ifname: str) -> list[dict[str, Any]]: ...


def shape_interface(
    tc: TcBackend,
    netns: str,
    ifname: str,
    params: HtbParams,
    netem: NetemParams | None,
) -> None:
    """Install HTB (and netem under it if given) on one interface's egress."""
    tc.add_htb(netns, ifname, params)
    if netem is not None:
        tc.add_netem(netns, ifname, netem)


def summarize_tc(entries: list[dict[str, Any]]) -> str:
    """One line per qdisc/class as read back from the kernel, for ``status``."""
    out = []
    for e in entries:
        desc = f"{e.get('type', '?')} {e.get('kind', '?')} {e.get('handle', '?')}"
        if "rate_bps" in e:
            desc += f" rate {e['rate_bps'] / 1e6:g}mbit ceil {e.get('ceil_bps', 0) / 1e6:g}mbit"
        if "delay_us" in e:
            desc += f" delay {e['delay_us']}us jitter {e.get('jitter_us', 0)}us"
        out.append(desc)
    return "; ".join(out) if out else "(none)"


def check_applied(entries: list[dict[str, Any]], params: HtbParams) -> list[str]:
    """Compare what the kernel reports with what was asked; return problems found."""
    problems = []
    classes = [e for e in entries if e.get("type") == "class" and e.get("kind") == "htb"]
    if not any(e.get("handle") == "1:10" for e in classes):
        problems.append("htb class 1:10 missing")
    for e in classes:
        if e.get("handle") == "1:10" and e.get("rate_bps") != params.rate_bytes * 8:
            problems.append(f"htb rate {e.get('rate_bps')} != {params.rate_bytes * 8}")
    return problems


def handle_str(handle: int) -> str:
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}" if handle & 0xFFFF else f"{handle >> 16:x}:"


def params_dict(params: HtbParams | NetemParams | None) -> dict[str, Any] | None:
    return None if params is None else asdict(params)
