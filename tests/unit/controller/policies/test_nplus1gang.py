"""The N + 1 gang policy (controller/policies/nplus1gang.py), alone and driven by the
simulator's exact loop with the three-device model (issue 31's tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controller.policies.base import JobRequest, PolicyError, QuantumPlan
from controller.policies.nplus1 import fits_all
from controller.policies.nplus1gang import NPlus1Gang
from controller.policies.paired import PairedGang
from controller.policies.registry import make_policy
from testbed.sim.engine import simulate
from testbed.sim.job import Phase, SimJob
from testbed.sim.results import SimConfig

NODES = 2


def job(
    job_id: int, cpu: float, disk: float = 0.0, net: float = 0.0, runtime: float = 40.0
) -> SimJob:
    return SimJob(
        job_id=job_id,
        submit=0.0,
        size=NODES,
        runtime=runtime,
        estimate=runtime,
        phases=(Phase(1.0, cpu, disk, net),),
    )


class Recording(NPlus1Gang):
    """Keeps, per quantum, the group's rows and their predicted demand vectors."""

    def __init__(self, nodes: int, **kw: object) -> None:
        super().__init__(nodes, **kw)  # type: ignore[arg-type]
        self.groups: list[tuple[tuple[int, ...], list[tuple[float, ...]]]] = []

    def _build_plan(self, slot: int) -> QuantumPlan:
        plan = super()._build_plan(slot)
        rows = (slot, *self.last_group)
        self.groups.append((rows, [self.row_demand(s) for s in rows]))
        return plan


CONFIG = SimConfig(nodes=NODES, quantum=1.0, interference=0.05, network=True)


def test_compute_disk_and_net_gangs_run_together_once_measured() -> None:
    jobs = [job(1, 0.9), job(2, 0.04, disk=0.8), job(3, 0.04, net=0.8)]
    policy = Recording(NODES, n=2)
    res = simulate(jobs, policy, CONFIG)
    sizes = [len(rows) for rows, _ in policy.groups]
    assert sizes[:3] == [1, 1, 1]  # each new job runs alone for a quantum (§2.3)
    assert 3 in sizes and policy.stats.grouped > 0
    # together they end well before three quanta per round would let them
    assert max(res.end) < 0.75 * sum(j.runtime for j in jobs)


def test_never_two_gangs_over_a_device_and_never_two_dominants_alike() -> None:
    # two disk-bound rows whose disk demands would fit together (0.3 + 0.3): never grouped
    jobs = [
        job(1, 0.5),
        job(2, 0.05, disk=0.3),
        job(3, 0.05, disk=0.3),
        job(4, 0.1, net=0.6),
        job(5, 0.6, disk=0.2, runtime=25.0),
        job(6, 0.3, net=0.5, runtime=30.0),
    ]
    policy = Recording(NODES, n=2)
    simulate(jobs, policy, CONFIG)
    grouped = [(rows, vecs) for rows, vecs in policy.groups if len(rows) > 1]
    assert grouped
    for _, vecs in grouped:
        assert fits_all(vecs, policy.margin)
        doms = [max(range(len(v)), key=lambda i, v=v: (v[i], -i)) for v in vecs]
        assert len(set(doms)) == len(doms)


def test_true_device_demand_within_capacity_on_every_node() -> None:
    """With steady jobs the prediction is the true share, so a grouped quantum never
    puts more than one device's worth of true demand on a node (+ the margin)."""
    jobs = [job(1, 0.9), job(2, 0.04, disk=0.8), job(3, 0.04, net=0.8), job(4, 0.5, disk=0.45)]
    truth = {j.job_id: (j.phases[0].cpu, j.phases[0].io, j.phases[0].net) for j in jobs}
    plans: list[QuantumPlan] = []

    class Plans(NPlus1Gang):
        def next_quantum(self, now: float) -> QuantumPlan:
            plan = super().next_quantum(now)
            plans.append(plan)
            return plan

    simulate(jobs, Plans(NODES, n=2), CONFIG)
    assert any(len(cell) == 3 for p in plans for cell in p.node_jobs)
    for p in plans:
        for cell in p.node_jobs:
            for dev in range(3):
                assert sum(truth[j][dev] for j in cell) < 1.0


