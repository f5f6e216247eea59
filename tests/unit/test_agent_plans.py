"""Time-triggered plans (agent/plan.py): the pending-plan rules and the agent applying them.

The agent runs on the fake cgroupfs; the instants are real CLOCK_REALTIME
times a few tens of milliseconds ahead, so the final wait is the real one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from agent.daemon import Agent
from agent.plan import Offer, Plan, PlanSlot, TooFar, sleep_until, spin_until, wait_until
from tests.unit.test_agent_daemon import KEY, PARENT, Clock, add_fake_job, make_agent, state

# ---- the rules, pure ----------------------------------------------------------------


def plan(q: int, at: float, jobs: dict[str, int] | None = None) -> Plan:
    return Plan(q=q, at=at, runnable=jobs or {})


def test_slot_keeps_a_future_plan_until_it_is_due() -> None:
    slot = PlanSlot(max_ahead=2.0, early=0.001)
    offer, replaced = slot.offer(plan(1, 100.5), now=100.0)
    assert offer is Offer.PENDING and replaced is None
    assert slot.wake_in(100.0) == pytest.approx(0.499)
    assert slot.due(100.4) is None and slot.pending is not None
    p = slot.due(100.4995)  # within ``early`` of the instant: handed over for the final wait
    assert p is not None and p.q == 1 and not p.late
    assert slot.pending is None and slot.wake_in(100.5) == math.inf


def test_slot_late_plan_is_applied_at_once_and_counted() -> None:
    slot = PlanSlot(max_ahead=2.0)
    p = plan(3, 99.9)
    offer, _ = slot.offer(p, now=100.0)
    assert offer is Offer.LATE and p.late and slot.pending is None
    assert slot.counters.late == 1 and slot.counters.accepted == 1


def test_slot_newer_plan_replaces_the_pending_one() -> None:
    slot = PlanSlot(max_ahead=2.0)
    slot.offer(plan(1, 101.0), now=100.0)
    offer, replaced = slot.offer(plan(2, 100.5), now=100.1)
    assert offer is Offer.PENDING and replaced is not None and replaced.q == 1
    assert slot.pending is not None and slot.pending.q == 2
    assert slot.counters.replaced == 1
    # An immediate command replaces it too.
    old = slot.replace()
    assert old is not None and old.q == 2 and slot.pending is None
    assert slot.counters.replaced == 2


def test_slot_refuses_a_plan_too_far_ahead_and_keeps_the_pending_one() -> None:
    slot = PlanSlot(max_ahead=2.0)
    slot.offer(plan(1, 100.5), now=100.0)
    with pytest.raises(TooFar, match=r"2\.500 s ahead, beyond the 2 s"):
        slot.offer(plan(2, 102.5), now=100.0)
    with pytest.raises(TooFar):
        slot.offer(plan(3, math.nan), now=100.0)
    assert slot.pending is not None and slot.pending.q == 1
    assert slot.counters.refused == 2 and slot.counters.accepted == 1


def test_slot_drop() -> None:
    slot = PlanSlot(max_ahead=2.0)
    assert slot.drop() is None
    slot.offer(plan(1, 100.5), now=100.0)
    p = slot.drop()
    assert p is not None and p.q == 1 and slot.pending is None and slot.counters.dropped == 1


@pytest.mark.parametrize(
    "wait",
    [sleep_until, spin_until, lambda at: wait_until(at, "spin")],
    ids=["sleep", "spin", "both"],
)
def test_final_wait_never_returns_early(wait: object) -> None:
    for _ in range(20):
        at = time.time() + 0.002
        wait(at)  # type: ignore[operator]
        assert time.time() >= at


# ---- the agent applying plans (fake cgroups) -------------------------------------------


def two_jobs(agent: Agent) -> None:
    """``a`` frozen, ``b`` running: a plan listing ``a`` switches both."""
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a", frozen=True)
    add_fake_job(agent, "b")


def test_failsafe_drops_a_pending_plan_and_thaws_everything(tmp_path: Path) -> None:
    clk = Clock()
    agent, _ = make_agent(tmp_path, clk)
    two_jobs(agent)
    assert agent.submit_plan(plan(1, time.time() + 0.3, {"a": 100})) is None
    assert agent.plans.pending is not None
    clk.t += 2.5  # the controller went silent past the 2 s fail-safe
    agent.step(0)
    assert agent.failsafe.active and agent.plans.pending is None
    assert agent.plans.counters.dropped == 1
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    time.sleep(0.35)  # past the plan's instant: nothing is frozen again
    agent.step(0)
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    assert agent.metrics.registry.get_sample_value("cosched_agent_quanta_applied_total") == 0


def test_applied_plan_then_silence_is_undone_by_the_failsafe(tmp_path: Path) -> None:
    clk = Clock()
    agent, _ = make_agent(tmp_path, clk)
    two_jobs(agent)
    agent.submit_plan(plan(1, time.time() + 0.02, {"a": 100}))
    deadline = time.monotonic() + 2
    while agent.plans.pending is not None and time.monotonic() < deadline:
        agent.step(agent.plans.wake_in(time.time()))
    assert state(tmp_path, "a") == "THAWED" and state(tmp_path, "b") == "FROZEN"
    clk.t += 2.5
    agent.step(0)
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Agent, tuple[str, int], Path]]:
    agent, _ = make_agent(tmp_path)
    two_jobs(agent)
    agent.start()
    assert agent.listener is not None
    addr = agent.listener.getsockname()
    t = threading.Thread(target=agent.loop, daemon=True)
    t.start()
    try:
        yield agent, addr, tmp_path
    finally:
        agent.stop()
        t.join(5)
        agent.shutdown()


def test_plan_is_applied_at_its_instant_thaw_first(
    running: tuple[Agent, tuple[str, int], Path],
) -> None:
    agent, addr, tmp = running
    with AgentClient(addr, KEY) as c:
        at = time.time() + 0.05
        seq = c.send(wire.QUANTUM, c.quantum_message("u0", 1, {"a": 300}, at=at))
        time.sleep(0.02)
        # Not yet: the plan waits for its instant.
        assert state(tmp, "a") == "FROZEN" and state(tmp, "b") == "THAWED"
        assert c.status()["plans"]["pending_q"] == 1
        ack = c.wait_reply(seq, 2).data
    assert ack["mode"] == "time-triggered" and ack["q"] == 1 and not ack["late"]
    assert ack["at"] == at and not ack["errors"]
    assert ack["thawed_realtime_ns"] >= at * 1e9  # never early
    assert ack["lateness_s"] == pytest.approx(ack["thawed_realtime_ns"] / 1e9 - at)
    assert ack["freeze_confirm_s"] >= 0 and set(ack["freeze_latency_s"]) == {"b"}
    assert set(ack["thaw_latency_s"]) == {"a"} and set(ack["cpu_ns"]) == {"a", "b"}
    assert state(tmp, "a") == "THAWED" and state(tmp, "b") == "FROZEN"
    assert agent.jobs["a"].weight == 300
    assert agent.metrics.registry.get_sample_value("cosched_agent_tt_plans_total") == 1


def test_late_plan_is_applied_on_arrival_and_counted(
    running: tuple[Agent, tuple[str, int], Path],
) -> None:
    agent, addr, tmp = running
    with AgentClient(addr, KEY) as c:
        at = time.time() - 0.01
        ack = c.quantum("u0", 1, {"a": 100}, at=at)
        st = c.status()["plans"]
    assert ack["late"] and ack["lateness_s"] >= 0.01
    assert state(tmp, "a") == "THAWED" and state(tmp, "b") == "FROZEN"
    assert st["late"] == 1 and st["pending_q"] is None
    assert agent.metrics.registry.get_sample_value("cosched_agent_tt_late_plans_total") == 1


def test_newer_plan_replaces_the_pending_one(
    running: tuple[Agent, tuple[str, int], Path],
) -> None:
    _, addr, tmp = running
    with AgentClient(addr, KEY) as c:
        now = time.time()
        first = c.send(wire.QUANTUM, c.quantum_message("u0", 1, {"a": 100}, at=now + 0.5))
        second = c.send(wire.QUANTUM, c.quantum_message("u0", 2, {"b": 100}, at=now + 0.05))
        with pytest.raises(AgentError) as e:
            c.wait_reply(first, 2)
        assert e.value.code == "replaced" and "replaced by quantum 2" in e.value.reason
        ack = c.wait_reply(second, 2).data
        assert ack["q"] == 2
        # Only the second ran: a stays frozen, b runnable; nothing happens at the first's instant.
        time.sleep(0.5 - (time.time() - now) + 0.05)
        assert state(tmp, "a") == "FROZEN" and state(tmp, "b") == "THAWED"
        # An immediate quantum replaces a pending plan as well.
        third = c.send(wire.QUANTUM, c.quantum_message("u0", 3, {"a": 100}, at=time.time() + 0.5))
        ack = c.quantum("u0", 4, {"b": 100})
        with pytest.raises(AgentError) as e:
            c.wait_reply(third, 2)
        assert e.value.code == "replaced"
        assert ack["mode"] == "immediate" and ack["thawed_realtime_ns"] > 0
        assert c.status()["plans"]["replaced"] == 2


def test_plan_too_far_ahead_is_refused_with_one_line(
    running: tuple[Agent, tuple[str, int], Path],
) -> None:
    agent, addr, tmp = running
    with AgentClient(addr, KEY) as c:
        with pytest.raises(AgentError) as e:
            c.quantum("u0", 1, {"a": 100}, at=time.time() + 10)
        assert e.value.code == "too_far"
        assert "\n" not in e.value.reason and "fail-safe timeout" in e.value.reason
        for bad in ("soon", -1, True):  # (NaN cannot even be encoded: JSON without NaN)
            with pytest.raises(AgentError) as e:
                c.request(wire.QUANTUM, {"q": 2, "node": "u0", "start": 0, "jobs": {}, "at": bad})
            assert e.value.code == "bad_request"
        assert c.quantum("u0", 3, {})["q"] == 3  # the connection is still fine
    assert state(tmp, "b") == "FROZEN"
    assert agent.metrics.registry.get_sample_value("cosched_agent_tt_refused_plans_total") == 1


def test_prepared_thaw_writes_at_once_and_confirms_later(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path)
    two_jobs(agent)
    cg = f"{PARENT}/job-a"
    with agent.driver.prepare_thaw([cg]) as thaw:
        assert state(tmp_path, "a") == "FROZEN"  # opened, not written
        thaw.write()
        assert state(tmp_path, "a") == "THAWED" and not thaw.failed
        assert set(thaw.confirm()) == {cg}
    with pytest.raises(FileNotFoundError):
        agent.driver.prepare_thaw([f"{PARENT}/job-gone"])


def test_plan_falls_back_to_the_slow_thaw_when_it_cannot_prepare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from common.cgroups import CgroupError

    agent, _ = make_agent(tmp_path)
    two_jobs(agent)

    def refuse(paths: object) -> None:
        raise CgroupError("no freezer here")

    monkeypatch.setattr(agent.driver, "prepare_thaw", refuse)
    ack = agent.submit_plan(plan(1, time.time() - 0.001, {"a": 100}))  # late: applied now
    assert ack is not None and not ack["errors"] and ack["late"]
    assert state(tmp_path, "a") == "THAWED" and state(tmp_path, "b") == "FROZEN"
