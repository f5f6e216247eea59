"""Expected rescheduling latency and the CC weights (Yu & Byun 2011 §4.2, eqs. 1-4).

Pure arithmetic; times are in microseconds except where a name says ``_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# Eq. (2): the constant weight of a process with pending messages ("mimics
# nice priority values ranging from -20 to 20").
W_PENDING = 20.0
# Eq. (4): NF scales W_r to 0..100.
W_R_MAX = 100.0


@dataclass(frozen=True, slots=True)
class PendingMsg:
    """What the NIC queue holds for one unconsumed message (Yu & Byun 2011 Fig. 5).

    ``erl_us`` is the sender node's ERL as the agent knew it when it first
    saw the message, ``seen_s`` that moment (monotonic seconds): the pair
    plays the part of the ERL and RTC the paper's NIC DMAs into the RCQ entry.
    """

    erl_us: float
    seen_s: float


def erl_us(ed_us: float, enp: float, cost_switch_us: float) -> float:
    """Eq. (1): ERL = ED * ENP + (ceil(ENP) + 1) * Cost_switch."""
    if ed_us < 0 or enp < 0 or cost_switch_us < 0:
        raise ValueError("ED, ENP and Cost_switch must be non-negative")
    return ed_us * enp + (math.ceil(enp) + 1) * cost_switch_us


def erl_max_us(mpl: int, time_slice_us: float) -> float:
    """ERL_max = MPL x time slice (the paper's 41 ms, Linux 2.4's nice-0 slice at HZ=1000).

    Ours is the agent's decision tick: see docs/cdc.md "Weights".
    """
    if mpl < 1 or time_slice_us <= 0:
        raise ValueError("MPL must be >= 1 and the time slice positive")
    return mpl * time_slice_us


def remaining_us(msg: PendingMsg, now_s: float) -> float:
    """Eq. (3): ERL' = ERL - dt, dt = time since the message was seen."""
    return msg.erl_us - (now_s - msg.seen_s) * 1e6


def w_r(pending: Iterable[PendingMsg], now_s: float, erl_max: float) -> float:
    """Eq. (4): W_r = min over messages of (ERL_max - ERL') / NF, NF = ERL_max / 100.

    Clamped to 0..100 (ERL' may be negative once the correspondent has been
    rescheduled, or exceed ERL_max on an overloaded node). No pending
    message: 0.
    """
    best = unclamped_w_r(pending, now_s, erl_max)
    if best is None:
        return 0.0
    return max(0.0, min(W_R_MAX, best))


def unclamped_w_r(pending: Iterable[PendingMsg], now_s: float, erl_max: float) -> float | None:
    """Eq. (4) before its clamp to 0..100 (None: no pending message).

    One pass, no call per message: the schemes ask it at every decision point
    (the simulator's hottest path); the arithmetic is :func:`remaining_us`'s.
    """
    best: float | None = None
    for m in pending:
        v = erl_max - (m.erl_us - (now_s - m.seen_s) * 1e6)
        if best is None or v < best:
            best = v
    if best is None:
        return None
    return best / (erl_max / W_R_MAX)


def w_total(pending: Iterable[PendingMsg], now_s: float, erl_max: float) -> float:
    """W_total = W_c (eq. 2) + W_r (eq. 4)."""
    best = unclamped_w_r(pending, now_s, erl_max)
    if best is None:
        return 0.0
    return W_PENDING + max(0.0, min(W_R_MAX, best))