class _Both:
    """Plans of a policy as (slot, partner, node_jobs)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, int | None, tuple[tuple[int, ...], ...]]] = []

    def wrap(self, policy: NPlus1Gang | PairedGang) -> NPlus1Gang | PairedGang:
        inner = policy.next_quantum

        def next_quantum(now: float) -> QuantumPlan:
            plan = inner(now)
            self.seen.append((plan.slot, plan.partner, plan.node_jobs))
            return plan

        policy.next_quantum = next_quantum  # type: ignore[method-assign]
        return policy


def test_n_equal_one_in_the_simulator_decides_as_paired_gang_best_fit() -> None:
    # full-width jobs (one per row: §2.5's band has nothing to do), with disk and net
    # shares that paired gang's CPU rule ignores at N = 1 as N + 1 does
    jobs = [
        job(1, 0.2, disk=0.7, runtime=30.0),
        job(2, 0.7, runtime=45.0),
        job(3, 0.45, net=0.5, runtime=20.0),
        job(4, 0.1, disk=0.9, runtime=35.0),
        job(5, 0.55, runtime=25.0),
        job(6, 0.35, disk=0.3, net=0.3, runtime=50.0),
    ]
    a, b = _Both(), _Both()
    ra = simulate(jobs, a.wrap(NPlus1Gang(NODES, n=1, alternate=False)), CONFIG)
    rb = simulate(jobs, b.wrap(PairedGang(NODES, matching="best-fit", alternate=False)), CONFIG)
    assert a.seen == b.seen
    assert any(p is not None for _, p, _ in a.seen)  # some quanta were paired
    assert list(ra.end) == list(rb.end)


def test_fed_only_the_cpu_the_policy_is_strict_gang() -> None:
    policy = NPlus1Gang(NODES, n=2)
    for j in (1, 2, 3):
        policy.submit(JobRequest(job_id=j, size=NODES, estimate=10.0), 0.0)
    for _ in range(6):
        plan = policy.next_quantum(0.0)
        policy.observe({j: 0.05 for j in plan.running})
    plan = policy.next_quantum(0.0)
    assert plan.partner is None and all(len(c) == 1 for c in plan.node_jobs)
    # the same jobs, measured on every device, group
    policy.observe_devices({1: {"cpu": 0.9}, 2: {"cpu": 0.04, "disk": 0.8}})
    policy.observe_devices({3: {"cpu": 0.04, "net": 0.8}})
    for _ in range(15):  # the jumps flag each job once (§4.2.3); then eq. (1) settles
        plan = policy.next_quantum(0.0)
        policy.observe_devices(
            {
                j: {1: {"cpu": 0.9}, 2: {"cpu": 0.04, "disk": 0.8}, 3: {"cpu": 0.04, "net": 0.8}}[j]
                for j in plan.running
            }
        )
    assert policy.stats.sizes.get(3, 0) >= 1


def test_exclusive_rows_run_alone() -> None:
    policy = NPlus1Gang(NODES, n=2)
    policy.submit(JobRequest(job_id=1, size=NODES, estimate=10.0, exclusive=True), 0.0)
    policy.submit(JobRequest(job_id=2, size=NODES, estimate=10.0), 0.0)
    demand: Mapping[int, Mapping[str, float]] = {1: {"cpu": 0.04, "disk": 0.8}, 2: {"cpu": 0.5}}
    for _ in range(8):
        plan = policy.next_quantum(0.0)
        assert plan.partner is None
        policy.observe_devices({j: demand[j] for j in plan.running})


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"n": 3}, "I/O devices configured are disk, net"),
        ({"devices": "cpu,gpu"}, "the agents measure cpu, disk, net"),
        ({"devices": "cpu,disk", "n": 2}, "N from 1 to 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_valid_ones(params: dict[str, object], words: str) -> None:
    with pytest.raises(PolicyError) as err:
        make_policy("nplus1", NODES, params)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_device_series_are_recorded_within_capacity() -> None:
    jobs = [job(1, 0.9), job(2, 0.04, disk=0.8), job(3, 0.04, net=0.8)]
    res = simulate(jobs, NPlus1Gang(NODES, n=2), CONFIG)
    assert set(res.series_devices) == {"cpu", "disk", "net"}
    for values in res.series_devices.values():
        assert len(values) == len(res.series_t)
        assert all(0.0 <= v <= 1.0 for v in values)
    # the grouped quanta use all three devices at once
    both = [
        (d, w)
        for d, w in zip(res.series_devices["disk"], res.series_devices["net"], strict=True)
        if d > 0.5 and w > 0.5
    ]
    assert both


# ---- under the controller (fake agents: the acks carry CPU time only) ---------------------
def _controller(params: dict[str, object]) -> tuple[Any, Any, Any, int, int]:
    from controller.scheduler import Scheduler
    from tests.support.controller_fakes import BUSY, Clock, FakePool

    pool = FakePool(2)
    clock = Clock()
    s = Scheduler("nplus1", params, pool, wall=clock, mono=clock)
    cpu = s.submit(BUSY, "alice")
    io = s.submit(BUSY, "bob")
    pool.busy[str(io)] = 0.05
    pool.busy[str(cpu)] = 0.9
    return s, pool, clock, cpu, io


def _run(s: Any, clock: Any, quanta: int) -> None:
    for _ in range(quanta):
        clock.t += 0.1
        s.tick()


def test_under_the_controller_n_1_pairs_io_with_compute_as_paired_gang() -> None:
    s, pool, clock, _, _ = _controller({"n": 1})
    _run(s, clock, 15)
    assert any(len(c["n0"]) == 2 for c in pool.commands[-5:])


def test_under_the_controller_cpu_only_acks_leave_n_2_as_strict_gang() -> None:
    s, pool, clock, _, _ = _controller({})
    _run(s, clock, 15)
    assert pool.commands and all(len(j) <= 1 for c in pool.commands for j in c.values())
