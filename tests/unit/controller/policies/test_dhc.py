"""DHC (Feitelson & Rudolph 1996): the controller tree, its mapping and its rounds; the waste
analysis."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.dhc import (
    ALGORITHMS,
    BALANCING,
    MAPPINGS,
    DhcConfig,
    DhcError,
    DhcTree,
    Gang,
    level_for,
    pe_busy,
)
from testbed.sim import dhcwaste
from testbed.sim.dhc import simulate


def tree(**kw: object) -> DhcTree:
    return DhcTree(DhcConfig(**kw))  # type: ignore[arg-type]


def test_levels_and_blocks() -> None:
    assert [level_for(s) for s in (1, 2, 3, 4, 5, 8, 9, 32)] == [0, 1, 2, 2, 3, 3, 4, 5]
    t = tree(pes=8)
    assert t.root == (3, 0) and list(t.block((1, 3))) == [6, 7]
    assert t.children((2, 1)) == ((1, 2), (1, 3)) and t.children((0, 4)) is None


def test_bad_config_and_requests_are_one_line() -> None:
    with pytest.raises(DhcError, match="power of two"):
        DhcConfig(pes=12)
    with pytest.raises(DhcError, match="balancing must be one of"):
        DhcConfig(balancing="star")
    t = tree(pes=4)
    with pytest.raises(DhcError, match="exceeds the 4 PEs"):
        t.place(1, 5)
    t.place(1, 2)
    with pytest.raises(DhcError, match="already mapped"):
        t.place(1, 1)
    with pytest.raises(DhcError, match="no gang 9"):
        t.remove(9)


def test_fig5_selective_disabling_runs_leftover_processors() -> None:
    """Feitelson & Rudolph 1996 Fig. 5: the root's 5-thread gang on PEs 1-5; PEs 7-8 run a 2-thread
    gang and PE 6 a single thread in the same slot, only with selective disabling."""
    runs = {}
    for sd in (True, False):
        t = tree(pes=8, balancing="none", between="uniform", within="uniform", selective=sd)
        assert t.place(1, 5, origin=0).pes == (0, 1, 2, 3, 4)
        assert t.place(2, 2, origin=6).pes == (6, 7)
        assert t.place(3, 1, origin=5).pes == (5,)
        runs[sd] = t.run_fractions()
        if sd:
            assert sorted(t.front(0.25)) == [(0, 5), (1, 3), (3, 0)]
    # root: 1 gang of a chain of 2 -> half the round; the others get the rest
    assert runs[False] == {1: 0.5, 2: 0.5, 3: 0.5}
    assert runs[True] == {1: 0.5, 2: 1.0, 3: 1.0}


def test_time_division_within_a_controller() -> None:
    sizes = [8, 6, 4, 2]  # all at the root of 8 PEs: 8 -> level 3, the others too
    expect = {
        "uniform": [0.25] * 4,
        "weight": [s / 20 for s in sizes],
        "frustration": [(1 / (20 - s)) / sum(1 / (20 - x) for x in sizes) for s in sizes],
    }
    for within, want in expect.items():
        # Fig. 8's four gangs, all controlled by the root (set directly: the mapping
        # would put the small ones lower)
        t2 = tree(pes=8, within=within, selective=False)
        for g, s in enumerate(sizes):
            t2.record(Gang(g, s, (3, 0), tuple(range(s))))
        got = t2.run_fractions()
        assert [got[g] for g in range(4)] == pytest.approx(want), within


def test_time_division_between_controller_and_subordinates() -> None:
    # root: one gang of 8; below: (2, 0) with two 3-thread gangs
    for between, root_share in (("uniform", 1 / 3), ("weight", 8 / 14)):
        t = tree(pes=8, balancing="none", between=between, within="uniform", selective=True)
        t.place(1, 8, origin=0)
        t.place(2, 3, origin=0)
        t.place(3, 3, origin=0)
        rf = t.run_fractions()
        assert rf[1] == pytest.approx(root_share), between
        assert rf[2] == pytest.approx((1 - root_share) / 2) == rf[3]


def test_balancing_schemes_choose_as_the_paper_says() -> None:
    # 8 PEs; load PE pairs unevenly, then ask for a 2-thread gang from PE 0
    def loaded() -> DhcTree:
        t = tree(pes=8, balancing="none", mapping="fragmentation")
        for g, pe in enumerate([0, 1, 0, 1, 2, 3, 6]):  # blocks (1,0): 4, (1,1): 2, (1,3): 1
            t.place(100 + g, 1, origin=pe)
        return t

    picks = {}
    for b in BALANCING:
        t = loaded()
        t.cfg = DhcConfig(pes=8, balancing=b)
        picks[b] = t.choose_controller(2, origin=0)
    assert picks["none"] == (1, 0)
    assert picks["ring"] == (1, 3)  # home 0 and its neighbours 3 and 1: 3 is lightest
    assert picks["cube"] == (1, 2)  # home 0 (4), 0^1 = 1 (2), 0^2 = 2 (empty)
    assert [loaded().load((1, j)) for j in range(4)] == [4, 2, 0, 1]
    assert picks["root"] == (1, 2)  # right half (1 thread) then its lighter child
    assert picks["random"][0] == 1


def test_cube_prefers_an_empty_neighbour_and_origin_models() -> None:
    t = tree(pes=8, balancing="cube")
    t.place(1, 1, origin=0)
    assert t.choose_controller(2, origin=0) in {(1, 1), (1, 2)}
    t2 = tree(pes=8, origin="pe0", balancing="none")
    assert all(t2.origin_pe() == 0 for _ in range(5))
    t3 = tree(pes=8, origin="any", balancing="none")
    t3.place(1, 1, origin=5)
    assert all(t3.origin_pe() == 5 for _ in range(5))  # the only thread is on PE 5


def test_mapping_balance_vs_fragmentation() -> None:
    # an empty 8-PE machine, a 5-thread gang at the root (children hold 4 PEs each)
    frag = tree(pes=8, balancing="none", mapping="fragmentation").place(1, 5, origin=0)
    assert frag.pes == (0, 1, 2, 3, 4)  # fill one child exactly, the rest next door
    bal = tree(pes=8, balancing="none", mapping="balance").place(1, 5, origin=0)
    assert sum(p < 4 for p in bal.pes) == 3 and sum(p >= 4 for p in bal.pes) == 2
    # balance levels uneven loads: left holds 3 threads, right 0; 3 more go 0 / 3
    t = tree(pes=8, balancing="none", mapping="balance")
    t.place(1, 3, origin=0)
    g = t.place(2, 5, origin=0)  # |3 - 0| <= 5 and <= 4: s1 + 3 = s2 + 0 (+-1)
    left = sum(p < 4 for p in g.pes)
    assert abs((left + 3) - (5 - left)) <= 1, g.pes
    # too uneven for balance (|t1 - t2| > s): it falls back to filling the lighter child
    t2 = tree(pes=8, balancing="none", mapping="balance")
    t2.place(1, 4, origin=0)
    assert t2.place(2, 1, origin=0).controller == (0, 0)
    assert t2.place(3, 2, origin=4).pes == (4, 5)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([4, 8, 16, 32]),
    st.sampled_from(BALANCING),
    st.sampled_from(MAPPINGS),
    st.sampled_from(sorted(ALGORITHMS)),
    st.booleans(),
    st.lists(st.tuples(st.booleans(), st.integers(1, 32)), min_size=1, max_size=40),
    st.integers(0, 1000),
)
def test_no_pe_runs_two_threads_at_once_and_every_gang_runs(
    pes: int, bal: str, mapping: str, alg: str, sd: bool, ops: list[tuple[bool, int]], seed: int
) -> None:
    between, within = ALGORITHMS[alg]
    cfg = DhcConfig(pes=pes, balancing=bal, mapping=mapping, between=between, within=within,
                    selective=sd)  # fmt: skip
    t = DhcTree(cfg, rng=random.Random(seed))
    nxt = 0
    for add, size in ops:
        if add or not t.gangs:
            t.place(nxt, min(size, pes))
            nxt += 1
        else:
            t.remove(sorted(t.gangs)[size % len(t.gangs)])
        g_pes = {g: set(x.pes) for g, x in t.gangs.items()}
        assert all(len(p) == t.gangs[g].size for g, p in g_pes.items())
        assert all(t.pe_load[p] >= 0 for p in range(pes))
        assert sum(t.pe_load) == sum(x.size for x in t.gangs.values())
        slots = t.round()
        cuts = sorted({s.start for s in slots} | {s.start + s.length for s in slots})
        for a, b in itertools.pairwise(cuts):
            if b - a < 1e-9:  # round-off where one slot ends as the next begins
                continue
            mid = (a + b) / 2
            busy: set[int] = set()
            for s in slots:
                if s.start <= mid < s.start + s.length:
                    assert not (busy & g_pes[s.gang_id]), "two threads on one PE"
                    busy |= g_pes[s.gang_id]
        rf = t.run_fractions()
        assert all(0 < v <= 1 + 1e-9 for v in rf.values()), rf
        assert all(b <= 1 + 1e-9 for b in pe_busy(slots, t))
        # selective disabling never gives a gang less than total disabling does
        if sd:
            plain = DhcTree(DhcConfig(pes=pes, between=between, within=within, selective=False))
            for g in t.gangs.values():
                plain.record(g)
            base = plain.run_fractions()
            assert all(rf[g] >= base[g] - 1e-9 for g in rf)


def test_waste_bounds_and_the_offline_packers() -> None:
    b = dhcwaste.BOUNDS
    assert b["uniform"] == (0.25, 0.20) and b["pow2"] == (0.0, 0.0)
    assert b["harmonic"][0] == pytest.approx(0.2786, abs=1e-4)
    assert b["harmonic"][1] == pytest.approx(0.1004, abs=1e-4)
    for dist in ("uniform", "harmonic", "pow2"):
        sizes = dhcwaste.size_table(dist, 1024, 50_000)
        total, sd = b[dist]
        assert dhcwaste.offline_total_waste(sizes) == pytest.approx(total, abs=0.005)
        assert dhcwaste.offline_selective_waste(sizes, 1024) == pytest.approx(sd, abs=0.005)


def test_fcfs_online_waste_is_in_figure_18s_range() -> None:
    rng = random.Random(3)
    unit = dhcwaste.fcfs_unit_waste("uniform", 32, 5000, rng)
    exp5 = dhcwaste.fcfs_exp_waste("uniform", 32, 2000, rng)
    assert 0.20 <= unit <= 0.26 and 0.28 <= exp5 <= 0.40 and exp5 > unit, (unit, exp5)


def test_fluid_simulation_low_load_and_selective_disabling() -> None:
    low = simulate(DhcConfig(), "uniform", 0.1, gangs=600, seed=2)
    assert not low.saturated and low.median_slowdown < 1.3
    assert low.utilization == pytest.approx(0.1, rel=0.25)
    sd = simulate(DhcConfig(selective=True), "uniform", 0.5, gangs=1500, seed=4)
    td = simulate(DhcConfig(selective=False), "uniform", 0.5, gangs=1500, seed=4)
    assert sd.median_slowdown < td.median_slowdown, (sd.median_slowdown, td.median_slowdown)
    assert math.isclose(sum(sd.rf_hist), 1.0) and sd.fairness >= 1.0


# ---- DHC behind the gang-policy contract (cosched simulate / the live controller) --------


def test_dhc_policy_plans_follow_the_round_and_never_double_book() -> None:
    from controller.policies.base import JobRequest
    from controller.policies.dhcpolicy import DhcPolicy

    p = DhcPolicy(8, balancing="none", origin="pe0", algorithm="uniform/uniform", round_quanta=8)
    for jid, size in ((1, 5), (2, 2), (3, 1), (4, 8)):
        p.submit(JobRequest(jid, size, 10.0), 0.0)
    want = p.tree.run_fractions()
    runs = dict.fromkeys(want, 0)
    n = 4000
    for _ in range(n):
        plan = p.next_quantum(0.0)
        assert all(len(c) <= 1 for c in plan.node_jobs)
        for j in plan.running:
            runs[j] += 1
    for j, rf in want.items():
        assert runs[j] / n == pytest.approx(rf, abs=0.02), (j, runs[j] / n, rf)
    assert p.queue_length == 0 and p.slot_count >= 2
    rows = p.matrix_view()
    assert all(len(r) == 8 for r in rows) and {c for r in rows for c in r} - {None} == {1, 2, 3, 4}


def test_a_slot_shorter_than_a_quantum_is_not_starved() -> None:
    from controller.policies.base import JobRequest
    from controller.policies.dhcpolicy import DhcPolicy

    p = DhcPolicy(4, balancing="none", origin="pe0", algorithm="weight/uniform",
                  selective=False, round_quanta=2)  # fmt: skip
    p.submit(JobRequest(1, 4, 1.0), 0.0)  # 4 threads at the root
    p.submit(JobRequest(2, 1, 1.0), 0.0)  # 1 thread at a leaf: weight 1/5 < half a quantum
    rf = p.tree.run_fractions()[2]
    assert rf == pytest.approx(0.2)
    seen = sum(2 in p.next_quantum(0.0).running for _ in range(1000))
    assert seen / 1000 == pytest.approx(rf, abs=0.02)


def test_dhc_policy_refusals_and_pin() -> None:
    from controller.policies.base import JobRequest, PolicyError
    from controller.policies.dhcpolicy import DhcPolicy
    from controller.policies.registry import make_policy

    with pytest.raises(PolicyError, match="power-of-two number of nodes"):
        DhcPolicy(6)
    with pytest.raises(PolicyError, match="algorithm must be one of"):
        DhcPolicy(8, algorithm="fair")
    p = make_policy("dhc", 8, {"balancing": "ring", "selective": False})
    assert isinstance(p, DhcPolicy) and p.tree.cfg.balancing == "ring"
    with pytest.raises(PolicyError, match="9 nodes > the 8"):
        p.submit(JobRequest(1, 9, 1.0), 0.0)
    p.pin(5, (2, 3, 4))  # a restart: where its ranks already run
    assert p.placement(5) == (0, (2, 3, 4)) and p.tree.gangs[5].controller == (3, 0)
    p.pin(6, (6, 7))
    assert p.tree.gangs[6].controller == (1, 3)
    p.finish(5, 1.0)
    assert p.placement(5) is None and p.tree.pe_load[2] == 0


def test_dhc_runs_in_the_simulator_engine() -> None:
    from controller.policies.dhcpolicy import DhcPolicy
    from testbed.sim.engine import simulate as engine
    from testbed.sim.job import SimJob
    from testbed.sim.results import SimConfig

    rng = random.Random(5)
    jobs = [SimJob(i, i * 0.7, rng.choice([1, 2, 3, 4, 8]), rng.uniform(0.5, 4), 5.0)
            for i in range(60)]  # fmt: skip
    res = engine(jobs, DhcPolicy(8), SimConfig(nodes=8, quantum=0.1))
    assert len(res.jobs) == 60
    for i, j in enumerate(res.jobs):
        assert res.end[i] >= j.submit + j.runtime - 1e-6, (j, res.end[i])


def test_the_matrix_view_shows_the_tree_and_its_front() -> None:
    from controller.policies.base import JobRequest
    from controller.policies.dhcpolicy import DhcPolicy
    from testbed.views import render_matrix

    p = DhcPolicy(4, balancing="none", origin="pe0", round_quanta=4)
    p.submit(JobRequest(1, 4, 1.0), 0.0)
    p.submit(JobRequest(2, 2, 1.0), 0.0)
    plan = p.next_quantum(0.0)
    tv = p.tree_view()
    assert tv["running"] == sorted(plan.running)
    assert {tuple(c) for c in tv["front"]}  # type: ignore[union-attr]
    text = render_matrix({"policy": "dhc", "quantum": 0.1, "nodes": ["n0", "n1", "n2", "n3"],
                          "slots": p.matrix_view(), "running": {}, "tree": tv,
                          "jobs": {"1": {"size": 4}, "2": {"size": 2}}})  # fmt: skip
    assert "DHC tree: a round of 4 quanta" in text
    assert "level 2 #0 [n0-n3]: jobs 1" in text and "level 1 #0 [n0-n1]: jobs 2" in text
    assert "front" in text
