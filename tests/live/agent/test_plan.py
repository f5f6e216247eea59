"""The tests of tests/unit/agent/test_plan.py that start processes or sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import wire
from agent.client import AgentClient, AgentError
from agent.daemon import Agent
from tests.support.agent_fakes import KEY, make_agent, serving, state, two_jobs


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Agent, tuple[str, int], Path]]:
    agent, _ = make_agent(tmp_path)
    two_jobs(agent)
    with serving(agent) as addr:
        yield agent, addr, tmp_path


def test_plan_is_applied_at_its_instant_thaw_first(
    running: tuple[Agent, tuple[str, int], Path],
) -> None:
    agent, addr, tmp = running
    with AgentClient(addr, KEY) as c:
        at = time.time() + 0.3
        seq = c.send(wire.QUANTUM, c.quantum_message("u0", 1, {"a": 300}, at=at))
        seen = (state(tmp, "a"), state(tmp, "b"), c.status()["plans"]["pending_q"])
        # Not yet: the plan waits for its instant. What was seen before the instant must
        # show it pending (a host that stalled this test past it shows nothing: the ack's
        # own thaw time below still proves it was never early).
        if time.time() < at:
            assert seen == ("FROZEN", "THAWED", 1)
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
