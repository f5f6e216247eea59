"""``cosched cluster up --emulated-nodes``: a 96-node emulated cluster behind relays,
driven by the real controller process, then taken down without a trace (issue 15)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from common.ports import free_port
from testbed.cluster import cluster as cluster_mod
from testbed.cluster import emulated
from testbed.cluster.errors import ClusterError
from testbed.views import render_matrix
from tests.support.live import Live

REPO = Path(__file__).resolve().parents[2]
N = 96


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_host: None) -> Iterator[Path]:
    d = tmp_path / "state"
    monkeypatch.setenv("COSCHED_STATE_DIR", str(d))
    yield d
    with contextlib.suppress(Exception):
        cluster_mod.down(cluster_mod.Env(state_dir=str(d)))


def _shm_dirs() -> set[str]:
    return set(glob.glob("/dev/shm/cosched-emulated-*")) | set(glob.glob("/tmp/cosched-emulated-*"))


@pytest.mark.timeout(300)
def test_emulated_cluster_up_controller_matrix_metrics_down(
    state_dir: Path, tmp_path: Path
) -> None:
    env = cluster_mod.Env(state_dir=str(state_dir))
    before = _shm_dirs()
    port = 21000 + secrets.randbelow(100) * 110  # below the ephemeral range (32768-)
    st = emulated.up(N, "auto", port, env)
    assert len(st.nodes) == N and st.emulated is not None
    relays = st.emulated["relays"]
    assert len(relays) == 10 and sum(len(r["nodes"]) for r in relays) == N  # round(sqrt(96))
    pids = [a.pid for a in st.agents]
    assert all(psutil.pid_exists(p) for p in pids)
    report = cluster_mod.status(env)
    assert report is not None and report["emulated"]
    text = cluster_mod.format_status(report)
    assert f"{N} agents in one process" in text and "DEAD" not in text

    live = Live(state_dir, tmp_path)
    metrics_port = free_port()
    try:
        live.start("gang", "--metrics", f"127.0.0.1:{metrics_port}", quantum=0.2)
        ids = [
            live.req("submit", spec={"size": size, "argv": ["true"], "name": f"w{k}"})["job_id"]
            for k, size in enumerate((N, N, 48, 48))
        ]
        deadline = time.monotonic() + 60
        while True:
            recs = {r["job_id"]: r for r in live.req("jobs", all=True)}
            if all(recs[j]["state"] in ("running", "frozen") for j in ids):
                break
            assert time.monotonic() < deadline, (recs, live.log_text()[-2000:])
            time.sleep(0.3)
        matrix = live.req("matrix")
        assert len(matrix["nodes"]) == N and len(matrix["slots"]) == 3
        view = render_matrix(matrix)
        assert max(len(line) for line in view.splitlines()) < 200, view
        # quanta go round: every node acks through its relay, no command fails
        time.sleep(2.0)
        status = live.req("status")
        assert status["failed_commands"] == 0, status
        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
        quanta = [
            float(line.split()[-1])
            for line in body.decode().splitlines()
            if line.startswith("cosched_controller_quanta_total")
        ]
        assert quanta and quanta[0] >= 5, quanta
        for j in ids:
            live.req("kill", job_id=j)
    finally:
        live.stop()
    # the key is never logged (issue 13): not by the agents, the relays or the controller
    assert st.key_file is not None
    key = Path(st.key_file).read_text().strip()
    logs = [*state_dir.glob("*.log"), live.log]
    assert len(logs) >= 3 and all(key not in p.read_text(errors="replace") for p in logs)
    problems = cluster_mod.down(env)[1]
    assert problems == []
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
        assert time.monotonic() < deadline, "emulated processes outlived cluster down"
        time.sleep(0.1)
    assert not os.path.exists(state_dir / "cluster.json")
    assert not os.path.exists(state_dir / "emulated-nodes.json")
    assert _shm_dirs() <= before  # the fake cgroup trees went with the host


def test_too_many_emulated_nodes_is_one_line_before_anything_starts(state_dir: Path) -> None:
    env = cluster_mod.Env(state_dir=str(state_dir))
    with pytest.raises(ClusterError) as e:
        emulated.up(10**8, "auto", 17000, env)
    assert "at most" in str(e.value) and "\n" not in str(e.value)
    assert not (state_dir / "cluster.json").exists()


def test_cli_refuses_nodes_and_emulated_nodes_together() -> None:
    r = subprocess.run(
        [sys.executable, "-c", "from testbed.cli import main; main()", "cluster", "up",
         "--nodes", "2", "--emulated-nodes", "8"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "not allowed with" in r.stderr
    assert json.dumps(r.stderr).count("Traceback") == 0
