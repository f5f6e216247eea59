"""The tests of tests/unit/testbed/test_monitor.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.ports import free_port
from testbed import monitor as mon
from tests.support.monitor_state import cluster


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
