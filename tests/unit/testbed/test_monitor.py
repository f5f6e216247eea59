"""testbed/monitor.py: targets and prometheus.yml from a cluster state, Grafana variables,
pid files, the controller's command line over SO_PEERCRED, and (with the prometheus
binary) up/status/down leaving nothing behind."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.names import CONTROLLER_METRICS_PORT, METRICS_PORT
from common.ports import free_port
from testbed import monitor as mon
from testbed.cluster.agents import agent_command
from testbed.cluster.state import AgentRecord, ClusterState


def cluster(nodes: int = 2, metrics: bool = True) -> ClusterState:
    st = ClusterState(status="up")
    st.addresses = {"host_ctl_ip": "10.212.0.254"}
    for i in range(nodes):
        name, ip = f"n{i}", f"10.212.0.{i + 1}"
        st.nodes.append({"name": name, "ctl_ip": ip})
        cmd = agent_command(name, ip, "/k", f"cosched/{name}")
        if not metrics:
            j = cmd.index("--metrics")
            del cmd[j : j + 2]
        st.agents.append(AgentRecord(name, 1000 + i, 0.0, cmd, "/dev/null"))
    return st


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


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
@pytest.mark.parametrize("with_targets", [True, False])
def test_rendered_config_passes_promtool(tmp_path: Path, with_targets: bool) -> None:
    agents = mon.agent_targets(cluster(2))[0] if with_targets else []
    ctl = mon.Target("cosched-controller", "[::1]:9097", "host") if with_targets else None
    (tmp_path / "rules").mkdir()
    names = []
    for src in sorted(mon.RULES_DIR.glob("*.yml")):
        shutil.copyfile(src, tmp_path / "rules" / src.name)
        names.append(f"rules/{src.name}")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(mon.render_config(agents, ctl, rule_files=names))
    out = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


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


@pytest.fixture
def controller_socket(tmp_path: Path) -> Iterator[Path]:
    """A unix socket served by this very process, where controller.sock would be."""
    path = tmp_path / "controller.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield tmp_path
    srv.close()


def test_controller_argv_is_the_socket_owners(controller_socket: Path) -> None:
    import psutil

    assert mon.controller_argv(str(controller_socket)) == psutil.Process().cmdline()
    assert mon.controller_argv(str(controller_socket / "nowhere")) is None


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")
def test_up_status_down_leaves_nothing(tmp_path: Path) -> None:
    """The I/O half on a cluster without exporters: no root needed."""
    port = free_port()
    st = cluster(2, metrics=False)
    rep = mon.up(st, port=port, run_dir=str(tmp_path / "run"), directory=str(tmp_path))
    paths = mon.monitor_paths(str(tmp_path))
    try:
        assert rep.prometheus.url == f"http://127.0.0.1:{port}"
        assert mon.alive(rep.prometheus)
        assert stat.S_IMODE(paths.pidfile.stat().st_mode) == 0o600
        assert stat.S_IMODE(paths.root.stat().st_mode) == 0o700
        assert (paths.rules / "alerts.yml").exists() and paths.data.is_dir()
        assert any("controller: none answers" in n for n in rep.notes)
        s = mon.status(str(tmp_path))
        assert s["up"] and s["daemons"][0]["url"] == rep.prometheus.url and s["targets"] == []
        with pytest.raises(mon.MonitorError, match="already up"):
            mon.up(st, port=free_port(), directory=str(tmp_path))
    finally:
        done = mon.down(str(tmp_path))
    assert done[0].startswith("stopped prometheus") and not mon.alive(rep.prometheus)
    assert not paths.root.exists()
    assert mon.down(str(tmp_path)) == []
    assert not mon.status(str(tmp_path))["up"]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")
def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        port = free_port()
        s.bind((mon.LISTEN_HOST, port))
        s.listen(1)
        with pytest.raises(mon.MonitorError, match=f"127.0.0.1:{port} is taken"):
            mon.up(cluster(1), port=port, directory=str(tmp_path))
    assert not mon.monitor_paths(str(tmp_path)).root.exists()


def test_a_daemon_that_exits_at_start_is_one_line_with_its_last_log_line(tmp_path: Path) -> None:
    log, pidfile = tmp_path / "d.log", tmp_path / "d.pid"
    cmd = [
        sys.executable,
        "-c",
        "print('starting'); print('error: bad flag --x'); raise SystemExit(2)",
    ]
    d = mon.spawn("prometheus", cmd, log, pidfile, f"http://127.0.0.1:{free_port()}", tmp_path)
    with pytest.raises(mon.MonitorError) as e:
        mon.wait_ready(d, "/-/ready", log, timeout_s=10)
    msg = str(e.value)
    assert "prometheus exited at start: error: bad flag --x" in msg and str(log) in msg
    assert "\n" not in msg
