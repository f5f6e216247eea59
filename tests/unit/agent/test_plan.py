"""Time-triggered plans (agent/plan.py): the pending-plan rules and the agent applying them.

The agent runs on the fake cgroupfs; the instants are real CLOCK_REALTIME
times a few tens of milliseconds ahead, so the final wait is the real one.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from agent.plan import Offer, Plan, PlanSlot, TooFar, sleep_until, spin_until, wait_until
from tests.support.agent_fakes import PARENT, Clock, make_agent, state, two_jobs

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
