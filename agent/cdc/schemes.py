"""The local coscheduling schemes of Yu & Byun 2011 Table 1, as pure decision logic.

At each decision point the agent (agent/local.py) hands a scheme what the NIC
emulation knows of every registered process and asks which process should
hold the boost until the next decision point (``None``: nobody, all default
weights). Schemes keep only their own ordering state (arrival queue, round
robin position); they never touch the kernel, so every decision is
unit-testable on scripted sequences.

"Running" in DCS's "boost when the destination is not the running process"
is the process that holds the boost: a user-level agent cannot see which
task is on the CPU at the instant of an arrival, and the holder is the one it
made run. See docs/cdc.md for every such choice.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from agent.cdc.erl import W_PENDING, W_R_MAX, PendingMsg, erl_max_us, unclamped_w_r


class Event(StrEnum):
    TICK = "tick"  # the periodic decision (PB's kernel thread, the scheduler tick)
    ARRIVAL = "arrival"  # the NIC saw a message for ``subject`` (an "interrupt")
    COLL_ON = "coll_on"  # ``subject`` entered a collective (HYBRID)
    COLL_OFF = "coll_off"  # ``subject`` left it


@dataclass(frozen=True, slots=True)
class ProcView:
    """One registered process as the NIC emulation sees it at a decision point."""

    key: str
    pending: tuple[PendingMsg, ...] = ()
    blocked: bool = False  # blocked in the library waiting for a message
    in_collective: bool = False

    @property
    def first_seen(self) -> float:
        return min((m.seen_s for m in self.pending), default=float("inf"))


class Scheme(ABC):
    """A message-waiting action pair and a boost policy (one row of Table 1)."""

    name: ClassVar[str]
    send_wait: ClassVar[str] = "spin"
    recv_wait: ClassVar[str] = "spin"
    # Events (besides TICK) that are decision points for this scheme.
    reacts_to: ClassVar[frozenset[Event]] = frozenset()

    def __init__(self, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None) -> None:
        self.mpl = mpl
        self.tick_s = tick_s
        # T of ERL_max = MPL x T: the agents' tick (None), or the paper's 41 ms time slice
        # where the simulator models Linux 2.4 (docs/cdc.md, "Weights").
        self.slice_s = slice_s
        self.holder: str | None = None

    def is_decision(self, event: Event) -> bool:
        return event is Event.TICK or event in self.reacts_to

    def tick_stable_until(self, now: float, procs: Mapping[str, ProcView]) -> float:
        """Until when TICK decisions on these same views repeat this one.

        Called right after a TICK decision on ``procs``: every tick before
        the returned time, with nothing in the views changed, would return
        the same holder and leave the scheme's state as it is. The simulator
        skips those ticks (it counts them, agent/cdc/node.py); the agent
        decides at every tick. Default: forever (the decision depends on
        the views only).
        """
        return math.inf

    def repeat_until(self, now: float, procs: Mapping[str, ProcView]) -> float:
        """Until when decisions of any kind on these same views return this one's holder.

        Called right after a decision on ``procs``, like :meth:`tick_stable_until`, but
        for any event and with a margin for rounding: the simulator's CC path uses it to
        skip asking the scheme again while two or more processes are pending. Default:
        no guarantee (``now``).
        """
        return now

    def arrival_repeats(self, subject: ProcView) -> bool:
        """Whether an ARRIVAL decision for ``subject`` (a pending process) on the views of
        the last decision would return its holder and leave the scheme as it is.

        Asked by the simulator, instead of :meth:`decide`, only when nothing in the views
        but ``subject``'s ``blocked`` has changed since that decision; ``subject`` is the
        process's view now (its pending messages are not read). Default: no guarantee.
        """
        return False

    @abstractmethod
    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        """The process that holds the boost from now on (also stored in ``holder``)."""


class Local(Scheme):
    """LOCAL (§2.2): spin and nothing else; no coordination at all."""

    name = "local"

    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        self.holder = None
        return None


class Batch(Local):
    """BATCH (§2.1): one job per node (the controller's MPL 1); nothing to boost."""

    name = "batch"


class _ArrivalOrder(Scheme):
    """Interrupt & boost: boosted processes run in the order their messages came.

    Every arrival for a process that is not the holder (and, for the blocking
    schemes, that is blocked waiting) queues it; the head of the queue holds
    the boost until it has no pending message left, then the next one does.
    """

    reacts_to = frozenset({Event.ARRIVAL})

    def __init__(self, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None) -> None:
        super().__init__(mpl, tick_s, slice_s)
        self.queue: list[str] = []

    def wants_boost(self, proc: ProcView) -> bool:
        return True

    def arrival_repeats(self, subject: ProcView) -> bool:
        """The queue, filtered by the same views, is the same; the subject joins it only if
        it is not the holder, not queued yet and wants the boost (decide below)."""
        k = subject.key
        return k == self.holder or k in self.queue or not self.wants_boost(subject)

    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        self.queue = [k for k in self.queue if k in procs and procs[k].pending]
        if event is Event.ARRIVAL and subject is not None and subject in procs:
            p = procs[subject]
            if (
                p.pending
                and subject != self.holder
                and subject not in self.queue
                and self.wants_boost(p)
            ):
                self.queue.append(subject)
        self.holder = self.queue[0] if self.queue else None
        return self.holder


class DCS(_ArrivalOrder):
    """DCS (§2.3.1, Sobalvarro et al.): spin; on arrival boost the destination."""

    name = "dcs"


class IB(_ArrivalOrder):
    """IB (§2.3.2): the receiver blocks at once; the wake-up on arrival boosts it."""

    name = "ib"
    recv_wait = "block"

    def wants_boost(self, proc: ProcView) -> bool:
        return proc.blocked  # only a blocked process is woken by the interrupt


class SB(IB):
    """SB (§2.3.2, Dusseau et al.): spin for the spin time, then block; boost on wake-up."""

    name = "sb"
    recv_wait = "spinblock"


class PB(Scheme):
    """PB (§2.3.1): each tick, boost one process with pending messages, round robin."""

    name = "pb"

    def __init__(self, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None) -> None:
        super().__init__(mpl, tick_s, slice_s)
        self.last: str | None = None

    def tick_stable_until(self, now: float, procs: Mapping[str, ProcView]) -> float:
        """Round robin moves on at every tick while two or more processes are pending."""
        pending = sum(1 for p in procs.values() if p.pending)
        return now if pending >= 2 else math.inf

    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        if event is not Event.TICK:
            return self.holder
        keys = list(procs)
        start = keys.index(self.last) + 1 if self.last in keys else 0
        self.holder = None
        for k in keys[start:] + keys[:start]:
            if procs[k].pending:
                self.holder = self.last = k
                break
        return self.holder


class Hybrid(Scheme):
    """HYBRID (§2.3.2, Choi et al.): block; boost at collective entry, restore at its end."""

    name = "hybrid"
    send_wait = "block"
    recv_wait = "block"
    reacts_to = frozenset({Event.COLL_ON, Event.COLL_OFF})

    def __init__(self, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None) -> None:
        super().__init__(mpl, tick_s, slice_s)
        self.queue: list[str] = []

    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        if event is Event.COLL_OFF and subject in self.queue:
            self.queue.remove(subject)
        if (
            event is Event.COLL_ON
            and subject is not None
            and subject in procs
            and subject not in self.queue
        ):
            self.queue.append(subject)
        # The state page is the truth: an event may have been lost or overtaken.
        self.queue = [k for k in self.queue if k in procs and procs[k].in_collective]
        for k, p in procs.items():
            if p.in_collective and k not in self.queue and event is Event.TICK:
                self.queue.append(k)
        self.holder = self.queue[0] if self.queue else None
        return self.holder


class _Contention(Scheme):
    """CC (§3, §4.2): boost the pending process with the highest W_c + W_r.

    Ties (equal weights) go to the earliest arrival, then to registration order.
    """

    def __init__(self, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None) -> None:
        super().__init__(mpl, tick_s, slice_s)
        # the views of the last decision, its time and the unclamped W_r of each pending
        # process: tick_stable_until, asked right after on the same views, reuses them
        self._last: tuple[Mapping[str, ProcView], float, list[float]] | None = None
        self._emax_key: tuple[int, float | None, float] | None = None
        self._emax = 0.0

    def erl_max(self) -> float:
        # asked at every decision: computed once per (MPL, slice), which never change in a run
        key = (self.mpl, self.slice_s, self.tick_s)
        if key != self._emax_key:
            self._emax = erl_max_us(self.mpl, (self.slice_s or self.tick_s) * 1e6)
            self._emax_key = key
        return self._emax

    def tick_stable_until(self, now: float, procs: Mapping[str, ProcView]) -> float:
        """Every pending message's ERL' falls at the same rate (eq. 3), so the order of the
        unclamped weights holds until one of them crosses 0 or 100 (eq. 4's clamp)."""
        if self._last is not None and self._last[0] is procs and self._last[1] == now:
            us = self._last[2]  # decide() just weighed these very views
        else:
            emax = self.erl_max()
            us = []
            for p in procs.values():
                u_ = unclamped_w_r(p.pending, now, emax)
                if u_ is not None:
                    us.append(u_)
        if len(us) < 2:
            return math.inf
        nf = self.erl_max() / W_R_MAX
        until = math.inf
        for u in us:
            # unclamped W_r now, and its rate: 1e6 / NF per second
            if u < 0:
                until = min(until, now + (-u) * nf / 1e6)
            elif u < W_R_MAX:
                until = min(until, now + (W_R_MAX - u) * nf / 1e6)
        return until

    def repeat_until(self, now: float, procs: Mapping[str, ProcView]) -> float:
        """Every unclamped W_r grows at the same rate, so decide() on these views returns
        the same holder while no weight comes within ``m`` of a clamp bound (0 or 100) and
        no two weights inside the bounds lie within ``m`` of each other: the comparisons
        decide() makes (>, == between clamped weights, first_seen on ties) keep their
        outcome. ``m`` is far above the rounding of eq. (3)-(4) (a few ulps of ``now`` in
        µs and of the ERLs), so the floats decide() would compute compare as these do."""
        last = self._last
        if last is None or last[0] is not procs or last[1] != now:
            return now
        us = last[2]
        if len(us) < 2:
            return math.inf  # one pending process holds the boost (or none does)
        emax = self.erl_max()
        nf = emax / W_R_MAX
        big = emax + max(abs(u) for u in us) * nf
        m = (1e-3 + 1e3 * (math.ulp(now) * 1e6 + math.ulp(big))) / nf
        until = math.inf
        mids: list[float] = []
        for u in us:
            if u >= W_R_MAX + m:
                continue  # clamped at 100, and W_r only grows
            if u <= -m:
                until = min(until, now + (-u - m) * nf / 1e6)  # 0 until it nears 0
            elif m < u < W_R_MAX - m:
                until = min(until, now + (W_R_MAX - m - u) * nf / 1e6)
                mids.append(u)
            else:
                return now  # near a clamp bound
        mids.sort()
        for a, b in itertools.pairwise(mids):
            if b - a < m:
                return now  # a near tie
        return until

    def decide(
        self, now: float, event: Event, subject: str | None, procs: Mapping[str, ProcView]
    ) -> str | None:
        if not self.is_decision(event):
            return self.holder
        emax = self.erl_max()
        us: list[float] = []
        best_w = 0.0
        best_fs = 0.0
        best_p: ProcView | None = None
        self.holder = None
        # the highest W_c + W_r (eq. 2, 4), then the earliest arrival, then registration
        # order: first_seen is only looked at on a tie
        nf = emax / W_R_MAX
        for k, p in procs.items():
            pend = p.pending
            if not pend:
                continue
            # unclamped_w_r (agent/cdc/erl.py) inline, the same arithmetic: the hottest loop
            m = pend[0]
            lo = emax - (m.erl_us - (now - m.seen_s) * 1e6)
            if len(pend) > 1:
                for m in pend:
                    v = emax - (m.erl_us - (now - m.seen_s) * 1e6)
                    if v < lo:
                        lo = v
            u = lo / nf
            us.append(u)
            w = W_PENDING + max(0.0, min(W_R_MAX, u))
            if best_p is None or w > best_w:
                best_w, best_p, self.holder = w, p, k
                best_fs = math.nan  # not needed unless a tie comes
            elif w == best_w:
                if best_fs != best_fs:  # nan: not computed yet
                    best_fs = best_p.first_seen
                fs = p.first_seen
                if fs < best_fs:
                    best_w, best_p, best_fs, self.holder = w, p, fs, k
        self._last = (procs, now, us)
        return self.holder


class CCS(_Contention):
    """CC-S: spinning; reordering in the periodic thread (like PB)."""

    name = "cc-s"


class CCB(_Contention):
    """CC-B: immediate blocking on both sides; reordering at every context switch."""

    name = "cc-b"
    send_wait = "block"
    recv_wait = "block"
    reacts_to = frozenset({Event.ARRIVAL})


SCHEMES: dict[str, type[Scheme]] = {
    c.name: c for c in (Batch, Local, DCS, PB, IB, SB, Hybrid, CCS, CCB)
}


class UnknownScheme(ValueError):
    pass


def make_scheme(
    name: str, mpl: int = 5, tick_s: float = 0.010, slice_s: float | None = None
) -> Scheme:
    try:
        cls = SCHEMES[name]
    except KeyError:
        raise UnknownScheme(
            f"unknown local scheme {name!r}; valid schemes: {', '.join(SCHEMES)}"
        ) from None
    return cls(mpl, tick_s, slice_s)
