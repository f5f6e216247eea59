"""Exporter names and values (fake cgroupfs), and promtool's lint where installed."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.support.agent_metrics import PARENT, make


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
