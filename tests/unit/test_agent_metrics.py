"""Exporter names and values (fake cgroupfs), and promtool's lint where installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest

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


def test_names_and_values(tmp_path: Path) -> None:
    agent = make(tmp_path)
    agent.apply({"a": 100})
    reg = agent.metrics.registry
    assert reg.get_sample_value("cosched_agent_quanta_applied_total") == 1
    assert reg.get_sample_value("cosched_agent_freeze_latency_seconds_count") == 1
    assert reg.get_sample_value("cosched_agent_thaw_latency_seconds_count") == 0
    assert reg.get_sample_value(
        "cosched_agent_job_cpu_seconds_total", {"node": "m0", "job_id": "a"}
    ) == pytest.approx(2.0)
    assert reg.get_sample_value("cosched_agent_failsafe_active") == 0
    assert reg.get_sample_value("cosched_agent_failsafe_activations_total") == 0
    assert reg.get_sample_value("cosched_agent_controller_heartbeat_age_seconds") is not None
    assert reg.get_sample_value("cosched_agent_scrape_success") == 1
    text = generate_latest(reg).decode()
    assert 'le="5e-05"' in text and 'le="0.1"' in text
    assert "job=" not in text.replace("job_id=", "")  # 'job' would be renamed by Prometheus


def test_node_utilization_between_scrapes(tmp_path: Path) -> None:
    agent = make(tmp_path)
    reg = agent.metrics.registry
    assert reg.get_sample_value("cosched_agent_node_cpu_utilization_ratio", {"node": "m0"}) is None
    fs = agent.driver.fs
    fs.set_usage(PARENT, 10**12)  # type: ignore[attr-defined]
    value = reg.get_sample_value("cosched_agent_node_cpu_utilization_ratio", {"node": "m0"})
    assert value is not None and 0.0 <= value <= 1.0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_lint(tmp_path: Path) -> None:
    agent = make(tmp_path)
    agent.apply({"b": 100})
    text = generate_latest(agent.metrics.registry)
    res = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
