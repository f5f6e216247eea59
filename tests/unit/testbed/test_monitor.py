"""testbed/monitor.py: targets and prometheus.yml from a cluster state, Grafana variables,
pid files, the controller's command line over SO_PEERCRED, and (with the prometheus
binary) up/status/down leaving nothing behind."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from common.names import CONTROLLER_METRICS_PORT, METRICS_PORT
from testbed import monitor as mon
from tests.support.monitor_state import cluster


def test_ports_are_ours_not_node_exporters() -> None:
    assert METRICS_PORT != 9100 and CONTROLLER_METRICS_PORT != 9100
    assert METRICS_PORT != CONTROLLER_METRICS_PORT
    assert mon.PROMETHEUS_PORT not in (METRICS_PORT, CONTROLLER_METRICS_PORT)


def test_metrics_flag_and_scrape_address() -> None:
    assert mon.metrics_flag(["x", "--metrics", "10.212.0.1:9096"]) == ("10.212.0.1", 9096)
    assert mon.metrics_flag(["x", "--metrics=[::1]:9097"]) == ("::1", 9097)
    assert mon.metrics_flag(["x", "--listen", "1.2.3.4:7070"]) is None
    assert mon.metrics_flag(["x", "--metrics", "nonsense"]) is None
    assert mon.scrape_address(("0.0.0.0", 9097)) == "127.0.0.1:9097"
    assert mon.scrape_address(("::", 9097)) == "[::1]:9097"
    assert mon.scrape_address(("10.212.0.254", 9097)) == "10.212.0.254:9097"


def test_agent_targets_follow_the_recorded_command_lines() -> None:
    targets, notes = mon.agent_targets(cluster(3))
    assert [(t.job, t.address, t.node) for t in targets] == [
        ("cosched-agent", f"10.212.0.{i + 1}:{METRICS_PORT}", f"n{i}") for i in range(3)
    ]
    assert notes == []
    st = cluster(2)
    st.agents[1].cmd[st.agents[1].cmd.index("--metrics") + 1] = "10.212.0.2:19096"
    assert mon.agent_targets(st)[0][1].address == "10.212.0.2:19096"
    targets, notes = mon.agent_targets(cluster(2, metrics=False))
    assert targets == [] and len(notes) == 2 and "without --metrics" in notes[0]
    st = cluster(2)
    st.agents.pop()
    targets, notes = mon.agent_targets(st)
    assert [t.node for t in targets] == ["n0"] and notes == ["n1: no agent recorded, not scraped"]


def test_an_emulated_cluster_is_refused() -> None:
    st = cluster(1)
    st.emulated = {"nodes": 64}
    with pytest.raises(mon.MonitorError, match="no metrics endpoint"):
        mon.agent_targets(st)


def test_controller_target_from_its_command_line() -> None:
    argv = [sys.executable, "-m", "controller", "--policy", "gang", "--metrics", "0.0.0.0:9097"]
    t = mon.controller_target(argv)
    assert t == mon.Target("cosched-controller", "127.0.0.1:9097", "host")
    assert mon.controller_target(argv[:-2]) is None
    assert mon.controller_target(None) is None


def test_render_config_layout() -> None:
    agents, _ = mon.agent_targets(cluster(2))
    ctl = mon.Target("cosched-controller", "10.212.0.254:9097", "host")
    text = mon.render_config(agents, ctl, scrape_interval_s=0.5)
    assert "scrape_interval: 500ms" in text and "evaluation_interval: 500ms" in text
    assert 'job_name: "cosched-controller"' in text and 'job_name: "cosched-agent"' in text
    assert text.count("honor_labels: true") == 1
    assert '- targets: ["10.212.0.1:9096"]' in text and 'node: "n1"' in text
    assert '- "rules/recording.yml"' in text and '- "rules/alerts.yml"' in text
    empty = mon.render_config([], None)
    assert empty.count("static_configs: []") == 2
    assert "scrape_interval: 2s" in empty


def test_grafana_variables_are_substituted() -> None:
    sub = mon.substitute_grafana_vars
    assert (
        sub('rate(x{node=~"$node"}[$__rate_interval])', interval="30s")
        == 'rate(x{node=~".+"}[30s])'
    )
    assert sub('x{node="${node}"}[$__interval]') == 'x{node=".+"}[1m]'
    assert sub("y{instance=~'[[instance]]'}[${__range}]") == "y{instance=~'.+'}[5m]"
    assert sub("${node:regex}") == ".+"
    assert sub("up") == "up"


def test_dashboard_exprs_walk_rows_and_skip_hidden() -> None:
    dash = {
        "panels": [
            {"title": "A", "targets": [{"expr": "up"}, {"expr": "x", "hide": True}]},
            {"type": "row", "title": "R", "panels": [{"title": "B", "targets": [{"expr": "y"}]}]},
            {"title": "text panel"},
        ],
        "rows": [{"panels": [{"title": "C", "targets": [{"expr": "z"}, {"refId": "B"}]}]}],
    }
    assert mon.dashboard_exprs(dash) == [("A", "up"), ("B", "y"), ("C", "z")]


def test_pidfile_is_private_and_round_trips(tmp_path: Path) -> None:
    d = mon.Daemon("prometheus", os.getpid(), 1.0, "http://127.0.0.1:1", ["p"])
    path = tmp_path / "p.pid"
    mon.write_pidfile(path, d)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert mon.read_pidfile(path) == d
    assert not mon.alive(d)  # our pid, not our start time: a stranger
    path.write_text("{")
    assert mon.read_pidfile(path) is None
