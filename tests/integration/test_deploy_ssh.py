"""The real deploy (root): ansible/site.yml over SSH to the nodes of ``cosched cluster up --ssh``.

One local cluster for the module: ``cluster up --nodes 2 --ssh --no-agents``
(bare nodes: namespaces, links, cgroups and an sshd per node, the head being
the host itself), then the playbook with the inventory it wrote and
``service_manager: none`` (this host has no systemd), cosched taken from this
checkout's interpreter (``cosched_install_from: none``), every node's paths
under a private directory (the nodes share the host's file system). Then: the
agents answer the deployed controller, a job runs to completion, a second run
changes nothing, the deployed Prometheus scrapes every daemon, the nodes pass
pytest-testinfra's checks, an unreachable node fails alone and clearly, and a
key readable by others is refused by the agent and set back to 0600 by the
role. Daemons, cluster and files are removed
however the tests end. Run under ``flock /tmp/cosched-cluster.lock``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from common.ports import free_port
from tests.support.ansible import ANSIBLE_DIR, PLAYBOOK, ansible_env, recap
from tests.support.host import EMPTY_FOOTPRINT, cluster_skip_reason, cosched_footprint

COSCHED = [sys.executable, "-m", "testbed.cli"]
NODES = ["n0", "n1"]
PLAY_TIMEOUT_S = 900.0  # a loaded 2-CPU host took 100 s for the first run


@dataclass
class Deployed:
    tmp: Path
    state: Path  # COSCHED_STATE_DIR of the cluster
    root: Path  # every node's cosched_prefix is root/<inventory name>
    inventory: Path  # as `cluster up --ssh` wrote it
    extra: Path  # the test's variables (-e @extra)
    first: subprocess.CompletedProcess[str]
    first_s: float
    cp: Path  # the SSH control sockets (short: a socket path has at most 107 bytes)
    prometheus: str  # host:port of the deployed Prometheus ("" when it is not installed)

    @property
    def skip(self) -> list[str]:
        return [] if self.prometheus else ["--skip-tags", "monitoring"]

    def play(self, *args: str, inventory: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PLAYBOOK), "-i", str(inventory or self.inventory), "site.yml",
             "-e", f"@{self.extra}", *self.skip, *args],
            capture_output=True, text=True, cwd=ANSIBLE_DIR, env=self.env(),
            timeout=PLAY_TIMEOUT_S,
        )  # fmt: skip

    def env(self) -> dict[str, str]:
        # One SSH connection per host for the whole run (a fresh handshake per
        # task made the first run 100 s on a loaded host); _close_masters ends them.
        return ansible_env(self.tmp) | {
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=30s",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.cp),
        }

    def cosched(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, COSCHED_STATE_DIR=str(self.state),
                   COSCHED_RUN_DIR=str(self.root / "head/run/controller"))  # fmt: skip
        return subprocess.run([*COSCHED, *args], capture_output=True, text=True,
                              env=env, timeout=timeout)  # fmt: skip


def _extra_vars(root: Path, prometheus: str) -> dict[str, object]:
    """What makes the playbook fit emulated nodes on one host (docs/deploy.md)."""
    return {
        # the head is this host: Prometheus from its package, everything of it
        # under the head's prefix, on loopback; no Grafana (no package here)
        "cosched_grafana_enabled": False,
        "cosched_prometheus_manage_package": False,
        "cosched_prometheus_config_dir": "{{ cosched_prefix }}/prometheus",
        "cosched_prometheus_storage_dir": "{{ cosched_prefix }}/prometheus/data",
        "cosched_prometheus_listen": prometheus,
        "cosched_prometheus_scrape_interval": "2s",
        "cosched_prometheus_scrape_timeout": "1s",
        "cosched_prometheus_evaluation_interval": "2s",
        # no systemd here: start-stop-daemon, pidfiles (common/tasks/daemon_none.yml)
        "service_manager": "none",
        # cosched from this checkout's interpreter on every node (they share the disk)
        "cosched_install_from": "none",
        "cosched_venv_python": sys.executable,
        # the nodes share the host's kernel and packages: change neither
        "cosched_manage_packages": False,
        "cosched_manage_sysctls": False,
        # one prefix per node: run, log, etc and state must not collide
        "cosched_prefix": f"{root}/{{{{ inventory_hostname }}}}",
        "cosched_key_generate_path": f"{root}/credentials/cluster.key",
        # as `cluster up` starts its own agents: the node's cgroups and hostname
        "cosched_agent_cgroup_parent": "cosched/{{ inventory_hostname }}",
        "cosched_agent_cgroup_leaf": "cosched/{{ inventory_hostname }}/agent",
        "cosched_agent_hostname": "{{ inventory_hostname }}",
    }


def _close_masters(cp: Path) -> None:
    """End the SSH control masters of the runs (no ssh process outlives the test)."""
    for sock in cp.iterdir():
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"],
                       capture_output=True, check=False, timeout=10)  # fmt: skip
    shutil.rmtree(cp, ignore_errors=True)


def _stop_daemons(root: Path) -> None:
    """Stop what the playbook started, by its pidfiles only."""
    for pidfile in sorted(root.glob("*/run/*.pid")):
        subprocess.run(["start-stop-daemon", "--stop", "--quiet", "--pidfile", str(pidfile),
                        "--retry", "TERM/10/KILL/5", "--remove-pidfile"],
                       check=False, timeout=30)  # fmt: skip


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    reason = cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    if not PLAYBOOK.exists():
        pytest.skip("ansible-core is not installed (pip install -e '.[dev]')")
    if shutil.which("start-stop-daemon") is None:
        pytest.skip("start-stop-daemon (dpkg) is not installed: service_manager none needs it")
    from testbed.cluster import sshd as sshd_mod

    problem = sshd_mod.sshd_available()
    if problem:
        pytest.skip(problem)
    if cosched_footprint() != EMPTY_FOOTPRINT:
        pytest.skip(f"host already has cosched objects: {cosched_footprint()}")

    tmp = tmp_path_factory.mktemp("deploy")
    state, root = tmp / "state", tmp / "nodes"
    extra = tmp / "extra.yml"
    prometheus = f"127.0.0.1:{free_port()}" if shutil.which("prometheus") else ""
    extra.write_text(yaml.safe_dump(_extra_vars(root, prometheus or "127.0.0.1:9090")))
    env = dict(os.environ, COSCHED_STATE_DIR=str(state))
    cp = Path(tempfile.mkdtemp(prefix="cp", dir="/tmp"))
    try:
        up = subprocess.run([*COSCHED, "cluster", "up", "--nodes", str(len(NODES)), "--ssh",
                             "--no-agents"], capture_output=True, text=True, env=env,
                            timeout=300)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        d = Deployed(tmp, state, root, state / "inventory.yml", extra, up, 0.0, cp, prometheus)
        t0 = time.monotonic()
        d.first = d.play()
        d.first_s = time.monotonic() - t0
        print(f"first deploy: {d.first_s:.1f} s")
        yield d
    finally:
        _close_masters(cp)
        _stop_daemons(root)
        down = subprocess.run([*COSCHED, "cluster", "down"], capture_output=True, text=True,
                              env=env, timeout=120)  # fmt: skip
        if down.returncode != 0:
            from testbed.cluster import clean as clean_mod
            from testbed.cluster import cluster as cluster_mod

            clean_mod.clean(cluster_mod.Env(state_dir=str(state)))
        assert cosched_footprint() == EMPTY_FOOTPRINT


def _ok(out: subprocess.CompletedProcess[str]) -> str:
    return out.stdout[-6000:] + out.stderr[-2000:]


def test_first_run_deploys_every_host(deployed: Deployed) -> None:
    assert deployed.first.returncode == 0, _ok(deployed.first)
    hosts = recap(deployed.first.stdout)
    assert set(hosts) == {"head", *NODES}
    print("first run recap:", hosts)
    for host, counts in hosts.items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, (host, counts)


def test_the_agents_answer_the_deployed_controller(deployed: Deployed) -> None:
    deadline = time.monotonic() + 30
    while True:
        out = deployed.cosched("controller", "status", "--json")
        status = json.loads(out.stdout) if out.returncode == 0 else {}
        if status.get("agents") == {n: True for n in NODES} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status.get("agents") == {n: True for n in NODES}, _ok(out)
    assert status["nodes_unreachable"] == [] and status["quanta"] > 0


def test_the_deployed_prometheus_scrapes_every_daemon(deployed: Deployed) -> None:
    if not deployed.prometheus:
        pytest.skip("Debian's prometheus is not installed: the monitoring play was skipped")
    url = f"http://{deployed.prometheus}/api/v1/query?query=up"
    deadline = time.monotonic() + 60
    up: dict[str, float] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url, timeout=5) as r:
                result = json.load(r)["data"]["result"]
            up = {f"{x['metric']['job']}/{x['metric']['instance']}": float(x["value"][1])
                  for x in result}  # fmt: skip
            if len(up) == 1 + len(NODES) and all(v == 1 for v in up.values()):
                break
        time.sleep(1)
    assert up == {
        "cosched-controller/10.212.0.254:9097": 1,
        **{f"cosched-agent/10.212.0.{i + 1}:9096": 1 for i in range(len(NODES))},
    }, up


def test_a_job_runs_to_completion(deployed: Deployed) -> None:
    sub = deployed.cosched("submit", "--size", "2", "--quiet", "--",
                           "/bin/sh", "-c", "hostname; sleep 1")  # fmt: skip
    assert sub.returncode == 0, _ok(sub)
    job = int(sub.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = json.loads(deployed.cosched("jobs", "--all", "--json").stdout)
        mine = [j for j in jobs if j.get("job_id") == job]
        if mine and mine[0].get("state") in ("done", "failed", "killed"):
            break
        time.sleep(0.5)
    assert mine and mine[0]["state"] == "done", mine
    assert mine[0]["exit_code"] == 0 and sorted(mine[0]["nodes"]) == NODES, mine


def test_a_second_run_changes_nothing(deployed: Deployed) -> None:
    t0 = time.monotonic()
    second = deployed.play()
    print(f"second run: {time.monotonic() - t0:.1f} s")
    assert second.returncode == 0, _ok(second)
    hosts = recap(second.stdout)
    print("second run recap:", hosts)
    assert set(hosts) == {"head", *NODES}
    assert {h: c["changed"] for h, c in hosts.items()} == {h: 0 for h in hosts}, _ok(second)


def test_the_nodes_pass_testinfra(deployed: Deployed, monkeypatch: pytest.MonkeyPatch) -> None:
    testinfra = pytest.importorskip("testinfra", reason="pytest-testinfra is not installed")
    # testinfra's ansible backend reads the inventory with ansible-inventory
    for k, v in ansible_env(deployed.tmp).items():
        monkeypatch.setenv(k, v)
    # and runs each check with its own ssh: one connection per node for them all (a
    # handshake per check was most of this test), ended with the playbook's (_close_masters)
    monkeypatch.setenv("ANSIBLE_SSH_EXTRA_ARGS", "-o ControlMaster=auto -o ControlPersist=30s "
                       f"-o ControlPath={deployed.cp}/ti-%C")  # fmt: skip
    for node in NODES:
        host = testinfra.get_host(f"ansible://{node}?ansible_inventory={deployed.inventory}")
        prefix = deployed.root / node
        assert host.check_output("hostname") == node  # the session is on the node
        pid = int(host.file(f"{prefix}/run/agent-{node}.pid").content_string)
        agent = host.process.get(pid=pid)
        assert agent.user == "root"
        # -P: never the working directory on sys.path (docs/security.md)
        assert agent.args.startswith(f"{sys.executable} -P -m agent --node {node} "), agent.args
        # in the node's cgroup leaf, as `cluster up` starts its agents
        assert f"cosched/{node}/agent" in host.file(f"/proc/{pid}/cgroup").content_string
        # listening inside the node's namespace, on its control address
        ctl = f"10.212.0.{NODES.index(node) + 1}"
        assert host.socket(f"tcp://{ctl}:7070").is_listening
        key = host.file(f"{prefix}/etc/cluster.key")
        assert key.is_file and key.user == "root" and key.mode == 0o600
        assert host.file(f"{prefix}/log/agent-{node}.log").mode == 0o600
        # the interpreter the daemons run with (install_from none: this checkout's venv)
        assert host.file(sys.executable).exists
        assert host.run(f"{sys.executable} -c 'import agent, controller'").rc == 0
    head = testinfra.get_host(f"ansible://head?ansible_inventory={deployed.inventory}")
    pid = int(head.file(f"{deployed.root}/head/run/controller.pid").content_string)
    assert "-m controller --policy gang" in head.process.get(pid=pid).args
    assert head.file(f"{deployed.root}/head/etc/cluster.key").mode == 0o600


@pytest.fixture(scope="module")
def ghost_run(deployed: Deployed) -> subprocess.CompletedProcess[str]:
    """One playbook run for the last two tests (a run is 30-40 s here): the agents' play
    with a ghost node added to the inventory and n0's key loosened by hand before it."""
    inv = yaml.safe_load(deployed.inventory.read_text())
    # on the control network, where no node answers
    inv["all"]["children"]["agents"]["hosts"]["ghost"] = {
        "ansible_host": "10.212.0.200", "cosched_control_address": "10.212.0.200"}  # fmt: skip
    path = deployed.tmp / "with-ghost.yml"
    path.write_text(yaml.safe_dump(inv))
    (deployed.root / "n0/etc/cluster.key").chmod(0o644)
    # only the agents: the controller's agent list would otherwise gain the ghost
    return deployed.play("--limit", "agents", "-e", "ansible_ssh_timeout=5", inventory=path)


