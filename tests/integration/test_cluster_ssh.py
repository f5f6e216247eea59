"""``cosched cluster up --ssh`` for real (root): an sshd in each node's network
namespace, reached with ``ssh -F <state>/ssh_config n0``; ``down`` leaves no sshd,
no namespace and no file. Run under ``flock /tmp/cosched-cluster.lock``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from testbed.cluster import sshd as sshd_mod

COSCHED = [sys.executable, "-m", "testbed.cli"]


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def _our_sshds(state: Path) -> list[int]:
    """Live (not zombie) processes running sshd with a config of this state dir."""
    out = []
    for p in psutil.process_iter(["cmdline", "status", "exe"]):
        # sshd's title is one string ("sshd: /usr/sbin/sshd -D -e -f CONF [listener] ...")
        ours = str(state) in " ".join(p.info["cmdline"] or [])
        live = p.info["status"] != psutil.STATUS_ZOMBIE
        if live and ours and os.path.basename(p.info["exe"] or "") == "sshd":
            out.append(p.pid)
    return out


@pytest.fixture
def need_sshd() -> None:
    problem = sshd_mod.sshd_available()
    if problem:
        pytest.skip(problem)
    if shutil.which("ssh") is None:
        pytest.skip("ssh (openssh-client) is not installed")


def test_cluster_up_ssh_reaches_each_node_in_its_namespace(
    root_cluster_env: Path, need_sshd: None
) -> None:
    state = root_cluster_env
    t0 = time.monotonic()
    up = _run([*COSCHED, "cluster", "up", "--nodes", "2", "--ssh", "--no-agents"])
    t_up = time.monotonic() - t0
    assert up.returncode == 0, up.stderr
    print(f"cluster up --ssh, 2 nodes: {t_up:.2f} s\n{up.stdout}")
    cfg = str(state / "ssh_config")
    inv = yaml.safe_load((state / "inventory.yml").read_text())
    assert set(inv["all"]["children"]["agents"]["hosts"]) == {"n0", "n1"}

    for node in ("n0", "n1"):
        t1 = time.monotonic()
        r = _run(["ssh", "-F", cfg, node, "hostname; readlink /proc/self/ns/net; "
                  "grep freezer /proc/self/cgroup; ls /sys/fs/cgroup"], timeout=20)  # fmt: skip
        assert r.returncode == 0, r.stderr
        print(f"ssh {node}: {time.monotonic() - t1:.2f} s")
        host, ns, cgroup, *sysfs = r.stdout.split()
        assert host == node  # a UTS namespace of its own, as the agents have
        assert ns == f"net:[{os.stat(f'/run/netns/cosched-{node}').st_ino}]"
        assert cgroup.endswith(f"cosched/{node}/agent")  # sessions start in the agent leaf
        assert "freezer" in sysfs  # the cgroup mounts are visible (no /sys remount)
    head = _run(["ssh", "-F", cfg, "head", "readlink /proc/self/ns/net"], timeout=20)
    assert head.returncode == 0, head.stderr
    assert head.stdout.strip() == os.readlink("/proc/self/ns/net")

    status = _run([*COSCHED, "cluster", "status", "--no-probe"])
    assert "ssh: yes, 3/3 sshd running" in status.stdout, status.stdout
    assert str(state / "inventory.yml") in status.stdout
    assert len(_our_sshds(state)) >= 3

    down = _run([*COSCHED, "cluster", "down"])
    assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 5  # init reaps the stopped listeners
    while _our_sshds(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _our_sshds(state) == []
    assert not [n for n in os.listdir("/run/netns") if n.startswith("cosched-")]
    assert sorted(os.listdir(state)) == []


def test_a_planted_link_in_the_state_dir_is_refused(
    root_cluster_env: Path, need_sshd: None, tmp_path: Path
) -> None:
    state = root_cluster_env
    state.mkdir(mode=0o700, exist_ok=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, state / "ssh")
    r = _run([*COSCHED, "cluster", "up", "--nodes", "1", "--ssh", "--no-agents"])
    assert r.returncode != 0
    assert "not a directory of ours" in r.stderr and "Traceback" not in r.stderr
    assert os.listdir(target) == []
    assert not os.path.lexists(state / "ssh")  # the rollback unlinked it, never followed it


def test_clean_stops_the_sshds_of_a_crashed_up(root_cluster_env: Path, need_sshd: None) -> None:
    state = root_cluster_env
    up = _run([*COSCHED, "cluster", "up", "--nodes", "1", "--ssh", "--no-agents"])
    assert up.returncode == 0, up.stderr
    assert len(_our_sshds(state)) == 2
    (state / "cluster.json").unlink()  # as if `up` had died before its ledger was written
    r = _run([*COSCHED, "clean"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "killed" in r.stdout
    deadline = time.monotonic() + 5
    while _our_sshds(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _our_sshds(state) == []
    assert not (state / "ssh").exists() and not (state / "inventory.yml").exists()
