"""The tests of tests/unit/testbed/sim/cdc/test_engine_drivers.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cdc.erl import PendingMsg
from agent.cdc.schemes import Event, ProcView
from agent.daemon import Agent
from agent.local import LocalConfig
from testbed.sim.cdc.engine import CdcSim, SimJobSpec, _Proc
from testbed.sim.cdc.platform import Platform
from testbed.sim.cdc.program import synthetic
from tests.support.agent_fakes import make_agent

KEYS = ("1/0", "2/0", "3/0", "4/0")


SCHEMES = ("local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")


TICK_S = 0.010


def script(seed: int, n: int = 300) -> list[tuple[float, Event, str | None, dict[str, ProcView]]]:
    """Random but reproducible decision points: ticks, arrivals, collective events."""
    rng = random.Random(seed)
    t = 1.0
    out = []
    for _ in range(n):
        t += rng.choice([TICK_S, rng.uniform(0, TICK_S)])
        views = {}
        for k in KEYS:
            msgs = tuple(
                PendingMsg(rng.uniform(0, 60_000), t - rng.uniform(0, 0.05))
                for _ in range(rng.choice([0, 0, 1, 2]))
            )
            views[k] = ProcView(k, msgs, rng.random() < 0.4, rng.random() < 0.2)
        ev = rng.choice([Event.TICK, Event.TICK, Event.ARRIVAL, Event.COLL_ON, Event.COLL_OFF])
        subject = None if ev is Event.TICK else rng.choice(KEYS)
        out.append((t, ev, subject, views))
    return out


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    a, _fs = make_agent(tmp_path)
    a.local.gossip_port = 0
    a.start()
    yield a
    a.shutdown()


def drive_agent(agent: Agent, scheme: str, steps: list) -> tuple[list[str | None], dict, float]:  # type: ignore[type-arg]
    ls = agent.local
    ls.cost_switch_us = 6.0  # as the simulator's platform, instead of measuring it
    ls.configure(LocalConfig.from_request({"scheme": scheme, "mpl": 5, "tick_ms": TICK_S * 1e3}))
    assert ls.nic is not None and ls.core is not None
    holders = []
    for t, ev, subject, views in steps:
        ls.clock = lambda t=t: t  # type: ignore[method-assign]
        ls.nic.views = lambda rearm=True, v=views: v  # type: ignore[method-assign]
        if ev is Event.TICK:
            ls._decide(ev, None)
        else:
            ls._on_event(subject or "", ev)
        holders.append(ls.holder)
    return holders, ls.counters.as_dict(), ls.erl_us


def drive_sim(scheme: str, steps: list) -> tuple[list[str | None], dict, float]:  # type: ignore[type-arg]
    plat = Platform(name="t", decision_ms=TICK_S * 1e3, erl_slice_ms=0.0, context_switch_us=6.0)
    sim = CdcSim(scheme, 5, [1.0], plat, exact_ticks=True)
    nd = sim.nodes[0]
    procs = {}
    for k in KEYS:
        jid = int(k.split("/")[0])
        spec = SimJobSpec(jid, 0.0, synthetic(1, 0.001, "none", 0, 0, 1))
        from testbed.sim.cdc.engine import _Job

        p = _Proc(_Job(spec), 0, nd)
        nd.procs.append(p)
        nd.by_key[k] = p
        procs[k] = p
    holders = []
    tick = 0
    for t, ev, subject, views in steps:
        sim._views = lambda nd, now, v=views: v  # type: ignore[method-assign]
        sim.now = t
        nd.npend = sum(1 for v in views.values() if v.pending)
        if ev is Event.TICK:
            tick += 1
            nd.acct_k, nd.acct_next = 10**9, float("inf")  # the script's ticks: none between
            sim._decide(nd, t, ev, None, tick=tick)
        elif nd.cdc.is_decision(ev):
            nd.acct_k, nd.acct_next = 10**9, float("inf")
            nd.cdc.counters.events += 1
            sim._decide(nd, t, ev, procs[subject or KEYS[0]])
        else:
            nd.cdc.counters.events += 1
        holders.append(nd.cdc.holder)
    return holders, nd.cdc.counters.as_dict(), nd.cdc.erl_us


@pytest.mark.parametrize("scheme", SCHEMES)
def test_agent_and_simulator_drive_the_same_decisions(agent: Agent, scheme: str) -> None:
    steps = script(seed=SCHEMES.index(scheme) + 1)
    a_holders, a_counts, a_erl = drive_agent(agent, scheme, steps)
    s_holders, s_counts, s_erl = drive_sim(scheme, steps)
    assert a_holders == s_holders
    assert a_counts == s_counts
    if scheme in ("cc-s", "cc-b"):  # the simulator keeps the ERL only where a scheme reads it
        assert a_erl == pytest.approx(s_erl)
        assert a_erl > 0
    if scheme != "local":
        assert any(h is not None for h in a_holders)  # the script exercises boosts
