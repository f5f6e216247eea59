"""The simulator's engine and execution model, checked by hand on tiny cases.

The policies here are minimal fakes so that the engine's arithmetic is tested
apart from the real policies (which have their own tests and are driven by
the engine in their own modules).
"""

from __future__ import annotations

import math

import pytest

from controller.policies.base import BatchPolicy, JobRequest
from testbed.sim.engine import simulate
from testbed.sim.execution import gang_rates
from testbed.sim.job import Phase, SimJob
from testbed.sim.metrics import job_metrics, summarize
from testbed.sim.results import SimConfig
from tests.support.sim_fakes import OneSlotEach, job


class TinyFCFS(BatchPolicy):
    name = "tiny-fcfs"

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self.queue: list[JobRequest] = []
        self.running: dict[int, int] = {}

    def submit(self, job: JobRequest, now: float) -> None:
        self.queue.append(job)

    def finish(self, job_id: int, now: float) -> None:
        del self.running[job_id]

    def schedule(self, now: float) -> list[JobRequest]:
        out = []
        while self.queue and self.queue[0].size <= self.free_nodes:
            job = self.queue.pop(0)
            self.running[job.job_id] = job.size
            out.append(job)
        return out

    @property
    def queue_length(self) -> int:
        return len(self.queue)

    @property
    def free_nodes(self) -> int:
        return self.nodes - sum(self.running.values())


def test_rates_alone_shared_and_overcommitted() -> None:
    demand = {1: 1.0, 2: 0.2, 3: 1.0}.__getitem__
    # job 1 alone: full speed
    assert gang_rates([(1,)], demand, 0.1) == {1: 1.0}
    # 1.0 + 0.2 > 1: CPU shared in proportion, then the interference factor
    r = gang_rates([(1, 2)], demand, 0.1)
    assert r[1] == pytest.approx(0.9 / 1.2)
    # two compute-bound jobs: half speed each, less interference
    assert gang_rates([(1, 3)], demand, 0.0) == {1: 0.5, 3: 0.5}
    # a gang goes at the pace of its slowest node
    r = gang_rates([(1,), (1, 3)], demand, 0.0)
    assert r[1] == 0.5


def test_complementary_pair_runs_both_at_full_speed_minus_interference() -> None:
    demand = {1: 0.7, 2: 0.25}.__getitem__
    r = gang_rates([(1, 2), (1, 2)], demand, 0.05)
    assert r == {1: pytest.approx(0.95), 2: pytest.approx(0.95)}


def test_batch_fcfs_by_hand() -> None:
    # 4 nodes; job 1 (4 nodes, 10 s) at 0, job 2 (2 nodes, 5 s) at 1, job 3 (2 nodes, 5 s) at 2
    jobs = [job(1, 0, 4, 10), job(2, 1, 2, 5), job(3, 2, 2, 5)]
    res = simulate(jobs, TinyFCFS(4), SimConfig(nodes=4))
    assert list(res.start) == [0.0, 10.0, 10.0]
    assert list(res.end) == [10.0, 15.0, 15.0]
    s = summarize(res)
    assert s.makespan == 15.0
    assert s.mean_wait == pytest.approx((0 + 9 + 8) / 3)
    # 4*10 + 2*5 + 2*5 CPU seconds over 4 nodes * 15 s
    assert s.utilization == pytest.approx(60 / 60)
    assert s.max_jobs_in_system == 3


def test_batch_rejects_too_large_job_and_continues() -> None:
    jobs = [job(1, 0, 8, 10), job(2, 0, 2, 5)]
    res = simulate(jobs, TinyFCFS(4), SimConfig(nodes=4))
    assert res.rejected == [(1, "size 8 > 4 nodes of the machine")]
    rows = job_metrics(res)
    assert [r.job_id for r in rows] == [2]
    assert summarize(res).rejected == 1


def test_gang_exact_round_robin_two_jobs() -> None:
    # two compute-bound 3 s jobs on a 1 s quantum alternate: A ends at 5, B at 6
    jobs = [job(1, 0, 2, 3), job(2, 0, 2, 3)]
    res = simulate(jobs, OneSlotEach(2), SimConfig(nodes=2, quantum=1.0))
    assert list(res.end) == [5.0, 6.0]
    rows = {r.job_id: r for r in job_metrics(res)}
    assert rows[1].slowdown == pytest.approx(5 / 3)
    assert rows[2].wait == pytest.approx(1.0)


def test_gang_exact_context_switch_cost() -> None:
    # one job, 2 s, quantum 1 s, switch 0.25 s: charged once (it stays switched in)
    res = simulate([job(1, 0, 1, 2)], OneSlotEach(1), SimConfig(nodes=1, context_switch=0.25))
    assert res.end[0] == pytest.approx(2.25)


def test_gang_exact_reports_measured_utilization() -> None:
    policy = OneSlotEach(1)
    simulate([job(1, 0, 1, 2, cpu=0.3)], policy, SimConfig(nodes=1))
    assert policy.seen[0] == {1: pytest.approx(0.3)}


