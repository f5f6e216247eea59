"""Userspace link emulation where the cluster has no netem (docs/cdc.md).

When the cluster's delay mechanism is ``userspace`` the controller passes the
link profile to every rank (COSCHED_NET_DELAY_US, _JITTER_US, _LOSS_PCT,
_RATE_BPS). The library then holds each received message until

    due = max(read_done, send_ns + size * 8 / rate + delay + jitter + loss penalty,
              due of the previous message from the same sender)

* receiver-side hold, no thread: a held message is simply not deliverable yet;
* ``send_ns`` is the sender's CLOCK_REALTIME: exact on one host (the local
  cluster, where this mechanism is used); on separate machines their clocks
  must agree (NTP/PTP) to the precision wanted;
* serialization at the profile's rate is counted once: HTB already shapes
  the bytes, so a message that took longer than that to arrive is not held
  longer (the max with ``read_done``);
* jitter is uniform in ±jitter (netem's default distribution), the result
  clamped at 0, and per-sender order is kept (TCP would re-sequence);
* loss: the message is ceil((40 + size) / 1448) segments, each lost with
  probability loss_pct / 100, and every loss costs one retransmission
  timeout of 200 ms (Linux TCP_RTO_MIN): TCP never loses a message, it
  delays it. Fast retransmit (about one round trip) is not modelled.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from apps.mp.errors import MPError

MSS = 1448
RTO_MIN_NS = 200_000_000
HEADER_BYTES = 40


@dataclass(frozen=True, slots=True)
class LinkEmu:
    delay_us: float = 0.0
    jitter_us: float = 0.0
    loss_pct: float = 0.0
    rate_bps: float = 0.0  # 0 = unlimited

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LinkEmu | None:
        vals: dict[str, float] = {}
        for field, name in (
            ("delay_us", "COSCHED_NET_DELAY_US"),
            ("jitter_us", "COSCHED_NET_JITTER_US"),
            ("loss_pct", "COSCHED_NET_LOSS_PCT"),
            ("rate_bps", "COSCHED_NET_RATE_BPS"),
        ):
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            try:
                vals[field] = float(raw)
            except ValueError:
                raise MPError(f"{name}={raw!r} is not a number") from None
            if vals[field] < 0 or math.isnan(vals[field]):
                raise MPError(f"{name}={raw!r} must be >= 0")
        if vals.get("loss_pct", 0.0) >= 100:
            raise MPError("COSCHED_NET_LOSS_PCT must be below 100")
        emu = cls(**vals)
        return emu if emu.active else None

    @property
    def active(self) -> bool:
        return self.delay_us > 0 or self.jitter_us > 0 or self.loss_pct > 0

    def describe(self) -> dict[str, float]:
        """The parameters, for reports."""
        return {
            "delay_us": self.delay_us,
            "jitter_us": self.jitter_us,
            "loss_pct": self.loss_pct,
            "rate_bps": self.rate_bps,
        }

    def loss_penalty_ns(self, size: int, rng: random.Random) -> int:
        if self.loss_pct <= 0:
            return 0
        p = self.loss_pct / 100.0
        segments = max(1, math.ceil((HEADER_BYTES + size) / MSS))
        losses = sum(1 for _ in range(segments) if rng.random() < p)
        return losses * RTO_MIN_NS

    def due_ns(
        self, size: int, send_ns: int, read_ns: int, prev_due_ns: int, rng: random.Random
    ) -> int:
        """When a message read off the socket at ``read_ns`` may be delivered."""
        ser = (HEADER_BYTES + size) * 8e9 / self.rate_bps if self.rate_bps > 0 else 0.0
        jitter = rng.uniform(-self.jitter_us, self.jitter_us) if self.jitter_us > 0 else 0.0
        extra = max(0.0, self.delay_us + jitter) * 1e3
        due = send_ns + int(ser + extra) + self.loss_penalty_ns(size, rng)
        return max(read_ns, due, prev_due_ns)
