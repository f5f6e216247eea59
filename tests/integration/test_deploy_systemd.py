"""The deploy as users run it (root): systemd nodes, cgroup2, Delegate=yes, over SSH.

The host is made cgroup-v2-only for the module (common/cgroups/v2only.py) and
given its v1 hierarchies back however the module ends, checked. On it,
``cosched cluster up --nodes 2 --systemd`` boots a head and two nodes, each
Debian bookworm with systemd as PID 1 (testbed/cluster/nspawn.py), from the
cached debootstrap tree (testbed/cluster/rootfs.py); ``ansible/site.yml`` with
``service_manager: systemd`` deploys the agents, the controller and Prometheus
to them over SSH, with the variables the cluster's inventory carries. Then:
a 2-rank gang job completes; pytest-testinfra finds on each node the agent's
unit active with ``Delegate=yes`` in effect, nothing in the unit's own cgroup
but its supervisor leaf, the running job's group below the unit's cgroup with
its ``cpu.weight``; ``systemctl stop`` of an agent thaws its frozen job (which
keeps running) and the journal has it; the agent starts again beside its job
(it failed with 219/CGROUP before agent/release.py) and reattaches it; a second
playbook run changes nothing; ``cosched remote`` status, logs, stop, start and
clean work through systemd; the controller, redeployed with paired gang, runs
a pair of jobs to completion. At the end nothing of it is left on the host:
cgroup mounts as before, no namespace, link, cgroup, nspawn process or run
directory. Timings are printed (``-s``): the root file system (first build or
cache), the boot, both playbook runs. Run under ``flock /work/host.lock``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ansible import ANSIBLE_DIR, PLAYBOOK, ansible_env, recap

COSCHED = [sys.executable, "-m", "testbed.cli"]
NODES = ["n0", "n1"]
HOSTS = {"head", *NODES}
PLAY_TIMEOUT_S = 900.0
UNIT_CG = "/sys/fs/cgroup/system.slice/cosched-agent.service"  # inside a node
REMOTE_COSCHED = f"{sys.prefix}/bin/cosched"  # bound into every node at the same path


def host_footprint() -> dict[str, Any]:
    """What the module may change on the host and must leave as it found it."""
    from pyroute2 import IPRoute, netns

    from common.cgroups.v2only import parse_cgroup_mounts
    from testbed.cluster import nspawn

    with open("/proc/self/mounts", encoding="utf-8") as f:
        mounts = [
            ln for ln in f.read().splitlines() if ln.split()[2:3] in (["cgroup"], ["cgroup2"])
        ]
    _, unified = parse_cgroup_mounts("\n".join(mounts))
    groups = []
    if unified:
        groups = sorted(
            os.path.relpath(d, unified) for d, _, _ in os.walk(unified) if d != unified
        )  # fmt: skip
    with IPRoute() as ipr:
        links = sorted(str(x.get_attr("IFLA_IFNAME")) for x in ipr.get_links())
    return {
        "cgroup mounts": sorted(mounts),
        "cgroup2 groups": groups,
        "netns": sorted(netns.listnetns()),
        "links": links,
        "nspawn processes": nspawn.running(),
        "/run/systemd": sorted(os.listdir("/run/systemd"))
        if os.path.isdir("/run/systemd")
        else None,
    }


@dataclass
class Cluster:
    tmp: Path
    state: Path
    inventory: Path
    ssh_config: Path
    extra: Path
    cp: Path
    times: dict[str, float]
    first: subprocess.CompletedProcess[str]

    def play(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PLAYBOOK), "-i", str(self.inventory), "site.yml", "-e", f"@{self.extra}", *args],
            capture_output=True, text=True, cwd=ANSIBLE_DIR, env=self.env(), timeout=PLAY_TIMEOUT_S,
        )  # fmt: skip

    def env(self) -> dict[str, str]:
        return ansible_env(self.tmp) | {
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=30s",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.cp),
        }

    def ssh(self, host: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", "-F", str(self.ssh_config), host, command],
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def on_head(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``cosched ...`` on the head node, as an operator logged in there runs it."""
        return self.ssh("head", " ".join([REMOTE_COSCHED, *map(_q, args)]), timeout=timeout)

    def cosched(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, COSCHED_STATE_DIR=str(self.state))
        return subprocess.run([*COSCHED, *args], capture_output=True, text=True, env=env,
                              timeout=timeout)  # fmt: skip


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _out(r: subprocess.CompletedProcess[str]) -> str:
    return (r.stdout[-6000:] + r.stderr[-3000:]).strip()


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (cgroup mounts, namespaces, containers)"
    if not PLAYBOOK.exists():
        return "ansible-core is not installed (pip install -e '.[dev]')"
    from testbed.cluster import nspawn, rootfs

    return nspawn.available() or (None if os.path.isdir(rootfs.cache_dir()) else rootfs.available())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from common.cgroups import v2only
    from common.cgroups.errors import HierarchyHeld
    from testbed.cluster import rootfs

    before = host_footprint()
    tmp = tmp_path_factory.mktemp("sysd")
    state = tmp / "state"
    extra = tmp / "extra.yml"
    extra.write_text(yaml.safe_dump({
        "cosched_prometheus_scrape_interval": "2s",
        "cosched_prometheus_scrape_timeout": "1s",
        "cosched_prometheus_evaluation_interval": "2s",
    }))  # fmt: skip
    cp = Path(tempfile.mkdtemp(prefix="cp", dir="/tmp"))
    times: dict[str, float] = {}
    env = dict(os.environ, COSCHED_STATE_DIR=str(state))
    try:
        switched = v2only.switch_to_v2()
    except HierarchyHeld as e:
        pytest.skip(str(e))  # allowed on CI by name (tests/support/allowed_skips.py)
    try:
        t0 = time.monotonic()
        up = subprocess.run([*COSCHED, "cluster", "up", "--nodes", str(len(NODES)), "--systemd"],
                            capture_output=True, text=True, env=env, timeout=1800)  # fmt: skip
        times["cluster up"] = time.monotonic() - t0
        print(up.stdout)
        assert up.returncode == 0, _out(up)
        st = json.loads((state / "cluster.json").read_text())
        sd = st["systemd"]
        times["root file system (this run)"] = sd["rootfs_lookup_s"]
        times["root file system (its build)"] = sd["rootfs_build_s"]
        times["boot head + 2 nodes"] = sd["boot_s"]
        cached = rootfs.ensure()
        times["root file system (cached)"] = cached.lookup_s
        c = Cluster(tmp, state, state / "inventory.yml", state / "ssh_config", extra, cp, times, up)
        t0 = time.monotonic()
        c.first = c.play()
        times["first playbook run"] = time.monotonic() - t0
        yield c
    finally:
        for sock in cp.iterdir():
            subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={sock}", "x"],
                           capture_output=True, check=False, timeout=10)  # fmt: skip
        shutil.rmtree(cp, ignore_errors=True)
        down = subprocess.run([*COSCHED, "cluster", "down"], capture_output=True, text=True,
                              env=env, timeout=300)  # fmt: skip
        if down.returncode != 0:
            print(_out(down))
            from testbed.cluster import clean as clean_mod
            from testbed.cluster import cluster as cluster_mod

            print(clean_mod.clean(cluster_mod.Env(state_dir=str(state))).format())
        try:
            if switched.unmounted:
                v2only.restore_v1()
        finally:
            print("timings:", ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
            after = host_footprint()
            assert after == before, {
                k: (before[k], after[k]) for k in before if before[k] != after[k]
            }


def test_first_run_deploys_every_host(cluster: Cluster) -> None:
    assert cluster.first.returncode == 0, _out(cluster.first)
    hosts = recap(cluster.first.stdout)
    print("first run recap:", hosts)
    assert set(hosts) == HOSTS
    for host, counts in hosts.items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, (host, counts)


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            assert got, f"{what} not seen within {timeout:g} s"
            return got
        time.sleep(0.5)


def _controller_status(cluster: Cluster) -> dict[str, Any]:
    r = cluster.on_head("controller", "status", "--json")
    return json.loads(r.stdout) if r.returncode == 0 else {}


def test_the_agents_answer_the_controller_on_the_head(cluster: Cluster) -> None:
    both = dict.fromkeys(NODES, True)
    status = _wait(lambda: (s := _controller_status(cluster)).get("agents") == both and s,
                   30, "both agents connected")  # fmt: skip
    assert status["policy"] == "gang" and status["nodes_unreachable"] == []


def test_the_heads_prometheus_scrapes_every_daemon(cluster: Cluster) -> None:
    url = "http://10.212.0.253:9090/api/v1/query?query=up"  # from the host, over the control net

    def up() -> dict[str, float]:
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=5) as r:
            res = json.load(r)["data"]["result"]
            got = {
                f"{x['metric']['job']}/{x['metric']['instance']}": float(x["value"][1]) for x in res
            }
            return got if len(got) == 3 and all(v == 1 for v in got.values()) else {}
        return {}

    assert _wait(up, 60, "up == 1 for every target") == {
        "cosched-controller/10.212.0.253:9097": 1,
        **{f"cosched-agent/10.212.0.{i + 1}:9096": 1 for i in range(len(NODES))},
    }


