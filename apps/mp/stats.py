"""Message counts and message delay (MD) for one rank (docs/cdc.md "Decision points, BCR and MD").

Yu & Byun 2011 §5.3 evaluates the schemes by *message delay*: how long a process
waits for the messages it needs. The library measures it for every receive:

    MD = completion of the receive - start of the wait that needed it

where the wait starts when the program calls ``recv``/``wait``/``waitall``
(or a collective calls them) on a receive that is not yet complete, and the
receive completes when its whole message has been read off the socket and
matched (after the userspace link emulation's hold, apps/mp/linkemu.py). A
receive whose message was already there before the program waited counts
with what matching it took (``recv``) or 0 (``wait`` on a request that
completed earlier, or ``test``).

Every sample goes to the state page (count, sum, histogram with the bounds
``agent.nicproto.MD_BUCKETS_S``), which the agent exports as
``cosched_message_delay_seconds``, and to a bounded sample (reservoir) from
which ``report()`` computes the percentiles.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from agent import nicproto

MAX_SAMPLES = 100_000  # MD samples kept for the percentiles (uniform reservoir beyond)
QUANTILE_STEPS = 100  # the report's MD distribution: every percentile (summary indexes it)


@dataclass
class Stats:
    """What one rank sent, received and waited; ``page`` is its state page (or None)."""

    page: Any = None  # a writable buffer of nicproto.STATE_SIZE bytes
    sent: int = 0
    sent_bytes: int = 0
    received: int = 0
    received_bytes: int = 0
    consumed: int = 0
    md_count: int = 0
    md_sum_ns: int = 0
    md_max_ns: int = 0
    md_samples: list[int] = field(default_factory=list)
    buckets: list[int] = field(default_factory=lambda: [0] * len(nicproto.MD_BUCKETS_S))
    erl_count: int = 0
    erl_sum_us: int = 0
    erl_max_us: int = 0
    spin_polls: int = 0  # progress polls made while spinning
    blocks: int = 0  # times a wait went to sleep in poll()
    _rng: random.Random = field(default_factory=lambda: random.Random(0), repr=False)

    def on_send(self, nbytes: int) -> None:
        self.sent += 1
        self.sent_bytes += nbytes
        if self.page is not None:
            nicproto.write_sent_bytes(self.page, self.sent_bytes)

    def on_arrival(self, nbytes: int, erl_us: int) -> None:
        """A whole message was read off a socket (before any userspace hold)."""
        self.received += 1
        self.received_bytes += nbytes
        if self.page is not None:
            nicproto.write_received_bytes(self.page, self.received_bytes)
        self.erl_count += 1
        self.erl_sum_us += erl_us
        if erl_us > self.erl_max_us:
            self.erl_max_us = erl_us

    def on_receive(self, md_ns: int) -> None:
        """A receive completed and the program consumed it after waiting ``md_ns``."""
        md_ns = max(0, md_ns)
        self.consumed += 1
        self.md_count += 1
        self.md_sum_ns += md_ns
        if md_ns > self.md_max_ns:
            self.md_max_ns = md_ns
        bucket = nicproto.md_bucket(md_ns / 1e9)
        self.buckets[bucket] += 1
        if len(self.md_samples) < MAX_SAMPLES:
            self.md_samples.append(md_ns)
        else:
            k = self._rng.randrange(self.md_count)
            if k < MAX_SAMPLES:
                self.md_samples[k] = md_ns
        if self.page is not None:
            nicproto.write_receive(self.page, self.consumed, self.md_count, self.md_sum_ns, bucket)

    def md_percentile_us(self, p: float) -> float:
        """The p-th percentile (nearest rank) of the kept MD samples, µs; 0 without any."""
        if not self.md_samples:
            return 0.0
        s = sorted(self.md_samples)
        return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] / 1e3

    def md_quantiles_us(self, steps: int = QUANTILE_STEPS) -> list[float]:
        """MD at the percentiles 0, 100/steps, ..., 100 (nearest rank), µs; [] without any.

        The whole distribution in a few hundred bytes: what a spin-block wait of s µs
        spends spinning, E[min(W, s)], is read off it (testbed/experiment/userlevel/)."""
        if not self.md_samples:
            return []
        s = sorted(self.md_samples)
        top = len(s) - 1
        return [round(s[min(top, round(k / steps * top))] / 1e3, 3) for k in range(steps + 1)]

    def summary(self) -> dict[str, Any]:
        """The figures ``Comm.report()`` returns."""
        q = self.md_quantiles_us()  # one sort: p50 and p99 are its 50th and 99th entries
        return {
            "messages_sent": self.sent,
            "bytes_sent": self.sent_bytes,
            "messages_received": self.received,
            "bytes_received": self.received_bytes,
            "md_count": self.md_count,
            "md_mean_us": round(self.md_sum_ns / self.md_count / 1e3, 3) if self.md_count else 0.0,
            "md_p50_us": q[50] if q else 0.0,
            "md_p99_us": q[99] if q else 0.0,
            "md_max_us": round(self.md_max_ns / 1e3, 3),
            "md_quantiles_us": q,
            "md_buckets": list(self.buckets),
            "header_erl_mean_us": round(self.erl_sum_us / self.erl_count, 1)
            if self.erl_count
            else 0.0,
            "header_erl_max_us": self.erl_max_us,
            "spin_polls": self.spin_polls,
            "blocks": self.blocks,
        }
