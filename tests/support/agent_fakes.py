"""An agent on a fake cgroupfs (common/cgroups/fake.py) for the agent's tests: a clock,
the agent, reattached fake jobs, and the freezer state and shares it left."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from agent.daemon import Agent, AgentConfig
from agent.jobs import Job
from common.cgroups import V1Driver
from common.cgroups.fake import FakeCgroupFS, fake_v1

KEY = b"unit-test-key-0123456789abcdef"


PARENT = "cosched/u0"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_agent(tmp_path: Path, clock: Clock | None = None) -> tuple[Agent, FakeCgroupFS]:
    fs = fake_v1(tmp_path / "cg")
    drv = V1Driver(tmp_path / "cg", fs=fs, freeze_timeout=0.2, poll_interval=1e-4)
    cfg = AgentConfig(
        node="u0",
        listen=("127.0.0.1", 0),
        key=KEY,
        cgroup_parent=PARENT,
        run_dir=tmp_path / "run",
        fifo_priority=0,
        failsafe_timeout=2.0,
    )
    agent = Agent(cfg, driver=drv, clock=clock or time.monotonic)
    return agent, fs


def add_fake_job(agent: Agent, jid: str, frozen: bool = False) -> Job:
    cg = f"{PARENT}/job-{jid}"
    agent.driver.create(cg)
    # A (fake) pid keeps the reattached job alive across reap().
    agent.driver.add_pid(cg, 900000 + len(agent.jobs))
    if frozen:
        agent.driver.freeze(cg)
    job = Job(jid, cg, frozen=frozen, reattached=True)
    agent.jobs[jid] = job
    return job


def state(tmp_path: Path, jid: str) -> str:
    return (tmp_path / "cg/freezer" / PARENT / f"job-{jid}/freezer.state").read_text().strip()


def shares(tmp_path: Path, jid: str) -> int:
    return int((tmp_path / "cg/cpu" / PARENT / f"job-{jid}/cpu.shares").read_text())


def two_jobs(agent: Agent) -> None:
    """``a`` frozen, ``b`` running: a plan listing ``a`` switches both."""
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a", frozen=True)
    add_fake_job(agent, "b")


@contextlib.contextmanager
def serving(agent: Agent) -> Iterator[tuple[str, int]]:
    """The agent listening and looping in a thread for the block; its address."""
    agent.start()
    assert agent.listener is not None
    addr = agent.listener.getsockname()
    t = threading.Thread(target=agent.loop, daemon=True)
    t.start()
    try:
        yield addr
    finally:
        agent.stop()
        t.join(5)
        agent.shutdown()
