"""The tests of tests/unit/testbed/test_cli_errors.py that start processes or sockets."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from tests.support.cli import key_file, one_line, refused_port


def test_controller_start_reports_the_daemons_line(tmp_path: Path, capsys: Any) -> None:
    rc = main(["controller", "start", "--policy", "gang", "--param", "colour=red",
               "--run-dir", str(tmp_path / "run"), "--wait", "20"])  # fmt: skip
    assert rc == 2
    line = one_line(capsys)
    assert "the controller exited with status 2: policy 'gang' has no parameter 'colour'" in line
    assert "controller: error:" not in line  # the daemon's own prefix is dropped


def test_controller_daemon_unreachable_agent_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # The reported failure: after 15 s the daemon died with a ConnectionError traceback.
    from controller.__main__ import main as controller_main
    from controller.nodes import AgentPool

    connect_all = AgentPool.connect_all
    monkeypatch.setattr(
        AgentPool,
        "connect_all",
        lambda self, deadline_s=0, require_all=True: connect_all(self, 0.3, require_all),
    )
    port = refused_port()
    rc = controller_main(["--policy", "gang", "--agents", f"n0=127.0.0.1:{port}",
                          "--key-file", key_file(tmp_path), "--run-dir", str(tmp_path / "run"),
                          "--fifo-priority", "0"])  # fmt: skip
    assert rc == 1
    line = one_line(capsys, "controller")
    assert f"agent n0 at 127.0.0.1:{port} unreachable" in line
    assert "is the cluster up?" in line and "cosched cluster status" in line


def test_controller_daemon_busy_metrics_port_is_one_line(tmp_path: Path) -> None:
    from common.errors import CoschedError
    from controller.daemon import Daemon, DaemonConfig
    from controller.nodes import NodeInfo

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        node = NodeInfo("n0", ("127.0.0.1", refused_port()), "127.0.0.1")
        cfg = DaemonConfig(policy="gang", params={}, nodes=[node], key=b"k" * 32,
                           run_dir=str(tmp_path), metrics=("127.0.0.1", port))  # fmt: skip
        daemon = Daemon(cfg)
        daemon.pool.connect_all = lambda deadline_s=0, require_all=True: []  # type: ignore[method-assign]
        try:
            with pytest.raises(CoschedError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
                daemon.start()
        finally:
            daemon.close()
