"""The CDC simulator (testbed/sim/cdc/): hand-derived runs, skipped decisions, fluid mode.

The scheme decisions themselves are the agents' code (agent/cdc/); what is
tested here is the simulator's driver of it and its model of processes,
messages and the local scheduler.
"""

from __future__ import annotations

import math
import random

import pytest

from testbed.sim.cdc.engine import CdcResult, CdcSim, Fluid, SimJobSpec
from testbed.sim.cdc.platform import PAPER, TESTBED, Platform
from testbed.sim.cdc.program import JobProgram, RankProgram, Step, synthetic

SCHEMES = ("local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")


def job(steps_by_rank: list[list[Step]], app: str = "t") -> JobProgram:
    return JobProgram(app, tuple(RankProgram(((tuple(s), 1),), (True,)) for s in steps_by_rank))


# A plain machine for runs derived by hand: 1 ms one-way latency, no bandwidth limit
# to speak of, free context switches, 1 ms ticks at phase 0.5 ms, long slices.
HAND = Platform(
    name="hand",
    latency_us=1000.0,
    bandwidth_gbps=10_000.0,
    context_switch_us=0.0,
    decision_ms=1.0,
    slice_ms=1000.0,
    erl_slice_ms=41.0,
    spin_us=150.0,
    wake_us=0.0,
)


def test_two_node_stream_bcr_and_md_by_hand() -> None:
    """Two jobs of two ranks on two nodes under LOCAL (spin, no boosts).

    Node 1 runs A1 (sends to A0 at 0) and B1 (sends to B0 at 0, computes
    12 ms, sends again). Node 0 runs A0 (5 ms, then waits for A1's message)
    and B0 (5 ms, then two waits for B1's messages); A0 first, then B0.

    * MD: A0's message arrived at 1 ms, before its wait at 5 ms: 0. B0's
      first, arrived at 1 ms, consumed at its wait at 10 ms: 0. Its second,
      sent at 12 ms, arrives at 13 ms while B0 spins from 10 ms: 3 ms.
      Mean 1 ms.
    * BCR: A0 is pending from 1 to 5 ms, B0 from 1 to 10 ms: the ticks at
      1.5, 2.5, 3.5 and 4.5 ms on node 0 see two processes pending. The run
      ends at 13 ms: ticks 0.5 ... 12.5 ms on each node, 26 decision points.
    """
    a = job([[(0.005, (), (1,), 8, 0)], [(0.0, ((0, 8),), (), 0, 0)]], "a")
    b = job(
        [
            [(0.005, (), (1,), 8, 0), (0.0, (), (1,), 8, 0)],
            [(0.0, ((0, 8),), (), 0, 0), (0.012, ((0, 8),), (), 0, 0)],
        ],
        "b",
    )
    sim = CdcSim("local", 2, [1.0, 1.0], HAND, tick_phase=0.0005)
    res = sim.run([SimJobSpec(0, 0.0, a, "A"), SimJobSpec(1, 0.0, b, "B")])
    ends = {j.name: j.end for j in res.jobs}
    assert ends["A"] == pytest.approx(0.005, abs=1e-9)
    assert ends["B"] == pytest.approx(0.013, abs=1e-8)
    assert res.md_count == 3
    assert res.md_mean_s == pytest.approx(0.001, abs=1e-8)
    assert res.decisions == 26
    assert res.conflicts == 4
    assert res.bcr == pytest.approx(4 / 26)


def test_spin_block_waits_then_blocks_and_the_other_job_runs() -> None:
    """SB: a receiver spins its 150 µs, then blocks, and the node runs the other job.

    C0 waits at 0 for a message C1 sends after 10 ms of compute (arrives at
    11 ms); D0 on the same node computes 20 ms. Under SB, C0 blocks at
    150 µs and D0 runs until C0's message wakes it (IB/SB boost it), so D0's
    20 ms of compute end at 20.15 ms plus C0's run. Under LOCAL (spin) C0
    spins for its slice first.
    """
    c = job([[(0.0, (), (1,), 8, 0)], [(0.010, ((0, 8),), (), 0, 0)]], "c")
    d = job([[(0.020, (), (), 0, 0)]], "d")
    sb = CdcSim("sb", 2, [1.0, 1.0], HAND, tick_phase=0.0005).run(
        [SimJobSpec(0, 0.0, c, "C"), SimJobSpec(1, 0.0, d, "D")]
    )
    local = CdcSim("local", 2, [1.0, 1.0], HAND, tick_phase=0.0005).run(
        [SimJobSpec(0, 0.0, c, "C"), SimJobSpec(1, 0.0, d, "D")]
    )
    e_sb = {j.name: j.end for j in sb.jobs}
    e_local = {j.name: j.end for j in local.jobs}
    # SB: C0 spins 150 µs, blocks; D0 runs; C0's message at 11 ms wakes it (boosted), done.
    assert e_sb["C"] == pytest.approx(0.011, abs=1e-6)
    assert e_sb["D"] == pytest.approx(0.02015, abs=1e-6)
    # LOCAL: C0 spins until its message (slices are long): D0 starts after it.
    assert e_local["C"] == pytest.approx(0.011, abs=1e-6)
    assert e_local["D"] == pytest.approx(0.031, abs=1e-6)


