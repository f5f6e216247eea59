"""Finding 2 (issue 28): the environment the controller is started from makes nobody an
operator. Started by root through ``cosched controller start`` with ``LOGNAME`` and
``USER`` naming the attacker (as ``su``, ``sudo -E`` or a service file can leave them),
the controller took the attacker for an operator, who could then submit ``--as root``.
Operators are uids now: root, the daemon's user and ``--operator`` names."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.support.security import Sec
from tests.support.security_sandbox import REPO, root_env

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]


def _cosched(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cli = os.path.join(os.path.dirname(sys.executable), "cosched")
    argv = [cli] if os.path.exists(cli) else [sys.executable, "-m", "testbed.cli"]
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=120,
                          cwd=str(REPO))  # fmt: skip


@pytest.mark.timeout(300)
def test_the_environment_makes_no_operator(sec: Sec) -> None:
    env = root_env(LOGNAME=sec.attacker.name, USER=sec.attacker.name)
    state = str(sec.live.state_dir / "cluster.json")
    started = _cosched("controller", "start", "--policy", "gang", "--quantum", "0.1",
                       "--run-dir", str(sec.live.tmp), "--cluster-state", state,
                       "--wait", "60", env=env)  # fmt: skip
    assert started.returncode == 0, started.stderr
    pid = int(re.search(r"pid (\d+)", started.stdout).group(1))  # type: ignore[union-attr]
    try:
        probe = ["/bin/sh", "-c", "id -u"]
        reply = sec.request(sec.attacker, "submit", spec={"size": 1, "argv": probe,
                                                          "run_as": "root"})  # fmt: skip
        jobs = sec.live.req("jobs", all=True)
        ran = []
        for j in jobs:
            rec = sec.wait_job(j["job_id"], 60)
            ran.append((rec["run_as"], sec.output(rec).strip()))
        assert not reply["ok"], ("the attacker's root job was accepted", reply, ran)
        assert "only operators" in reply["error"], reply
        assert not any(who == "root" for who, _ in ran), ran
        # nor any other operator request
        reply = sec.request(sec.attacker, "set", quantum=0.2)
        assert not reply["ok"] and "operator only" in reply["error"], reply
        # root (uid 0) still is one
        assert sec.live.req("set", quantum=0.1)["quantum"] == 0.1
    finally:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
        time.sleep(0.1)


def test_an_unknown_operator_name_stops_the_start(sec: Sec) -> None:
    """``--operator`` names become uids at start; a name the host does not know is a
    one-line error, not an operator nobody can be."""
    state = str(sec.live.state_dir / "cluster.json")
    env = root_env()
    r = _cosched("controller", "start", "--policy", "gang", "--run-dir", str(sec.live.tmp),
                 "--cluster-state", state, "--operator", "no-such-user-x9", "--wait", "30",
                 env=env)  # fmt: skip
    started = re.search(r"pid (\d+)", r.stdout)
    if started:  # it should not have: stop it before failing
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(int(started.group(1)))
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
    assert r.returncode != 0 and "no-such-user-x9" in r.stderr, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
