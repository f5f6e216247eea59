"""The machine the CDC simulator models: nodes, link, local scheduler, agent (docs/simulator.md).

Two presets:

* ``paper`` -- Yu & Byun 2011 §4-§5.1 as stated: Myrinet with a 13 µs one-way
  application-to-application latency and 2 Gb/s links, Linux 2.4 at
  HZ = 1000 (decisions about every 1 ms), a 6 µs context switch, time slices
  of 41 ms (ERL_max = MPL × 41 ms), SB's 150 µs spin time, boosts decided in
  the kernel at once (no agent delay, no agent CPU), the ERL piggybacked in
  message headers;
* ``testbed`` -- our local cluster: the library's per-message CPU, the
  agent's decision delay and CPU, the ERL exchanged by gossip, CFS-like
  slices. Its figures are first estimates from what docs/cdc.md records
  (round trips of benchmarks/comm.py, an agent wake-up of
  benchmarks/nic_cost.py, agent/switchcost.py's switch); the validation
  against live runs (docs/simulator.md) is where they are to be measured.

Every field can be overridden (``--platform paper:decision_ms=2``). Bad
values are one line naming the field and what it accepts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

#: Yu & Byun 2011 §5.1: 1.8 GHz nodes against 2.8 GHz ones.
SLOW_SPEED = 1.8 / 2.8


class PlatformError(ValueError):
    """A platform field out of range (one line: the field and its valid values)."""


@dataclass(frozen=True)
class Platform:
    """What the simulated nodes, links and local schedulers are like (module docstring)."""

    name: str = "paper"
    latency_us: float = 13.0  # one-way, application to application (§5.1)
    bandwidth_gbps: float = 2.0  # per link and direction (Myrinet-2000)
    context_switch_us: float = 6.0  # Cost_switch of eq. (1), Linux 2.4 (§4.2)
    decision_ms: float = 1.0  # the local scheduler's decision interval (HZ = 1000)
    slice_ms: float = 41.0  # a time slice among processes of equal priority
    erl_slice_ms: float = 41.0  # T in ERL_max = MPL × T (§4.2 footnote); 0: the decision interval
    spin_us: float = 150.0  # SB's spin time (§5.1 footnote)
    wake_us: float = 5.0  # arrival to a blocked receiver being runnable (interrupt, wake-up)
    agent_delay_us: float = 0.0  # arrival or collective event to the scheme's decision
    agent_cpu: float = 0.0  # share of each node's CPU the local scheduler itself uses
    send_cpu_us: float = 0.0  # sender CPU per message beyond the latency (GM: in the 13 µs)
    recv_cpu_us: float = 0.0  # receiver CPU per message
    copy_ns_per_byte: float = 0.0  # receiver CPU per payload byte
    wakeup_granularity_ms: float = 1.0  # a woken process preempts one that ran this much longer
    boost_weight: float = 100.0  # the holder's CPU weight over the others' (agents: 10000 : 100)
    launch_s: float = 0.0  # placement to the job's processes running
    erl_exchange: str = "header"  # "header" (the paper's NIC) or "gossip" (our agents)

    def __post_init__(self) -> None:
        check_platform(self)

    # ---- derived, in seconds ---------------------------------------------------------
    @property
    def decision_s(self) -> float:
        return self.decision_ms / 1e3

    @property
    def erl_slice_s(self) -> float:
        return (self.erl_slice_ms or self.decision_ms) / 1e3

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_overrides(self, items: dict[str, str]) -> Platform:
        """This platform with ``key=value`` fields replaced (values parsed by type)."""
        known = {f.name: f for f in fields(self)}
        kw: dict[str, Any] = {}
        for k, raw in items.items():
            f = known.get(k)
            if f is None or k == "name":
                raise PlatformError(
                    f"platform field {k!r} is unknown; valid fields: "
                    + ", ".join(n for n in known if n != "name")
                )
            if k == "erl_exchange":
                kw[k] = raw
                continue
            try:
                kw[k] = float(raw)
            except ValueError:
                raise PlatformError(f"platform field {k}: expected a number, got {raw!r}") from None
        return replace(self, **kw)


_RANGES: dict[str, tuple[float, float, str]] = {
    "latency_us": (0.0, 1e6, "0..1e6 µs"),
    "bandwidth_gbps": (1e-6, 1e4, "a rate > 0 Gb/s"),
    "context_switch_us": (0.0, 1e5, "0..1e5 µs"),
    "decision_ms": (0.1, 1000.0, "0.1..1000 ms"),
    "slice_ms": (0.1, 10_000.0, "0.1..10000 ms"),
    "erl_slice_ms": (0.0, 10_000.0, "0..10000 ms (0: the decision interval)"),
    "spin_us": (0.0, 1e6, "0..1e6 µs"),
    "wake_us": (0.0, 1e6, "0..1e6 µs"),
    "agent_delay_us": (0.0, 1e6, "0..1e6 µs"),
    "agent_cpu": (0.0, 0.9, "a share 0..0.9"),
    "send_cpu_us": (0.0, 1e5, "0..1e5 µs"),
    "recv_cpu_us": (0.0, 1e5, "0..1e5 µs"),
    "copy_ns_per_byte": (0.0, 1e3, "0..1000 ns"),
    "wakeup_granularity_ms": (0.0, 1e4, "0..10000 ms"),
    "launch_s": (0.0, 1e3, "0..1000 s"),
    "boost_weight": (1.0, 1e6, "1..1e6 (1: no boost)"),
}


def check_platform(p: Platform) -> None:
    for name, (lo, hi, valid) in _RANGES.items():
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise PlatformError(f"platform field {name}: expected a number ({valid}), got {v!r}")
        if not lo <= v <= hi:
            what = "decision interval " if name == "decision_ms" else ""
            raise PlatformError(f"platform field {name}: {what}{v:g} is outside {valid}")
    if p.erl_exchange not in ("header", "gossip"):
        raise PlatformError(
            f"platform field erl_exchange: one of header, gossip; got {p.erl_exchange!r}"
        )


PAPER = Platform()

#: Our local cluster: first estimates (module docstring), each beside its source.
TESTBED = Platform(
    name="testbed",
    latency_us=20.0,  # the myrinet profile's 7 µs, held by the library, + half of the
    # 26 µs 8-byte round trip between two cluster nodes (docs/cdc.md, "Measured" (a))
    bandwidth_gbps=1.5,  # below the 2 Gb/s HTB class: Python copies (docs/cdc.md (b))
    context_switch_us=3.0,  # agent/switchcost.py on this VM: 2-3 µs
    decision_ms=10.0,  # the agents' default tick
    slice_ms=3.0,  # CFS: sched_latency / nr_running, at least its minimum granularity
    erl_slice_ms=0.0,  # the agents use their tick as T (docs/cdc.md, "Weights")
    spin_us=150.0,
    wake_us=35.0,  # block costs ~70 µs more per round trip than spin (docs/cdc.md (c))
    agent_delay_us=120.0,  # one agent wake-up, 90-130 µs (benchmarks/nic_cost.py)
    agent_cpu=0.01,  # a 10 ms tick alone: 1-1.5 % of a core (docs/cdc.md)
    send_cpu_us=5.0,  # the library's work per message, either side
    recv_cpu_us=5.0,
    copy_ns_per_byte=0.5,
    wakeup_granularity_ms=1.0,
    launch_s=0.4,  # a rank's interpreter start, imports and mesh
    erl_exchange="gossip",
)

PRESETS: dict[str, Platform] = {"paper": PAPER, "testbed": TESTBED}


def parse_platform(spec: str) -> Platform:
    """``paper`` or ``testbed``, optionally ``:key=value,...`` overrides."""
    name, _, rest = spec.partition(":")
    base = PRESETS.get(name.strip())
    if base is None:
        raise PlatformError(f"platform {name!r} is unknown; valid platforms: {', '.join(PRESETS)}")
    items: dict[str, str] = {}
    for part in filter(None, (x.strip() for x in rest.split(","))):
        k, sep, v = part.partition("=")
        if not sep:
            raise PlatformError(f"platform override {part!r}: expected key=value")
        items[k.strip()] = v.strip()
    return base.with_overrides(items) if items else base


def parse_speeds(spec: str, nodes: int) -> tuple[float, ...]:
    """Per-node speeds: ``paper`` (7 at 1, the rest at 1.8/2.8), ``1,1,0.64,...`` or groups
    ``7x1,9x0.643``; the count must match ``nodes``."""
    s = spec.strip()
    if s == "paper":
        fast = min(7, nodes)
        return (1.0,) * fast + (SLOW_SPEED,) * (nodes - fast)
    out: list[float] = []
    for part in filter(None, (x.strip() for x in s.split(","))):
        n, sep, v = part.partition("x")
        try:
            if sep:
                out += [float(v)] * int(n)
            else:
                out.append(float(part))
        except ValueError:
            raise PlatformError(
                f"--speeds {spec!r}: expected numbers, NxSPEED groups or 'paper'"
            ) from None
    if len(out) != nodes:
        raise PlatformError(
            f"--speeds gives {len(out)} node speeds for {nodes} nodes; give exactly {nodes} "
            "(e.g. 7x1,9x0.643 for 16) or 'paper'"
        )
    if any(not math.isfinite(v) or not 0 < v <= 16 for v in out):
        raise PlatformError(f"--speeds {spec!r}: every speed must be in (0, 16]")
    return tuple(out)
