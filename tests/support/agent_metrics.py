"""An agent on a fake cgroupfs with a job of each state, for the metrics tests."""

from __future__ import annotations

from pathlib import Path

from agent.daemon import Agent, AgentConfig
from agent.jobs import Job
from common.cgroups import V1Driver
from common.cgroups.fake import fake_v1

PARENT = "cosched/m0"


def make(tmp_path: Path) -> Agent:
    fs = fake_v1(tmp_path / "cg")
    drv = V1Driver(tmp_path / "cg", fs=fs, freeze_timeout=0.2, poll_interval=1e-4)
    cfg = AgentConfig("m0", ("127.0.0.1", 0), b"k" * 32, PARENT, tmp_path / "run", fifo_priority=0)
    agent = Agent(cfg, driver=drv)
    drv.ensure_parent(PARENT)
    for jid, ns in (("a", 2_000_000_000), ("b", 500_000_000)):
        cg = f"{PARENT}/job-{jid}"
        drv.create(cg)
        drv.add_pid(cg, 4000 + len(agent.jobs))
        fs.set_usage(cg, ns)
        agent.jobs[jid] = Job(jid, cg, reattached=True)
    fs.set_usage(PARENT, 0)
    return agent
