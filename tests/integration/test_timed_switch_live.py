"""Time-triggered switches on a real 2-node local cluster (root only).

* Direct: the test drives both agents over the control network like the
  controller does, first on arrival (immediate mode) then time-triggered, in
  the same test with the same jobs. Every time-triggered plan is applied at
  its instant (each thaw after ``at``; a plan read after it counted late), the
  thaw skew between the two nodes is no worse than the immediate mode's
  measured just before, and late plans are few beside the stalls the sending
  test process itself saw (its own wake-up lateness, measured alongside).
* Controller: ``python -m controller --lead-ms 20`` runs strict gang with
  time-triggered switches; its status says so, counts no more than a few late
  plans beyond the stalls a reference thread of the test saw meanwhile, and
  sampling the freezer states (v1 or cgroup2) never shows two jobs
  THAWED on one node in two consecutive samples >= 2 ms apart, although a
  SCHED_FIFO agent thaws the incoming job before it freezes the outgoing one
  (one without SCHED_FIFO asks for the freeze first, agent/daemon.py).

The fixtures tear the cluster down and check that nothing is left.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import SPIN, Live, WakeStalls, count_violations, running

QUANTUM = 0.05
LEAD = 0.02
SWITCHES = 40


def _clients(st: Any, key: bytes) -> list[tuple[str, Any]]:
    from agent.client import AgentClient

    out = []
    for node in st.nodes:
        deadline = time.monotonic() + 10
        while True:
            try:
                c = AgentClient((node["ctl_ip"], 7070), key, timeout=5)
                c.connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        out.append((str(node["name"]), c))
    return out


def _round(clients: list[tuple[str, Any]], q: int, at: float | None) -> list[dict[str, Any]]:
    """One switch on every node: send all, then collect all (Wiseman & Feitelson 2003 Fig. 5)."""
    from agent import wire

    job = "a" if q % 2 else "b"
    seqs = [
        (c, c.send(wire.QUANTUM, c.quantum_message(name, q, {job: 100}, at=at)))
        for name, c in clients
    ]
    acks = [c.wait_reply(seq, 5).data for c, seq in seqs]
    for ack in acks:
        assert not ack["errors"], ack
    return acks


def _thaw_skew_us(acks: list[dict[str, Any]]) -> float:
    t = [int(a["thawed_realtime_ns"]) for a in acks]
    return (max(t) - min(t)) / 1e3


@pytest.fixture
def cluster(root_cluster_env: Path) -> Iterator[tuple[Any, bytes]]:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores: one per node")
    from agent.__main__ import read_key
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster.profiles import parse_profile

    env = cluster_mod.Env(state_dir=str(root_cluster_env))
    try:
        st = cluster_mod.up(
            cluster_mod.ClusterConfig(nodes=2, profile=parse_profile("gige"), cpus_per_node=1),
            env,
        )
        assert st.key_file is not None
        yield st, read_key(st.key_file)
    finally:
        cluster_mod.down(env)


@pytest.mark.root
def test_both_agents_apply_each_plan_at_its_instant(cluster: tuple[Any, bytes]) -> None:
    st, key = cluster
    clients = _clients(st, key)
    try:
        for name, c in clients:
            for job in ("a", "b"):
                c.launch(name, job, SPIN, start_frozen=True)
        q = 1
        immediate: list[float] = []
        next_t = time.monotonic()
        for _ in range(SWITCHES):
            immediate.append(_thaw_skew_us(_round(clients, q, None)))
            q += 1
            next_t += QUANTUM
            time.sleep(max(0.0, next_t - time.monotonic()))
        timed: list[float] = []
        lateness: list[float] = []
        late = 0
        # The reference, measured alongside: how late this (SCHED_OTHER) process wakes
        # for each send. A round whose sender woke over half the lead late shows the
        # host stalling processes; such a round may make both nodes' plans late.
        stalled = 0
        boundary = time.time() + LEAD
        for _ in range(SWITCHES):
            time.sleep(max(0.0, boundary - LEAD - time.time()))
            stalled += time.time() - (boundary - LEAD) > LEAD / 2
            acks = _round(clients, q, boundary)
            q += 1
            for ack in acks:
                assert ack["mode"] == "time-triggered" and ack["at"] == boundary
                # A plan read after its instant is counted late (and applied at once)
                assert ack["late"] or ack["received_s"] < 0, ack
                late += bool(ack["late"])
                assert ack["thawed_realtime_ns"] >= boundary * 1e9, ack  # never early
                assert ack["freeze_confirm_s"] >= 0
                lateness.append(ack["lateness_s"] * 1e6)
            timed.append(_thaw_skew_us(acks))
            boundary += QUANTUM
        print(
            f"thaw skew p50 us: immediate {statistics.median(immediate):.1f},"
            f" time-triggered {statistics.median(timed):.1f};"
            f" lateness p50 {statistics.median(lateness):.1f} us;"
            f" {late} of {len(lateness)} plans late, sender stalled in {stalled} rounds"
        )
        plans = [c.status(name)["plans"] for name, c in clients]
        realtime = [p["realtime"] for p in plans]
        # agent/realtime.py: fifo, short-slice (--slice-us) or none; all agree with realtime
        wakeups = [p["wakeup"] for p in plans]
        assert [w == "fifo" for w in wakeups] == realtime, plans
        # Compared with the reference measured above, not with a fixed figure. An agent
        # refused SCHED_FIFO (cgroup2 with RT group scheduling) thaws when the kernel
        # wakes it: its skew is bounded by its own wake-up lateness, not by immediate
        # mode's (which measures only the gap between two sends).
        bound = statistics.median(immediate)
        known = ""
        if not all(realtime):
            bound = max(bound, statistics.median(lateness))
            if statistics.median(timed) > bound:
                # Known on cgroup2 with RT group scheduling (docs/cluster.md): a SCHED_OTHER
                # agent sharing its core with a spinning job may thaw a scheduler slice late
                # on one node, not the other. Reported, not hidden; the rest still checked.
                known = (
                    f"agents without SCHED_FIFO (wake-up {wakeups}): time-triggered thaw"
                    f" skew p50 {statistics.median(timed):.0f} us above the bound {bound:.0f} us"
                )
        else:
            assert statistics.median(timed) <= bound, (realtime, bound)
        for name, c in clients:
            plans = c.status(name)["plans"]
            assert plans["accepted"] == SWITCHES, plans
            for job in ("a", "b"):
                c.kill(name, job)
        # Compared with the stalls the sender saw, not with a fixed share alone.
        allowed = max(2, 0.1 * len(lateness)) + len(clients) * stalled
        assert late <= allowed, f"{late} of {len(lateness)} plans late ({stalled} stalls)"
        if known:
            pytest.xfail(known)
    finally:
        for _, c in clients:
            c.close()


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    with running(root_cluster_env, tmp_path, cores=2) as lv:
        yield lv


@pytest.mark.root
def test_controller_runs_time_triggered_gang(live: Live) -> None:
    live.start("gang", "--lead-ms", str(LEAD * 1000), quantum=QUANTUM)
    with WakeStalls(QUANTUM, LEAD / 2) as ref:
        a = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "a"})["job_id"]
        b = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "b"})["job_id"]
        time.sleep(0.5)
        violations, samples = count_violations(live, 3.0, min_samples=301)
        status = live.req("status")
    print(f"late plans {status['late_plans']} of {2 * status['timed_quanta']};"
          f" reference stalled {ref.stalls} of {ref.wakeups} wake-ups")  # fmt: skip
    assert samples > 300, samples
    assert violations == 0, f"{violations} of {samples} samples had two jobs THAWED on a node"
    assert status["switch_mode"] == "time-triggered", status
    assert status["lead_ms"] == pytest.approx(LEAD * 1000)
    # every quantum the controller ran with two gangs was time-triggered (how many it ran
    # depends on how busy the host is: at least 20 in 3.5 s of 50 ms quanta)
    assert status["quanta"] >= 20 and status["timed_quanta"] >= 0.9 * (status["quanta"] - 5), status
    # Late plans may happen on a loaded host: few beyond the stalls the reference saw
    # (a stall may make both nodes' plans of that quantum late).
    allowed = max(2, 0.1 * 2 * status["timed_quanta"]) + 2 * ref.stalls
    assert status["late_plans"] <= allowed, (status, ref.stalls)
    assert status["thaw_skew_p50_s"] is not None and status["lateness_p50_s"] is not None
    recs = {j["job_id"]: j for j in live.req("jobs")}
    for j in (a, b):
        assert recs[j]["cpu_s"] > 0.3, recs[j]  # both gangs ran: the plans took effect
        live.req("kill", job_id=j)
