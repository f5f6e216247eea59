"""Time-triggered switches: the one pending quantum plan and the wait for its instant.

Pure logic plus the final wait, so the rules are unit-tested without sockets: at most
one plan pending, a newer one replaces it, a late one is applied at once, one too far
ahead is refused. Why plans carry an instant, the rules and the wait: docs/cluster.md,
"Time-triggered switches".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Wake this long before the instant from epoll, then wait precisely. epoll
#: rounds its timeout up to the next millisecond, and on one host several agents
#: woken together prepare one after the other on each core (~0.15 ms each
#: measured here), so 3 ms leaves at least 2 ms for that.
EARLY_S = 0.003
WAIT_MODES = ("sleep", "spin")
#: ``spin`` mode: sleep to this long before the instant, then spin (covers the
#: sleep's wake-up latency, p99 130-200 us here).
SPIN_S = 0.0002

_CLOCK_REALTIME = 0
_TIMER_ABSTIME = 1
_EINTR = 4


class TooFar(ValueError):
    """A plan whose instant lies beyond what the agent accepts."""


class Offer(enum.Enum):
    PENDING = "pending"  # kept until its instant
    LATE = "late"  # its instant has passed: apply at once


@dataclass
class Plan:
    """One quantum plan with its instant and where to send the ack."""

    q: int
    at: float  # CLOCK_REALTIME seconds
    runnable: dict[str, int]
    conn: Any = None  # the agent's connection to answer on (None in unit tests)
    seq: int = 0  # the request's sequence number, for the reply's ``re``
    received_wall: float = 0.0
    received_monotonic_ns: int = 0
    late: bool = False
    # the I/O devices ("disk", "net") whose bytes the ack carries; None: all (agent/daemon.py)
    measure: frozenset[str] | None = None


@dataclass
class PlanCounters:
    accepted: int = 0  # plans with an instant, pending or late
    late: int = 0  # their instant had passed on arrival
    replaced: int = 0  # a newer plan came before the instant
    refused: int = 0  # too far ahead
    dropped: int = 0  # dropped by the fail-safe or on exit


class PlanSlot:
    """At most one pending plan (module docstring); time comes from the caller."""

    def __init__(self, max_ahead: float, early: float = EARLY_S) -> None:
        if max_ahead <= 0:
            raise ValueError("max_ahead must be > 0")
        self.max_ahead = max_ahead
        self.early = early
        self.pending: Plan | None = None
        self.counters = PlanCounters()

    def offer(self, plan: Plan, now: float) -> tuple[Offer, Plan | None]:
        """Take a new plan at wall time ``now``; returns what to do and the plan it replaced.

        Raises :class:`TooFar` (the pending plan, if any, stays) when the instant
        is more than ``max_ahead`` away or not a finite number.
        """
        ahead = plan.at - now
        if not math.isfinite(plan.at) or ahead > self.max_ahead:
            self.counters.refused += 1
            raise TooFar(
                f"quantum {plan.q}: its instant is {ahead:.3f} s ahead, beyond the"
                f" {self.max_ahead:g} s this agent accepts (its fail-safe timeout);"
                " are the nodes' clocks synchronised (chrony/PTP)? is the controller's"
                " --lead-ms too long?"
            )
        replaced = self.replace()
        self.counters.accepted += 1
        if ahead <= 0:
            plan.late = True
            self.counters.late += 1
            return Offer.LATE, replaced
        self.pending = plan
        return Offer.PENDING, replaced

    def replace(self) -> Plan | None:
        """A newer command arrived: the pending plan (if any) is replaced by it."""
        old, self.pending = self.pending, None
        if old is not None:
            self.counters.replaced += 1
        return old

    def drop(self) -> Plan | None:
        """Forget the pending plan (fail-safe, exit); returns it."""
        old, self.pending = self.pending, None
        if old is not None:
            self.counters.dropped += 1
        return old

    def wake_in(self, now: float) -> float:
        """Seconds the loop may sleep before it must prepare the pending plan."""
        if self.pending is None:
            return math.inf
        return max(0.0, self.pending.at - self.early - now)

    def due(self, now: float) -> Plan | None:
        """The pending plan, taken out, once ``now`` is within ``early`` of its instant."""
        p = self.pending
        if p is None or now < p.at - self.early:
            return None
        self.pending = None
        return p


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load_clock_nanosleep() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.clock_nanosleep
    except (OSError, AttributeError):
        return None
    fn.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(_Timespec),
        ctypes.POINTER(_Timespec),
    ]
    fn.restype = ctypes.c_int
    return fn


_clock_nanosleep = _load_clock_nanosleep()


def sleep_until(wall: float) -> None:
    """Sleep until CLOCK_REALTIME reaches ``wall`` (absolute, so no drift on EINTR).

    An absolute deadline on the clock the instant is expressed in: a step of
    that clock (chrony stepping, say) moves the wake-up with it, as it should.
    """
    if _clock_nanosleep is None:  # no libc symbol: a relative sleep is the best left
        time.sleep(max(0.0, wall - time.time()))
        return
    sec = math.floor(wall)
    # Rounded up: waking a fraction of a microsecond early would be "early".
    ts = _Timespec(sec, min(999_999_999, math.ceil((wall - sec) * 1e9)))
    while True:
        rc = _clock_nanosleep(_CLOCK_REALTIME, _TIMER_ABSTIME, ctypes.byref(ts), None)
        if rc != _EINTR:  # 0, or an error that another try would repeat
            return


def spin_until(wall: float, clock: Callable[[], float] = time.time) -> None:
    """Busy-wait until ``clock()`` reaches ``wall`` (for comparison; see the module docstring)."""
    while clock() < wall:
        pass


def wait_until(wall: float, mode: str) -> None:
    """The last stretch: an absolute sleep, or (``spin``) a sleep to SPIN_S before, then a spin."""
    if mode == "spin":
        sleep_until(wall - SPIN_S)
        spin_until(wall)
    else:
        sleep_until(wall)
