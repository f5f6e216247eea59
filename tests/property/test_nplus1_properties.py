"""Hypothesis properties of N + 1 gangs: the matcher (controller/policies/nplus1.py) and the
policy driven by the simulator (controller/policies/nplus1gang.py, testbed/sim/engine.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.base import QuantumPlan
from controller.policies.matching import best_fit_match
from controller.policies.nplus1 import dominant, fits_all, nplus1_match
from controller.policies.nplus1gang import NPlus1Gang
from controller.policies.paired import PairedGang
from testbed.sim.engine import simulate
from testbed.sim.job import Phase, SimJob
from testbed.sim.results import SimConfig

DEMAND = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def rows(width: int) -> st.SearchStrategy[dict[int, tuple[float, ...]]]:
    return st.dictionaries(
        st.integers(min_value=0, max_value=30),
        st.tuples(*[DEMAND] * width),
        min_size=1,
        max_size=8,
    )


@settings(max_examples=60, deadline=None)
@given(rows(2), st.data(), st.sampled_from([0.0, 0.01, 0.05]))
def test_n_equal_one_is_paired_gangs_best_fit(
    demands: dict[int, tuple[float, ...]], data: st.DataObject, margin: float
) -> None:
    key = data.draw(st.sampled_from(sorted(demands)))
    expected = best_fit_match({k: v[0] for k, v in demands.items()}, key, margin)
    got = nplus1_match(demands, key, 1, margin)
    assert got == (() if expected is None else (expected,))


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=3), st.data(), st.sampled_from([0.0, 0.01]))
def test_n_plus_one_never_overloads_a_device_nor_doubles_a_dominant(
    n: int, data: st.DataObject, margin: float
) -> None:
    width = data.draw(st.integers(min_value=n + 1, max_value=4))
    demands = data.draw(rows(width))
    key = data.draw(st.sampled_from(sorted(demands)))
    partners = nplus1_match(demands, key, n, margin)
    group = [demands[key], *(demands[p] for p in partners)]
    assert len(partners) <= n and key not in partners and len(set(partners)) == len(partners)
    if partners:
        assert fits_all(group, margin)
    doms = [dominant(v) for v in group]
    assert len(set(doms)) == len(doms)
    # greedy to the end: no row left out could still join (when fewer than n joined)
    if len(partners) < n:
        for other, v in demands.items():
            if other == key or other in partners:
                continue
            assert dominant(v) in doms or not fits_all([*group, v], margin)


SHARE = st.sampled_from([0.0, 0.05, 0.2, 0.4, 0.6, 0.8])


@st.composite
def sim_jobs(draw: st.DrawFn, nodes: int, full_width: bool) -> list[SimJob]:
    count = draw(st.integers(min_value=2, max_value=6))
    out = []
    for i in range(count):
        size = nodes if full_width else draw(st.integers(min_value=1, max_value=nodes))
        out.append(
            SimJob(
                job_id=i + 1,
                submit=float(draw(st.integers(min_value=0, max_value=10))),
                size=size,
                runtime=float(draw(st.integers(min_value=3, max_value=25))),
                estimate=10.0,
                phases=(Phase(1.0, draw(SHARE), draw(SHARE), draw(SHARE)),),
            )
        )
    return out


class _Groups(NPlus1Gang):
    def __init__(self, nodes: int, **kw: object) -> None:
        super().__init__(nodes, **kw)  # type: ignore[arg-type]
        self.seen: list[list[tuple[float, ...]]] = []

    def _build_plan(self, slot: int) -> QuantumPlan:
        plan = super()._build_plan(slot)
        self.seen.append([self.row_demand(s) for s in (slot, *self.last_group)])
        return plan


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_in_the_simulator_no_group_overloads_a_device_or_doubles_a_dominant(
    data: st.DataObject,
) -> None:
    nodes = 3
    jobs = data.draw(sim_jobs(nodes, full_width=False))
    policy = _Groups(nodes, n=2)
    simulate(jobs, policy, SimConfig(nodes=nodes, network=True))
    for group in policy.seen:
        if len(group) > 1:
            assert fits_all(group, policy.margin)
            doms = [dominant(v) for v in group]
            assert len(set(doms)) == len(doms)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_in_the_simulator_n_1_decides_as_paired_gang_best_fit(data: st.DataObject) -> None:
    nodes = 2
    jobs = data.draw(sim_jobs(nodes, full_width=True))
    plans: dict[str, list[tuple[int | None, int | None, tuple[tuple[int, ...], ...]]]] = {}
    ends = {}
    for name, policy in (
        ("nplus1", NPlus1Gang(nodes, n=1, alternate=False)),
        ("paired", PairedGang(nodes, matching="best-fit", alternate=False)),
    ):
        seen = plans[name] = []
        inner = policy.next_quantum

        def next_quantum(now: float, inner=inner, seen=seen) -> QuantumPlan:  # type: ignore[no-untyped-def]
            plan = inner(now)
            seen.append((plan.slot, plan.partner, plan.node_jobs))
            return plan

        policy.next_quantum = next_quantum  # type: ignore[method-assign]
        ends[name] = list(simulate(jobs, policy, SimConfig(nodes=nodes, network=True)).end)
    assert plans["nplus1"] == plans["paired"]
    assert ends["nplus1"] == ends["paired"]