def test_heterogeneous_speed_stretches_compute() -> None:
    prog = job([[(0.010, (), (), 0, 0)]])
    res = CdcSim("batch", 1, [1.8 / 2.8], HAND).run([SimJobSpec(0, 0.0, prog)])
    assert res.jobs[0].execution == pytest.approx(0.010 * 2.8 / 1.8, rel=1e-9)


def _stream(seed: int = 3, n: int = 10, iterations: int = 60) -> list[SimJobSpec]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.choice([2, 3, 4])
        comm = rng.choice(["nn", "a2a", "allreduce"])
        prog = synthetic(size, 0.002, comm, 4096, 2, iterations)
        out.append(SimJobSpec(i, i * 0.05, prog, f"j{i}"))
    return out


def _fingerprint(res: object) -> tuple[object, ...]:
    r = res  # CdcResult
    return (
        tuple(round(j.end, 12) for j in r.jobs),  # type: ignore[attr-defined]
        r.decisions,  # type: ignore[attr-defined]
        r.conflicts,  # type: ignore[attr-defined]
        r.boosts,  # type: ignore[attr-defined]
        r.md_count,  # type: ignore[attr-defined]
        round(r.md_sum_s, 12),  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("platform", [PAPER, TESTBED], ids=["paper", "testbed"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_skipping_repeated_decisions_changes_nothing(scheme: str, platform: Platform) -> None:
    """Ticks and arrivals whose outcome provably repeats are counted, not evaluated: the run
    is the same, to the last counter, as asking the scheme at every one."""
    speeds = [1.0, 1.0, 0.643, 0.643]
    fast = CdcSim(scheme, 5, speeds, platform, seed=1).run(_stream())
    exact = CdcSim(scheme, 5, speeds, platform, seed=1, exact_ticks=True).run(_stream())
    assert _fingerprint(fast) == _fingerprint(exact)
    if scheme in ("pb", "cc-s", "cc-b", "dcs", "ib", "sb"):
        assert fast.evaluated < exact.evaluated  # it did skip


def test_blocking_beats_spinning_under_contention() -> None:
    """Yu & Byun 2011 §5.3's robust finding, here as a property of the model: with five
    communicating jobs per node, immediate blocking (IB) wastes less CPU than spinning."""
    speeds = [1.0, 1.0, 0.643, 0.643]
    jobs = _stream(n=10, iterations=80)
    local = CdcSim("local", 5, speeds, PAPER).run(jobs)
    ib = CdcSim("ib", 5, speeds, PAPER).run(_stream(n=10, iterations=80))
    mean = lambda r: sum(j.response for j in r.jobs) / len(r.jobs)  # noqa: E731
    assert mean(ib) < mean(local)


def test_fluid_mode_is_close_to_exact_on_long_jobs() -> None:
    """Jobs of a few hundred iterations: a fluid run's mean response, BCR and MD stay near
    the exact run's while it simulates far fewer events."""
    speeds = [1.0, 1.0, 0.643, 0.643]

    def jobs() -> list[SimJobSpec]:
        rng = random.Random(7)
        out = []
        for i in range(6):
            prog = synthetic(rng.choice([2, 4]), 0.004, rng.choice(["nn", "a2a"]), 8192, 2, 1500)
            out.append(SimJobSpec(i, i * 2.0, prog, f"j{i}"))
        return out

    exact = CdcSim("cc-b", 3, speeds, PAPER).run(jobs())
    fl = CdcSim("cc-b", 3, speeds, PAPER, fluid=Fluid(0.3, 0.6, 0.5, 1.0)).run(jobs())
    resp = lambda r: sum(j.response for j in r.jobs) / len(r.jobs)  # noqa: E731
    assert resp(fl) == pytest.approx(resp(exact), rel=0.10)
    assert fl.bcr is not None and exact.bcr is not None
    assert abs(fl.bcr - exact.bcr) < 0.05
    assert fl.md_mean_s == pytest.approx(exact.md_mean_s, rel=0.30)
    assert fl.events < 0.7 * exact.events


def _with_prologue(prog: JobProgram, pro_s: float, epi_s: float, reps: int) -> JobProgram:
    """``prog`` (one body segment) as an NPB job is built: each repetition a prologue that
    computes and trades with both ring neighbours, the body, an epilogue; ``reps`` of them."""
    n = prog.size
    ranks = []
    for r, rp in enumerate(prog.ranks):
        peers = tuple(sorted({(r - 1) % n, (r + 1) % n}))
        pro: Step = (pro_s, tuple((q, 1024) for q in peers), peers, 1024 * len(peers), 0)
        epi: Step = (epi_s, (), (), 0, 0)
        segs = (((pro,), 1), *rp.segments, ((epi,), 1))
        ranks.append(RankProgram(segs, (False, *rp.body, False)))
    return JobProgram(prog.app, tuple(ranks), prog.label).repeated(reps)


def test_fluid_whole_reps_jumps_prologues_and_stays_close_to_exact() -> None:
    """Jobs whose repetitions carry a prologue of 40 % of their compute: a jump that may take
    whole repetitions runs fewer events than one that takes body iterations only (which
    leaves every later prologue to run in detail) and stays as near the exact run."""
    speeds = [1.0, 1.0, 0.643, 0.643]

    def jobs() -> list[SimJobSpec]:
        rng = random.Random(3)
        out = []
        for i in range(5):
            body = synthetic(rng.choice([2, 4]), 0.004, "nn", 8192, 1, 60)
            out.append(SimJobSpec(i, i * 3.0, _with_prologue(body, 0.16, 0.02, 12), f"j{i}"))
        return out

    exact = CdcSim("cc-b", 3, speeds, PAPER).run(jobs())
    body = CdcSim("cc-b", 3, speeds, PAPER, fluid=Fluid(0.3, 0.6, 0.5, 1.0)).run(jobs())
    whole = CdcSim("cc-b", 3, speeds, PAPER, fluid=Fluid(0.3, 0.6, 0.5, 1.0, whole_reps=True)).run(
        jobs()
    )
    resp = lambda r: sum(j.response for j in r.jobs) / len(r.jobs)  # noqa: E731
    assert resp(whole) == pytest.approx(resp(exact), rel=0.10)
    assert whole.bcr is not None and exact.bcr is not None
    assert abs(whole.bcr - exact.bcr) < 0.05
    assert whole.md_mean_s == pytest.approx(exact.md_mean_s, rel=0.30)
    assert sum(j.cpu_s for j in whole.jobs) == pytest.approx(
        sum(j.cpu_s for j in exact.jobs), rel=0.10
    )
    assert whole.events < 0.9 * body.events < 0.9 * exact.events


def test_every_job_ends_and_times_add_up() -> None:
    res = CdcSim("cc-b", 5, [1.0] * 4, PAPER).run(_stream())
    for j in res.jobs:
        assert not math.isnan(j.end)
        assert j.response == pytest.approx(j.wait + j.execution)
        assert j.execution > 0


def test_fluid_past_queued_jumps_over_arrivals_that_start_nothing() -> None:
    """Jobs arriving faster than they end queue (strict FIFO): with ``past_queued`` a jump
    reaches past the arrivals that only join the queue, so the run takes fewer events than
    one that stops before each arrival, and stays as near the exact run."""
    speeds = [1.0, 0.643]

    def jobs() -> list[SimJobSpec]:
        rng = random.Random(5)
        return [
            SimJobSpec(i, i * 1.5, synthetic(2, 0.004, rng.choice(["nn", "a2a"]), 8192, 2, 1500))
            for i in range(6)
        ]

    def run(fluid: Fluid | None) -> CdcResult:
        return CdcSim("sb", 2, speeds, PAPER, fluid=fluid).run(jobs())

    exact = run(None)
    stop = run(Fluid(0.3, 0.6, 0.5, 1.0))
    past = run(Fluid(0.3, 0.6, 0.5, 1.0, past_queued=True))
    assert max(j.wait for j in exact.jobs) > 5.0  # the queue is there
    resp = lambda r: sum(j.response for j in r.jobs) / len(r.jobs)  # noqa: E731
    assert resp(past) == pytest.approx(resp(exact), rel=0.10)
    assert past.bcr is not None and exact.bcr is not None
    assert abs(past.bcr - exact.bcr) < 0.05
    assert past.events < 0.9 * stop.events


@pytest.mark.parametrize("scheme", ["hybrid", "cc-b"])
def test_process_records_add_up_and_change_no_figure(scheme: str) -> None:
    """The per-process records (ProcRecord) sum to the jobs' CPU, the boost's CPU and the
    contests stay within it, and asking for them leaves every figure of the run as it was."""
    from testbed.sim.cdc.run import run_cdc

    fluid = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}
    params = {"scheme": scheme, "mpl": 5, "workload": "WL6:jobs=3,load=heavy", "nodes": 16,
              "speeds": "paper", "platform": "paper", "fluid": fluid}  # fmt: skip
    plain = run_cdc(params, 1)
    rec = run_cdc({**params, "record": True}, 1)
    records = rec.pop("records")
    for k in ("events", "evaluated", "wall_s"):  # the simulator's own costs
        plain.pop(k), rec.pop(k)
    assert rec == plain
    rs = [r for app in records.values() for r in app.values()]
    assert {c for app in records.values() for c in app} <= {"fast", "slow"}
    assert sum(r["procs"] for r in rs) == sum(j[2] for j in plain["per_job"])
    for r in rs:
        assert 0 <= r["held_s"] <= r["cpu_s"] + 1e-9 and 0 <= r["won"] <= r["contested"]
        assert 0 <= r["msg_wait_s"] <= r["life_s"] + 1e-9
    if scheme == "cc-b":  # CC decides between pending processes: some contests, W_r read
        assert sum(r["contested"] for r in rs) > 0 and sum(r["msgs_sum"] for r in rs) > 0
    else:  # HYBRID reads no ERL
        assert sum(r["w_r_sum"] for r in rs) == 0