def _submit(cluster: Cluster, *argv: str, size: int = 2) -> int:
    r = cluster.on_head("submit", "--size", str(size), "--quiet", "--", *argv)
    assert r.returncode == 0, _out(r)
    return int(r.stdout.split()[-1])


def _job(cluster: Cluster, job: int) -> dict[str, Any]:
    r = cluster.on_head("jobs", "--all", "--json")
    jobs = json.loads(r.stdout) if r.returncode == 0 else []
    return next((j for j in jobs if j.get("job_id") == job), {})


def _ended(cluster: Cluster, job: int, timeout: float = 90) -> dict[str, Any]:
    return _wait(lambda: (j := _job(cluster, job)).get("state") in ("done", "failed", "killed")
                 and j, timeout, f"job {job} ending")  # fmt: skip


def test_a_gang_job_runs_to_completion(cluster: Cluster) -> None:
    job = _submit(cluster, "/bin/sh", "-c", "hostname; sleep 1")
    j = _ended(cluster, job)
    assert j["state"] == "done" and j["exit_code"] == 0 and sorted(j["nodes"]) == NODES, j


def _testinfra(cluster: Cluster, host: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    testinfra = pytest.importorskip("testinfra", reason="pytest-testinfra is not installed")
    for k, v in ansible_env(cluster.tmp).items():
        monkeypatch.setenv(k, v)
    return testinfra.get_host(f"ansible://{host}?ansible_inventory={cluster.inventory}")


def _lines(host: Any, path: str) -> list[str]:
    return host.file(path).content_string.split()


def test_each_node_runs_its_agent_delegated_with_the_jobs_below_its_unit(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _submit(cluster, "/bin/sleep", "60")
    try:
        _wait(lambda: _job(cluster, job).get("state") == "running", 30, f"job {job} running")
        for node in NODES:
            host = _testinfra(cluster, node, monkeypatch)
            assert host.check_output("hostname") == node
            agent = host.service("cosched-agent")
            assert agent.is_running and agent.is_enabled
            show = "systemctl show -p Delegate -p ControlGroup -p MainPID cosched-agent"
            props = dict(ln.split("=", 1) for ln in host.check_output(show).splitlines())
            assert props["Delegate"] == "yes", props
            assert props["ControlGroup"] == "/system.slice/cosched-agent.service", props
            # in effect: systemd marked the unit's cgroup delegated and passed cpu on to it
            mark = host.run(
                f"python3 -c \"import os; print(os.getxattr('{UNIT_CG}', 'trusted.delegate'))\""
            )
            assert mark.stdout.strip() == "b'1'", mark
            assert "cpu" in _lines(host, f"{UNIT_CG}/cgroup.controllers")
            # nothing in the unit's own cgroup but its supervisor leaf (the agent) and its groups
            assert _lines(host, f"{UNIT_CG}/cgroup.procs") == []
            assert _lines(host, f"{UNIT_CG}/supervisor/cgroup.procs") == [props["MainPID"]]
            children = host.check_output(
                f"find {UNIT_CG} -mindepth 1 -maxdepth 1 -type d -printf '%f\\n'"
            )
            assert sorted(children.split()) == ["cosched", "supervisor"], children
            # the job's group below the unit's cgroup, its rank inside, its cpu.weight written
            jg = f"{UNIT_CG}/cosched/{node}/job-{job}"
            assert host.file(jg).is_directory, jg
            ranks = _lines(host, f"{jg}/cgroup.procs")
            assert ranks and host.process.get(pid=int(ranks[0])).args == "/bin/sleep 60"
            assert host.file(f"{jg}/cpu.weight").content_string.strip() == "100"
            assert "cpu" in _lines(host, f"{UNIT_CG}/cosched/{node}/cgroup.subtree_control")
            journal = host.check_output("journalctl -u cosched-agent --no-pager -o cat")
            assert f"agent {node} listening on" in journal and "weights enforced" in journal
    finally:
        cluster.on_head("kill", str(job))
    assert _ended(cluster, job)["state"] in ("killed", "failed", "done")


def _frozen(host: Any, group: str) -> bool:
    return "frozen 1" in host.file(f"{group}/cgroup.events").content_string


def test_stopping_an_agent_thaws_its_jobs_and_a_restart_reattaches_them(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two 2-rank gangs on two nodes: gang scheduling freezes one of them in every quantum
    jobs = [_submit(cluster, "/bin/sleep", "120") for _ in range(2)]
    host = _testinfra(cluster, "n0", monkeypatch)
    groups = [f"{UNIT_CG}/cosched/n0/job-{j}" for j in jobs]
    try:
        _wait(lambda: all(host.file(g).is_directory for g in groups)
              and any(_frozen(host, g) for g in groups), 30, "a frozen job on n0")  # fmt: skip
        stop = cluster.cosched("remote", "stop", "-i", str(cluster.inventory), "--limit", "n0",
                               "--only", "agent")  # fmt: skip
        assert stop.returncode == 0 and "agent-n0: stopped" in stop.stdout, _out(stop)
        assert host.run("systemctl is-active cosched-agent").stdout.strip() == "inactive"
        # thawed, and still running (KillMode=process keeps the jobs)
        assert not any(_frozen(host, g) for g in groups)
        assert all(_lines(host, f"{g}/cgroup.procs") for g in groups)
        journal = host.check_output("journalctl -u cosched-agent --no-pager -o cat")
        assert "agent n0 stopped" in journal and "Stopped cosched-agent.service" in journal
        start = cluster.cosched("remote", "start", "-i", str(cluster.inventory), "--limit", "n0",
                                "--only", "agent")  # fmt: skip
        why = host.run("systemctl status --no-pager -n 30 cosched-agent").stdout
        assert start.returncode == 0, _out(start) + "\n" + why
        _wait(lambda: host.service("cosched-agent").is_running, 20, "the agent running again")
        journal = host.check_output("journalctl -u cosched-agent --no-pager -o cat")
        assert all(f"reattached job {j}" in journal for j in jobs), journal[-3000:]
        assert "219/CGROUP" not in journal
    finally:
        for j in jobs:
            cluster.on_head("kill", str(j))
    for j in jobs:
        assert _ended(cluster, j)["state"] in ("killed", "failed", "done")


def test_cosched_remote_status_and_logs_go_through_systemd(cluster: Cluster) -> None:
    st = cluster.cosched("remote", "status", "-i", str(cluster.inventory))
    assert st.returncode == 0, _out(st)
    for h in HOSTS:
        assert f"{h} (10.212.0." in st.stdout
    assert st.stdout.count("manager systemd, cgroup v2") == 3, st.stdout
    assert st.stdout.count("agent-n0: active; metrics ok") == 1, st.stdout
    assert "controller: active; metrics ok" in st.stdout
    out = cluster.tmp / "logs"
    logs = cluster.cosched("remote", "logs", "-i", str(cluster.inventory), "--out", str(out))
    assert logs.returncode == 0, _out(logs)
    # the journal, not a log file: systemd's own lines are in it
    assert "Started cosched-agent.service" in (out / "n1" / "agent-n1.log").read_text()
    assert "cosched_agent" in (out / "n1" / "agent-n1.prom").read_text()


def test_a_second_run_changes_nothing(cluster: Cluster) -> None:
    t0 = time.monotonic()
    second = cluster.play()
    cluster.times["second playbook run"] = time.monotonic() - t0
    assert second.returncode == 0, _out(second)
    hosts = recap(second.stdout)
    print("second run recap:", hosts)
    assert {h: c["changed"] for h, c in hosts.items()} == dict.fromkeys(HOSTS, 0), _out(second)


def test_the_controller_redeployed_with_paired_gang_runs_a_pair(cluster: Cluster) -> None:
    r = cluster.play("--limit", "controller", "--tags", "controller",
                     "-e", "cosched_controller_policy=paired-gang")  # fmt: skip
    assert r.returncode == 0, _out(r)
    assert recap(r.stdout)["head"]["changed"] >= 1
    both = dict.fromkeys(NODES, True)
    _wait(lambda: (s := _controller_status(cluster)).get("policy") == "paired-gang"
          and s.get("agents") == both, 30, "paired gang with both agents")  # fmt: skip
    jobs = [_submit(cluster, "/bin/sh", "-c", "sleep 1; echo ok") for _ in range(2)]
    for j in jobs:
        job = _ended(cluster, j)
        assert job["state"] == "done" and job["exit_code"] == 0, job


def test_remote_clean_stops_everything_through_systemd(cluster: Cluster) -> None:
    r = cluster.cosched("remote", "clean", "-i", str(cluster.inventory))
    assert r.returncode == 0, _out(r)
    assert "skipped on an emulated node" not in r.stdout
    for node in NODES:
        state = cluster.ssh(node, f"systemctl is-active cosched-agent; ls {UNIT_CG} 2>&1 | head -1")
        assert state.stdout.split()[0] == "inactive", state.stdout
    assert (
        cluster.ssh("head", "systemctl is-active cosched-controller").stdout.strip() == "inactive"
    )