def test_an_unreachable_node_fails_alone_and_clearly(
    ghost_run: subprocess.CompletedProcess[str],
) -> None:
    out = ghost_run
    assert out.returncode != 0
    hosts = recap(out.stdout)
    assert hosts["ghost"]["unreachable"] == 1, hosts
    text = " ".join(out.stdout.split())  # the yaml callback folds long messages
    ghost = text[text.find("fatal: [ghost]: UNREACHABLE!") :][:400]
    assert ghost.startswith("fatal: [ghost]: UNREACHABLE!"), out.stdout
    # ansible-core 2.19: 'Data could not be sent to remote host "10.212.0.200". Make sure
    # this host can be reached over ssh: ssh: connect to host ... port 22: No route to host'
    assert re.search(r"ssh: connect to host 10\.212\.0\.200 port 22: "
                     r"(No route to host|Connection timed out)", ghost), ghost  # fmt: skip
    print("unreachable:", ghost[:240])
    for node in NODES:
        assert hosts[node]["failed"] == 0 and hosts[node]["unreachable"] == 0, hosts
    # and n1 stayed as it was (n0's key was loosened: the next test's change)
    assert hosts["n1"]["changed"] == 0, hosts


def test_a_key_readable_by_others_is_refused_and_the_role_restores_0600(
    deployed: Deployed, ghost_run: subprocess.CompletedProcess[str]
) -> None:
    key = deployed.root / "n0/etc/cluster.key"
    loose = deployed.tmp / "loose.key"
    shutil.copyfile(key, loose)
    loose.chmod(0o644)
    # the agent itself refuses it, in one line that says why and what to do
    out = subprocess.run([sys.executable, "-m", "agent", "--node", "x", "--listen",
                          "127.0.0.1:0", "--key-file", str(loose)],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert f"key file {loose} is readable or writable by others (mode 0644)" in out.stderr
    assert f"chmod 600 {loose}" in out.stderr
    # n0's key loosened by hand (ghost_run): the run set it back and restarted the agent
    hosts = recap(ghost_run.stdout)
    assert hosts["n0"]["failed"] == 0 and hosts["n0"]["unreachable"] == 0, _ok(ghost_run)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert hosts["n0"]["changed"] >= 1
