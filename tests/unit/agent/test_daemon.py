"""The agent against a fake cgroupfs: enforcement logic and the protocol, no root."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent import realtime
from agent.daemon import Agent, AgentConfig
from agent.plan import Plan
from common.cgroups import Cgroups, Layout
from common.cgroups.fake import fake_v2
from tests.support.agent_fakes import (
    PARENT,
    Clock,
    add_fake_job,
    make_agent,
    shares,
    state,
    two_jobs,
)


def test_apply_quantum(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    for j in "abc":
        add_fake_job(agent, j)
    fs.set_usage(f"{PARENT}/job-a", 5_000)
    ack = agent.apply({"a": 900, "b": 100})
    assert state(tmp_path, "c") == "FROZEN"
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    assert (shares(tmp_path, "a"), shares(tmp_path, "b")) == (9216, 1024)
    assert set(ack["freeze_latency_s"]) == {"c"}
    assert ack["cpu_ns"]["a"] == 5_000
    fs.set_usage(f"{PARENT}/job-a", 12_000)
    ack = agent.apply({"c": 100})
    assert ack["cpu_ns"]["a"] == 7_000  # since the previous quantum
    assert set(ack["freeze_latency_s"]) == {"a", "b"}
    assert set(ack["thaw_latency_s"]) == {"c"}
    assert state(tmp_path, "a") == "FROZEN" and state(tmp_path, "c") == "THAWED"
    # where the switch's time went: every step timed, together within the apply
    steps = ack["steps_s"]
    assert set(steps) == {"freeze_write", "freeze_confirm", "weights", "thaw_write",
                          "thaw_confirm", "account"}  # fmt: skip
    assert steps["freeze_write"] > 0 and steps["thaw_write"] > 0 and steps["weights"] > 0
    switch = sum(v for k, v in steps.items() if k != "account")  # the ack's CPU is read after
    assert switch <= ack["apply_duration_s"]
    ack = agent.apply({"c": 100})  # nothing to switch: no freeze or thaw step
    assert ack["steps_s"]["freeze_write"] == ack["steps_s"]["thaw_confirm"] == 0.0


def test_failed_freeze_is_reported(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b")
    fs.stuck.add(tmp_path / "cg/freezer" / PARENT / "job-b")
    ack = agent.apply({})
    assert "b" in ack["errors"] and "a" not in ack["errors"]
    assert agent.jobs["a"].frozen and not agent.jobs["b"].frozen
    assert state(tmp_path, "b") == "THAWED"


def test_failsafe_thaws_and_resets_weights(tmp_path: Path) -> None:
    clk = Clock()
    agent, _ = make_agent(tmp_path, clk)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b")
    agent.apply({"a": 900})
    assert state(tmp_path, "b") == "FROZEN"
    clk.t += 1.0
    agent.step(0)
    assert state(tmp_path, "b") == "FROZEN"  # not yet
    clk.t += 1.5
    agent.step(0)
    assert agent.failsafe.active
    assert state(tmp_path, "a") == state(tmp_path, "b") == "THAWED"
    assert shares(tmp_path, "a") == shares(tmp_path, "b") == 1024
    snap = agent.snapshot()
    assert snap.failsafe_active and snap.heartbeat_age_s == pytest.approx(2.5)
    assert agent.metrics.registry.get_sample_value("cosched_agent_failsafe_activations_total") == 1


def test_reattach(tmp_path: Path) -> None:
    agent, fs = make_agent(tmp_path)
    drv = agent.driver
    drv.ensure_parent(PARENT)
    drv.create(f"{PARENT}/job-live")
    drv.add_pid(f"{PARENT}/job-live", 999999)
    drv.freeze(f"{PARENT}/job-live")
    drv.set_weight(f"{PARENT}/job-live", 300)
    drv.create(f"{PARENT}/job-gone")
    agent._reattach()
    live = agent.jobs["live"]
    assert live.reattached and live.frozen and live.weight == 300 and not live.ended
    gone = agent.jobs["gone"]
    assert gone.ended and gone.exit_code is None
    assert [e["job_id"] for e in agent.server.backlog] == ["gone"]  # for the next session
    assert not drv.exists(f"{PARENT}/job-gone")
    fs.exit_pid(999999)
    agent.reap()
    assert live.ended and live.exit_code is None


# ---- over a socket -----------------------------------------------------------


def test_ended_jobs_are_forgotten_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.daemon as daemon

    monkeypatch.setattr(daemon, "KEEP_ENDED", 3)
    agent, _ = make_agent(tmp_path)
    for i in range(5):
        job = add_fake_job(agent, f"e{i}")
        agent._end(job, 0, "exited")
    assert sorted(agent.jobs) == ["e2", "e3", "e4"]  # the last KEEP_ENDED, newest kept
    live = add_fake_job(agent, "live")
    monkeypatch.setattr(daemon, "KEEP_ENDED_S", -1.0)  # every ended job is past it
    agent._end(add_fake_job(agent, "e5"), 0, "exited")
    assert sorted(agent.jobs) == ["live"]
    assert not live.ended and "live" in agent.jobs  # a running job is never pruned


@pytest.mark.parametrize(
    ("wakeup", "order"),
    [
        (realtime.FIFO, ["a THAWED", "b FROZEN"]),
        # a fair agent (short slice or none) can be preempted between the two writes
        (realtime.SHORT_SLICE, ["b FROZEN", "a THAWED"]),
        (realtime.NONE, ["b FROZEN", "a THAWED"]),
    ],
)
def test_time_triggered_write_order_follows_the_wakeup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wakeup: str, order: list[str]
) -> None:
    agent, fs = make_agent(tmp_path)
    two_jobs(agent)
    agent.wakeup = wakeup
    writes: list[str] = []
    real_write = fs.write

    def write(path: Path | str, value: str) -> None:
        if Path(path).name == "freezer.state":
            writes.append(f"{Path(path).parent.name[4:]} {value.strip()}")
        real_write(path, value)

    monkeypatch.setattr(fs, "write", write)
    ack = agent.apply_at(Plan(q=1, at=time.time() - 1, runnable={"a": 100}, late=True))
    assert writes == order and not ack["errors"]
    assert agent.realtime == (wakeup == realtime.FIFO)
    assert state(tmp_path, "a") == "THAWED" and state(tmp_path, "b") == "FROZEN"


def test_refused_fifo_weighs_the_agents_own_leaf(tmp_path: Path) -> None:
    """On cgroup2 an agent in ``<parent>/agent`` (where ``start`` puts it), without
    SCHED_FIFO (off here), sets that leaf's cpu.weight above the jobs'."""
    fs = fake_v2(tmp_path / "cg")
    drv = Cgroups(Layout.v2_at(str(tmp_path / "cg"), {"cpu"}), fs=fs)
    drv.ensure_parent("cosched/n0", ())
    fs.add_proc("", "cosched/n0", os.getpid())
    drv.enter_leaf("cosched/n0", "agent", os.getpid())
    drv.ensure_parent("cosched/n0")
    cfg = AgentConfig(node="n0", listen=("127.0.0.1", 0), key=b"k" * 32,
                      cgroup_parent="cosched/n0", run_dir=tmp_path / "run",
                      fifo_priority=0, io_device=False, net_meter=False)  # fmt: skip
    agent = Agent(cfg, driver=drv)
    agent._go_realtime()
    assert agent.wakeup == realtime.LEAF_WEIGHT and not agent.realtime
    assert fs.knob("", "cosched/n0/agent", "cpu.weight") == "10000"
    # not in that leaf (a systemd unit's supervisor): nothing written, nothing had
    drv.set_weight("cosched/n0/agent", 100)
    drv.create("cosched/n0/other")
    drv.add_pid("cosched/n0/other", os.getpid())  # moves it out of the agent leaf
    agent = Agent(cfg, driver=drv)
    agent._go_realtime()
    assert agent.wakeup == realtime.NONE
    assert fs.knob("", "cosched/n0/agent", "cpu.weight") == "100"
