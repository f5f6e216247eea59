"""One scheme implementation, two drivers: the agent's local scheduler and the simulator's node.

Both hand every decision point to agent/cdc/node.py (NodeCdc) and the
scheme code of agent/cdc/schemes.py. Fed the same scripted sequence of views
-- what the NIC emulation sees, or what the simulated processes look like --
they must pick the same holder at every step and end with the same counters
and ERL. The simulator's own views and skipping are tested in test_engine.py.
"""

from __future__ import annotations

import pytest

from agent.cdc.erl import PendingMsg, erl_us, remaining_us, w_r
from agent.cdc.schemes import CCB, Event, ProcView

# ---- eqs. (1)-(4) on hand-computed cases ---------------------------------------------------


def test_erl_wc_wr_hand_computed() -> None:
    # eq. (1): ED 500 µs, two processes pending, Cost_switch 6 µs: 500*2 + (2+1)*6 = 1018
    assert erl_us(500.0, 2, 6.0) == pytest.approx(1018.0)
    # eq. (3): that ERL seen 1 ms ago has 18 µs left
    msg = PendingMsg(1018.0, 10.0)
    assert remaining_us(msg, 10.001) == pytest.approx(18.0)
    # eq. (4) with ERL_max = MPL 5 x 41 ms = 205,000 µs, NF = 2,050 µs:
    # (205000 - 18) / 2050 = 99.99122
    assert w_r([msg], 10.001, 205_000.0) == pytest.approx(99.99122, abs=1e-4)
    # a slower correspondent (ERL 150 ms, just seen) gives (205000 - 150000) / 2050 = 26.83
    slow = PendingMsg(150_000.0, 10.001)
    assert w_r([slow], 10.001, 205_000.0) == pytest.approx(26.829268, abs=1e-5)
    # W_c (eq. 2) = 20 for any pending process, so W_total = 20 + W_r; eq. (4) takes the min
    cc = CCB(mpl=5, tick_s=0.001, slice_s=0.041)
    views = {
        "fast": ProcView("fast", (msg,)),
        "slow": ProcView("slow", (slow,)),
        "both": ProcView("both", (msg, slow)),
    }
    assert cc.decide(10.001, Event.TICK, None, views) == "fast"
    # the order holds until the fast one's weight reaches the clamp at 100: 18 µs later
    until = cc.tick_stable_until(10.001, views)
    assert until == pytest.approx(10.001 + 18e-6, abs=1e-9)
