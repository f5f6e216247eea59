"""``cosched remote`` against the emulated nodes over SSH, for real (root).

``cluster up --ssh --no-agents`` gives bare nodes; each gets the files the Ansible
roles would have written (``<prefix>/etc/agent-<node>.env`` with the agent's flags,
``controller.env`` on the head) under a private prefix, and the inventory the same
variables (``service_manager: none``: this host has no systemd). Then over SSH:
``remote start`` (start-stop-daemon, as the roles' none mode), ``status`` (daemons,
cgroup version, load, /metrics), ``logs`` (files and metrics copied here), ``stop``
and ``clean``. A host in the inventory that cannot be reached gets its own line and
exit status 1 while the others complete. Run under ``flock /tmp/cosched-cluster.lock``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed.cluster import agents as agent_mod
from testbed.cluster import sshd as sshd_mod

COSCHED = [sys.executable, "-m", "testbed.cli"]
VENV = os.path.dirname(os.path.dirname(sys.executable))


def _run(args: list[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    print(f"$ {' '.join(args[3:])}  (rc {r.returncode})\n{r.stdout}{r.stderr}")
    return r


@pytest.fixture
def bare_nodes(root_cluster_env: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A 2-node cluster with sshds and no agents, the role's files per host, and the
    inventory; afterwards every daemon started from a pidfile here is stopped."""
    problem = sshd_mod.sshd_available()
    if problem:
        pytest.skip(problem)
    state = root_cluster_env
    deploy = tmp_path / "deploy"
    try:
        r = _run([*COSCHED, "cluster", "up", "--nodes", "2", "--ssh", "--no-agents"])
        assert r.returncode == 0, r.stderr
        inv = yaml.safe_load((state / "inventory.yml").read_text())
        key = str(state / "cluster.key")
        top = inv["all"]
        top["vars"].update(service_manager="none", cosched_venv=VENV,
                           cosched_venv_python=sys.executable)  # fmt: skip
        agents = top["children"]["agents"]["hosts"]
        ctl = top["children"]["controller"]["hosts"]
        for name, hv in [*agents.items(), *ctl.items()]:
            prefix = deploy / name
            (prefix / "etc").mkdir(parents=True)
            hv["cosched_prefix"] = str(prefix)
            if name in agents:
                cmd = agent_mod.agent_command(name, hv["cosched_control_address"], key,
                                              f"cosched/{name}")  # fmt: skip
                line = "COSCHED_AGENT_ARGS=" + " ".join(cmd[cmd.index("agent") + 1 :])
                (prefix / "etc" / f"agent-{name}.env").write_text(line + "\n")
            else:
                nodes = ",".join(f"{n}={v['cosched_control_address']}:7070"
                                 for n, v in agents.items())  # fmt: skip
                args = ["--policy", "gang", "--quantum", "0.1", "--agents", nodes,
                        "--key-file", key, "--run-dir", str(prefix / "run" / "controller"),
                        "--metrics", f"{hv['cosched_control_address']}:9097"]  # fmt: skip
                (prefix / "etc" / "controller.env").write_text(
                    "COSCHED_CONTROLLER_ARGS=" + " ".join(args) + "\n"
                )
        # a host nobody listens for: its line must say so, the others complete
        agents["ghost"] = {"ansible_host": "10.212.0.254", "ansible_port": 1,
                           "cosched_control_address": "10.212.0.99"}  # fmt: skip
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inv))
        yield path, deploy
    finally:
        # daemons started over SSH are the host's processes: stop them by their pidfiles
        for pid in deploy.glob("*/run/*.pid"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["start-stop-daemon", "--stop", "--quiet", "--pidfile",
                                str(pid), "--retry", "TERM/5/KILL/2"], timeout=20,
                               check=False)  # fmt: skip


def test_remote_over_ssh_on_the_emulated_nodes(
    bare_nodes: tuple[Path, Path], tmp_path: Path
) -> None:
    inv, deploy = bare_nodes
    base = ["-i", str(inv), "--timeout", "2"]
    ok_hosts = ["--limit", "n0,n1,head"]

    r = _run([*COSCHED, "remote", "start", *base])
    assert r.returncode == 1  # ghost
    assert "ghost (10.212.0.254): UNREACHABLE: connection refused" in r.stdout
    assert "n0 (10.212.0.1): agent-n0: started, pid" in r.stdout
    assert "n1 (10.212.0.2): agent-n1: started, pid" in r.stdout
    assert "head (10.212.0.254): controller: started, pid" in r.stdout
    assert "start: 3/4 host(s) ok" in r.stdout and "not ok: ghost" in r.stdout

    # the agents really run in their nodes: their metrics answer on the control network
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(agent_mod.probe_metrics(ip) == "ok" for ip in ("10.212.0.1", "10.212.0.2")):
            break
        time.sleep(0.2)
    t0 = time.monotonic()
    r = _run([*COSCHED, "remote", "status", *base, *ok_hosts])
    t_status = time.monotonic() - t0
    assert r.returncode == 0, r.stdout
    assert "agent-n0: running, pid" in r.stdout and "metrics ok" in r.stdout
    assert "controller: running, pid" in r.stdout
    assert "cgroup v1 (hybrid)" in r.stdout or "cgroup v2" in r.stdout
    assert "hostname n1" in r.stdout
    print(f"remote status over 3 hosts: {t_status:.2f} s (CLI start included)")

    # a second start finds them running, as the playbook's none mode would
    r = _run([*COSCHED, "remote", "start", *base, "--limit", "n0"])
    assert r.returncode == 0 and "already running" in r.stdout

    logs = tmp_path / "logs"
    r = _run([*COSCHED, "remote", "logs", *base, *ok_hosts, "--out", str(logs)])
    assert r.returncode == 0, r.stdout
    for host, daemon in (("n0", "agent-n0"), ("n1", "agent-n1"), ("head", "controller")):
        assert (logs / host / f"{daemon}.log").stat().st_size > 0
        assert (logs / host / f"{daemon}.log").stat().st_mode & 0o077 == 0
    assert "cosched_agent" in (logs / "n0" / "agent-n0.prom").read_text()
    assert "cosched_controller" in (logs / "head" / "controller.prom").read_text()

    r = _run([*COSCHED, "remote", "stop", *base, *ok_hosts])
    assert r.returncode == 0 and r.stdout.count(": stopped") == 3, r.stdout
    r = _run([*COSCHED, "remote", "status", *base, *ok_hosts])
    assert r.returncode == 1 and "agent-n0: not running" in r.stdout

    r = _run([*COSCHED, "remote", "clean", *base, *ok_hosts])
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("skipped on a node of the local cluster") == 3
    assert not list(deploy.glob("*/run/*.pid"))
