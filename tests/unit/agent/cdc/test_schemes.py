"""Yu & Byun 2011 Table 1 decision logic on scripted arrival sequences, and eqs. 1-4."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cdc.erl import PendingMsg, erl_max_us, erl_us, remaining_us, w_r, w_total
from agent.cdc.schemes import SCHEMES, Event, ProcView, UnknownScheme, make_scheme

T, A, C1, C0 = Event.TICK, Event.ARRIVAL, Event.COLL_ON, Event.COLL_OFF


def msg(seen: float = 0.0, erl: float = 0.0) -> PendingMsg:
    return PendingMsg(erl_us=erl, seen_s=seen)


def view(**procs: ProcView) -> dict[str, ProcView]:
    return dict(procs)


def pending(key: str, seen: float = 0.0, erl: float = 0.0, blocked: bool = False) -> ProcView:
    return ProcView(key, (msg(seen, erl),), blocked=blocked)


def idle(key: str, blocked: bool = False, coll: bool = False) -> ProcView:
    return ProcView(key, (), blocked=blocked, in_collective=coll)


# ---- eqs. 1-4 -----------------------------------------------------------------


def test_erl_eq1() -> None:
    # ED 2 ms, 3 pending processes, 5 us per switch: 6000 + 4 * 5
    assert erl_us(2000.0, 3, 5.0) == pytest.approx(6020.0)
    assert erl_us(2000.0, 0, 5.0) == pytest.approx(5.0)  # ceil(0) + 1 switches
    assert erl_us(1000.0, 1.5, 10.0) == pytest.approx(1500.0 + 3 * 10.0)
    with pytest.raises(ValueError):
        erl_us(-1.0, 1, 1.0)


def test_erl_max_and_decay() -> None:
    assert erl_max_us(5, 10_000.0) == 50_000.0
    m = msg(seen=1.0, erl=8000.0)
    assert remaining_us(m, 1.003) == pytest.approx(5000.0)  # eq. 3: ERL' = ERL - dt


def test_w_r_range_and_order() -> None:
    emax = 50_000.0
    assert w_r([], 0.0, emax) == 0.0
    assert w_r([msg(0.0, 0.0)], 0.0, emax) == pytest.approx(100.0)
    assert w_r([msg(0.0, emax)], 0.0, emax) == pytest.approx(0.0)
    assert w_r([msg(0.0, 2 * emax)], 0.0, emax) == 0.0  # clamped
    assert w_r([msg(0.0, 25_000.0)], 0.0, emax) == pytest.approx(50.0)
    # eq. 4 takes the min over messages of (ERL_max - ERL'): the slowest correspondent counts.
    assert w_r([msg(0.0, 10_000.0), msg(0.0, 40_000.0)], 0.0, emax) == pytest.approx(20.0)
    assert w_total([], 0.0, emax) == 0.0
    assert w_total([msg(0.0, 25_000.0)], 0.0, emax) == pytest.approx(70.0)


@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 10)), min_size=1, max_size=8),
    st.floats(0, 20),
)
def test_w_r_bounded(msgs: list[tuple[float, float]], now: float) -> None:
    w = w_r([msg(s, e) for e, s in msgs], now, 50_000.0)
    assert 0.0 <= w <= 100.0 and not math.isnan(w)


# ---- schemes -------------------------------------------------------------------


def test_registry_and_unknown_name_lists_valid_ones() -> None:
    assert set(SCHEMES) == {"batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b"}
    with pytest.raises(UnknownScheme) as e:
        make_scheme("fifo")
    assert "valid schemes:" in str(e.value) and "cc-b" in str(e.value)


def test_table1_waiting_actions() -> None:
    wait = {n: (c.send_wait, c.recv_wait) for n, c in SCHEMES.items()}
    assert wait["local"] == wait["dcs"] == wait["pb"] == wait["cc-s"] == ("spin", "spin")
    assert wait["ib"] == ("spin", "block")
    assert wait["sb"] == ("spin", "spinblock")
    assert wait["hybrid"] == wait["cc-b"] == ("block", "block")


def test_local_never_boosts() -> None:
    s = make_scheme("local")
    procs = view(a=pending("a"), b=pending("b"))
    assert s.decide(0.0, A, "a", procs) is None
    assert s.decide(0.0, T, None, procs) is None
    assert not s.is_decision(A)


def test_dcs_boosts_on_arrival_in_arrival_order() -> None:
    s = make_scheme("dcs")
    assert s.is_decision(A)
    procs = view(a=pending("a", 0.1), b=idle("b"))
    assert s.decide(0.1, A, "a", procs) == "a"
    # a second arrival for another process while a still has messages: queued behind a
    procs = view(a=pending("a", 0.1), b=pending("b", 0.2))
    assert s.decide(0.2, A, "b", procs) == "a"
    # a consumed its message: the boost moves to b at the next decision point
    procs = view(a=idle("a"), b=pending("b", 0.2))
    assert s.decide(0.21, T, None, procs) == "b"
    # an arrival for the running process (the holder) changes nothing
    assert s.decide(0.22, A, "b", procs) == "b"
    procs = view(a=idle("a"), b=idle("b"))
    assert s.decide(0.3, T, None, procs) is None


def test_ib_and_sb_boost_only_blocked_destinations() -> None:
    for name in ("ib", "sb"):
        s = make_scheme(name)
        spinning = view(a=pending("a", 0.1, blocked=False))
        assert s.decide(0.1, A, "a", spinning) is None  # a spinning receiver takes it itself
        blocked = view(a=pending("a", 0.2, blocked=True))
        assert s.decide(0.2, A, "a", blocked) == "a"


def test_pb_round_robin_over_pending() -> None:
    s = make_scheme("pb")
    assert not s.is_decision(A)
    procs = view(a=pending("a"), b=idle("b"), c=pending("c"))
    assert s.decide(0.0, A, "a", procs) is None  # arrivals are not decision points
    assert s.decide(0.01, T, None, procs) == "a"
    assert s.decide(0.02, T, None, procs) == "c"  # b has nothing pending: skipped
    assert s.decide(0.03, T, None, procs) == "a"  # wraps around
    assert s.decide(0.04, T, None, view(a=idle("a"), b=idle("b"), c=idle("c"))) is None


def test_hybrid_boosts_during_collectives_and_restores() -> None:
    s = make_scheme("hybrid")
    assert s.is_decision(C1) and s.is_decision(C0) and not s.is_decision(A)
    procs = view(a=idle("a", coll=True), b=idle("b"))
    assert s.decide(0.0, C1, "a", procs) == "a"
    procs = view(a=idle("a", coll=True), b=idle("b", coll=True))
    assert s.decide(0.01, C1, "b", procs) == "a"  # first to enter keeps it
    procs = view(a=idle("a"), b=idle("b", coll=True))
    assert s.decide(0.02, C0, "a", procs) == "b"
    assert s.decide(0.03, C0, "b", view(a=idle("a"), b=idle("b"))) is None


def test_cc_prefers_the_process_whose_peers_report_the_shortest_erl() -> None:
    for name in ("cc-s", "cc-b"):
        s = make_scheme(name, mpl=5, tick_s=0.010)
        # a arrived first but its correspondent's node is contended (long ERL)
        procs = view(a=pending("a", 1.000, erl=40_000.0), b=pending("b", 1.001, erl=2_000.0))
        assert s.decide(1.002, T, None, procs) == "b"
        # the same with the ERLs swapped: a wins
        procs = view(a=pending("a", 1.000, erl=2_000.0), b=pending("b", 1.001, erl=40_000.0))
        assert s.decide(1.002, T, None, procs) == "a"


def test_cc_pending_beats_non_pending_and_ties_go_to_earliest() -> None:
    s = make_scheme("cc-b")
    procs = view(a=idle("a", blocked=True), b=pending("b", 0.5, erl=49_000.0))
    assert s.decide(0.5, A, "b", procs) == "b"  # W_c = 20 > 0
    procs = view(a=pending("a", 0.6, erl=1000.0), b=pending("b", 0.5, erl=1000.0))
    assert s.decide(0.7, T, None, procs) == "b"  # equal weights: earliest arrival


def test_cc_erl_decays_with_time() -> None:
    # ERL' = ERL - dt: an old message whose correspondent must be running by now wins
    s = make_scheme("cc-b", mpl=5, tick_s=0.010)
    procs = view(a=pending("a", 0.0, erl=30_000.0), b=pending("b", 0.035, erl=10_000.0))
    assert s.decide(0.036, T, None, procs) == "a"  # a: 30 ms - 36 ms < 0 -> W_r 100


def test_cc_s_reorders_only_at_ticks() -> None:
    s = make_scheme("cc-s")
    assert not s.is_decision(A)
    assert make_scheme("cc-b").is_decision(A)


def test_cc_repeat_until_bounds_the_same_holder() -> None:
    # MPL 5, 41 ms slices: ERL_max 205 ms, NF 2050 us per W_r unit
    cc = make_scheme("cc-b", 5, 0.001, 0.041)
    v = view(a=pending("a", 10.0, 150_000.0), b=pending("b", 10.0, 100_000.0))
    now = 10.001
    assert cc.decide(now, Event.TICK, None, v) == "b"  # the shorter ERL weighs more
    until = cc.repeat_until(now, v)
    # W_r: a 27.3, b 51.7, both growing 1 per 2050 us; b nears the clamp at 100 first,
    # 99 ms later, and the holder may change from then on
    assert now + 0.098 < until < now + 0.0991
    for t in (now + 0.001, (now + until) / 2, until - 1e-6):
        assert cc.decide(t, Event.TICK, None, v) == "b"
    # asked at another time than its last decision's: no guarantee
    cc.decide(now, Event.TICK, None, v)
    assert cc.repeat_until(now + 0.001, v) == now + 0.001


def test_cc_repeat_until_refuses_near_ties_and_clamp_bounds() -> None:
    cc = make_scheme("cc-b", 5, 0.001, 0.041)
    tie = view(a=pending("a", 10.0, 100_000.0), b=pending("b", 10.0, 100_000.0 + 1e-9))
    cc.decide(10.001, Event.TICK, None, tie)
    assert cc.repeat_until(10.001, tie) == 10.001
    # a's W_r exactly at the 0 clamp (ERL' = ERL_max)
    edge = view(a=pending("a", 10.0, 205_000.0 + 1_000.0), b=pending("b", 10.0, 50_000.0))
    cc.decide(10.001, Event.TICK, None, edge)
    assert cc.repeat_until(10.001, edge) == 10.001
    # both clamped at 100 (old messages, tiny ERLs): the tie-break holds for good
    old = view(a=pending("a", 1.0, 0.0), b=pending("b", 2.0, 0.0))
    assert cc.decide(10.0, Event.TICK, None, old) == "a"
    assert cc.repeat_until(10.0, old) == math.inf
    # one pending process holds the boost whatever the time
    one = view(a=pending("a", 10.0, 1e5), b=idle("b"))
    cc.decide(10.001, Event.TICK, None, one)
    assert cc.repeat_until(10.001, one) == math.inf


def test_only_cc_promises_repeats() -> None:
    for name in ("local", "dcs", "pb", "ib", "sb", "hybrid"):
        s = make_scheme(name)
        v = view(a=pending("a"), b=pending("b"))
        s.decide(1.0, Event.TICK, None, v)
        assert s.repeat_until(1.0, v) == 1.0


@given(
    st.sampled_from(["dcs", "ib", "sb"]),
    st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), max_size=12),
    st.integers(0, 3),
    st.booleans(),
)
def test_arrival_repeats_only_when_the_decision_would(
    name: str, script: list[tuple[int, bool, bool]], subj: int, blocked: bool
) -> None:
    """After any scripted run of arrivals, ``arrival_repeats`` for a pending subject on the
    last decision's views (its ``blocked`` as given) says True only if deciding would
    return the same holder and leave the queue as it is (what the simulator's skip needs)."""
    s = make_scheme(name)
    procs: dict[str, ProcView] = {}
    for i, pend, blk in script:
        procs = {f"p{k}": idle(f"p{k}") for k in range(4)}
        procs[f"p{i}"] = pending(f"p{i}", blocked=blk) if pend else idle(f"p{i}", blk)
        s.decide(0.0, Event.ARRIVAL, f"p{i}", procs)
    key = f"p{subj}"
    if procs.get(key) is None or not procs[key].pending:
        procs = {**procs, key: pending(key, blocked=blocked)}
        s.decide(0.0, Event.TICK, None, procs)  # the views the check is against
    now = {**procs, key: ProcView(key, procs[key].pending, blocked)}
    holder, queue = s.holder, list(getattr(s, "queue", []))
    if s.arrival_repeats(now[key]):
        assert s.decide(0.0, Event.ARRIVAL, key, now) == holder
        assert list(getattr(s, "queue", [])) == queue


def test_arrival_repeats_for_the_queued_and_the_unwanted() -> None:
    """SB: a queued (or holding) subject repeats; a pending subject not yet queued repeats
    only while it is not blocked (SB boosts blocked processes only)."""
    s = make_scheme("sb")
    procs = view(a=pending("a", blocked=True), b=pending("b"))
    assert s.decide(0.0, Event.ARRIVAL, "a", procs) == "a"
    assert s.arrival_repeats(procs["a"])  # the holder
    assert s.arrival_repeats(procs["b"])  # pending, not blocked: not boosted
    assert not s.arrival_repeats(pending("b", blocked=True))  # would join the queue
    assert not make_scheme("pb").arrival_repeats(procs["a"])  # no guarantee by default