def test_gang_paired_exact_and_fluid_agree_on_a_stationary_pair() -> None:
    jobs = [job(1, 0, 2, 10, cpu=0.6), job(2, 0, 2, 10, cpu=0.3)]
    ends = {}
    for mode in ("exact", "fluid"):
        res = simulate(jobs, OneSlotEach(2, pair=True), SimConfig(nodes=2, mode=mode))
        ends[mode] = list(res.end)
        assert res.matching is not None and res.matching.matched > 0
    # 0.6 + 0.3 <= 1: both at 0.95 speed, ending together at 10 / 0.95
    for mode in ends:
        assert ends[mode] == [pytest.approx(10 / 0.95), pytest.approx(10 / 0.95)]


def test_phases_change_rates_mid_run() -> None:
    # a job half at cpu 1, half at cpu 0.1, paired with a cpu 1 job:
    # phase 1 shared 50/50 (rate .5), phase 2 sum 1.1 -> rate 1/1.1
    a = SimJob(1, 0, 1, 4, 4, phases=(Phase(0.5, 1.0), Phase(0.5, 0.1)))
    b = job(2, 0, 1, 100)
    res = simulate([a, b], OneSlotEach(1, pair=True), SimConfig(nodes=1, interference=0))
    assert res.end[0] == pytest.approx(2 / 0.5 + 2 * 1.1)


def test_gang_idle_gap_jumps_to_next_arrival() -> None:
    res = simulate([job(1, 0, 1, 1), job(2, 100, 1, 1)], OneSlotEach(1), SimConfig(nodes=1))
    assert list(res.start) == [0.0, 100.0]
    assert list(res.end) == [1.0, 101.0]


def test_summary_nan_free_when_nothing_completes() -> None:
    res = simulate([job(1, 0, 9, 1)], TinyFCFS(4), SimConfig(nodes=4))
    s = summarize(res)
    assert s.completed == 0 and s.rejected == 1
    assert math.isnan(s.mean_wait)


# --------------------------------------------------------------------------
# Golden results: the real gang policies on a small mixed workload, pinned
# bit for bit so that speed work on the policies and the engine can show it
# changed nothing. The workload is drawn with the standard library's
# Mersenne Twister (platform independent); the digest covers every job's
# start, end and CPU time, the jobs-in-system series and the matching counts.


def _golden_workload() -> list[SimJob]:
    import random

    rng = random.Random(20261121)
    jobs = []
    t = 0.0
    for i in range(1, 161):
        t += round(rng.expovariate(1 / 120.0), 3)
        size = rng.choice([1, 1, 2, 2, 3, 4, 4, 5, 8, 8, 12, 16])
        runtime = round(rng.uniform(5.0, 600.0), 2)
        if i % 5 == 1:
            phases: tuple[Phase, ...] = (Phase(0.3, 0.9), Phase(0.4, 0.2), Phase(0.3, 0.6))
        else:
            phases = (Phase(1.0, round(rng.random(), 4)),)
        jobs.append(SimJob(i, t, size, runtime, runtime * 2, phases=phases, exclusive=i % 11 == 4))
    return jobs


def _digest(res: object, policy: object) -> str:
    import hashlib

    from testbed.sim.results import SimResult

    assert isinstance(res, SimResult)
    h = hashlib.sha256()
    for a in (res.start, res.end, res.cpu, res.series_t, res.series_n):
        h.update(a.tobytes())
    m = res.matching
    assert m is not None
    h.update(repr((m.quanta, m.matched)).encode())
    h.update(repr(getattr(policy, "stats", None)).encode())
    return h.hexdigest()[:20]


GOLDEN = {
    # (policy, params, mode, context switch): digest
    ("paired-gang", (), "fluid", 0.0): "69aedfb5a0ca7912ee1a",
    ("paired-gang", (), "fluid", 0.1): "2e643ec5f4a919e590bb",
    ("paired-gang", (("matching", "best-fit"),), "fluid", 0.0): "6829cde2eee94daba3e5",
    ("paired-gang", (("max_slots", 3),), "fluid", 0.0): "5026cbf82881f548102d",
    ("paired-gang", (("band_rule", "new-row"),), "fluid", 0.0): "d66980a32dc504cd0cc2",
    ("paired-gang", (("matching", "fig4-prose"),), "fluid", 0.0): "2e2f4b75ba60e0857438",
    ("paired-gang", (), "exact", 0.0): "d4b2223ff911daa5136e",
    ("gang", (), "fluid", 0.0): "2a23cfbcaeefcb8f8b10",
    ("gang", (), "exact", 0.0): "b6c55cb1d6d47ff0b612",
}


@pytest.mark.parametrize("case", sorted(GOLDEN, key=repr), ids=repr)
def test_golden_gang_results(case: tuple[str, tuple[tuple[str, object], ...], str, float]) -> None:
    from controller.policies.registry import make_policy

    name, params, mode, cs = case
    policy = make_policy(name, 16, dict(params))
    res = simulate(_golden_workload(), policy, SimConfig(nodes=16, mode=mode, context_switch=cs))
    assert all(not math.isnan(e) for e in res.end)
    assert _digest(res, policy) == GOLDEN[case]
