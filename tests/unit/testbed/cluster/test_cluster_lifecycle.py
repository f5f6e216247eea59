"""up / status / down / clean and rollback, against fake netlink and cgroup layers."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from common.cgroups.fake import FakeCgroupFS
from testbed.cluster import clean as clean_mod
from testbed.cluster import cluster as cl
from testbed.cluster import state as state_mod
from testbed.cluster.errors import ClusterError
from tests.support.cluster_fakes import (
    FakeAgents,
    FakeNet,
    InjectedFailure,
    assert_pristine,
    config,
    make_env,
)


def test_plan_is_pure_and_complete() -> None:
    plan = cl.build_plan(config(3, cpus_per_node=0.5), cores=[0, 1])
    assert [n.name for n in plan.nodes] == ["n0", "n1", "n2"]
    assert plan.nodes[2].netns == "cosched-n2"
    assert plan.nodes[2].data_ip == "10.211.0.3" and plan.nodes[2].ctl_ip == "10.212.0.3"
    assert plan.htb.rate_bps == 100_000_000
    assert plan.netem is not None and plan.netem.delay_us == 80
    assert plan.cpu.mechanism == "cfs"


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"nodes": 0}, "between 1 and 200"),
        ({"nodes": 201}, "between 1 and 200"),
        ({"nodes": 2, "cpus_per_node": 3}, "exceeds"),
        ({"nodes": 2, "cpus_per_node": -1}, "> 0"),
    ],
)
def test_impossible_requests_refused_before_anything(
    tmp_path: Path, kw: dict[str, Any], msg: str
) -> None:
    env = make_env(tmp_path)
    with pytest.raises(ClusterError, match=msg):
        cl.up(config(**kw), env)
    assert_pristine(env)
    assert isinstance(env.net, FakeNet) and env.net.calls == 0


def test_up_status_down(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    st = cl.up(config(2, cpus_per_node=1), env)
    assert st.status == "up" and st.delay_mechanism == "userspace" and st.netem is None
    net, fs = env.net, env.cg_fs
    assert isinstance(net, FakeNet) and isinstance(fs, FakeCgroupFS)
    assert net.list_netns() == ["cosched-ctl", "cosched-data", "cosched-n0", "cosched-n1"]
    assert net.list_links(None) == ["csc-host", "eth0", "lo"]
    assert net.netns["cosched-n0"]["csd0"]["addr"] == "10.211.0.1/24"
    assert net.netns["cosched-ctl"]["csc-hostp"]["master"] == "csbr0"
    # shaped both ways, control network untouched
    assert net.get_tc("cosched-n1", "csd0") and net.get_tc("cosched-data", "csd-n1")
    assert not net.netns["cosched-n0"]["csc0"]["tc"]
    assert fs.knob("cpuset", "cosched/n1", "cpuset.cpus") == "1"
    assert fs.has("freezer", "cosched/n0") and fs.has("cpuacct", "cosched/n1")
    # key: 32 random bytes as 64 hex characters, 0600
    key = state_mod.key_path(env.sdir())
    assert len(bytes.fromhex(Path(key).read_text())) == 32
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert [a.node for a in st.agents] == ["n0", "n1"]
    cmd = st.agents[0].cmd
    # isolated from the caller's directory (common/daemons.py)
    assert cmd[1] in ("-I", "-P") and cmd[2:4] == ["-m", "agent"]
    assert "10.212.0.1:7070" in cmd and "cosched/n0" in cmd

    with open(state_mod.state_path(env.sdir())) as f:
        saved = json.load(f)
    assert saved["delay_mechanism"] == "userspace" and saved["cpu"]["mechanism"] == "cpuset"

    report = cl.status(env, probe=False)
    assert report is not None
    assert report["delay_mechanism"] == "userspace" and report["cpu_mechanism"] == "cpuset"
    assert "rate 100mbit" in report["nodes"][0]["tc_node"]
    text = cl.format_status(report)
    assert "userspace" in text and "n1" in text and "cpuset.cpus=1" in text

    existed, problems = cl.down(env)
    assert existed and problems == []
    assert_pristine(env)
    # idempotent
    assert cl.down(env) == (False, [])


def test_netem_used_when_kernel_has_it(tmp_path: Path) -> None:
    net = FakeNet(features={"netns": True, "veth": True, "bridge": True, "htb": True,
                            "netem": True})  # fmt: skip
    env = make_env(tmp_path, net=net)
    st = cl.up(config(2, link="custom:rate=200mbit,delay=20us,jitter=5us"), env)
    assert st.delay_mechanism == "netem" and st.netem == {
        "delay_us": 20,
        "jitter_us": 5,
        "loss_pct": 0.0,
    }
    kinds = [e["kind"] for e in net.get_tc("cosched-n0", "csd0")]
    assert "netem" in kinds
    # delay only on the sender side, so a path crosses it once
    assert "netem" not in [e["kind"] for e in net.get_tc("cosched-data", "csd-n0")]
    cl.down(env)
    assert_pristine(env)


def test_refuses_without_root(tmp_path: Path) -> None:
    env = make_env(tmp_path, root=False)
    with pytest.raises(ClusterError, match="needs root"):
        cl.up(config(), env)
    assert_pristine(env)


@pytest.mark.parametrize("missing", ["veth", "bridge", "htb", "netns"])
def test_refuses_without_kernel_feature(tmp_path: Path, missing: str) -> None:
    feats = {"netns": True, "veth": True, "bridge": True, "htb": True, "netem": False}
    feats[missing] = False
    env = make_env(tmp_path, net=FakeNet(features=feats))
    with pytest.raises(ClusterError, match=missing):
        cl.up(config(), env)
    assert_pristine(env)


def test_refuses_without_cgroup_controller(tmp_path: Path) -> None:
    fs = FakeCgroupFS(tmp_path / "cg", v1=("cpu", "cpuacct")).build()
    env = make_env(tmp_path, fs=fs)
    with pytest.raises(ClusterError, match="freezer"):
        cl.up(config(), env)


def test_refuses_when_agent_missing_but_no_agents_works(tmp_path: Path) -> None:
    env = make_env(tmp_path, agent_ok=False)
    with pytest.raises(ClusterError, match="--no-agents"):
        cl.up(config(), env)
    assert_pristine(env)
    st = cl.up(config(start_agents=False), env)
    assert st.agents == []
    cl.down(env)
    assert_pristine(env)


def test_refuses_when_already_up(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    cl.up(config(), env)
    before = (env.net.footprint(), env.cg_fs.footprint())  # type: ignore[attr-defined]
    with pytest.raises(ClusterError, match="already up"):
        cl.up(config(3), env)
    # the existing cluster is untouched
    assert (env.net.footprint(), env.cg_fs.footprint()) == before  # type: ignore[attr-defined]
    cl.down(env)
    assert_pristine(env)


def test_refuses_when_stray_namespace_exists(tmp_path: Path) -> None:
    net = FakeNet()
    net.netns["cosched-n5"] = {}
    env = make_env(tmp_path, net=net)
    with pytest.raises(ClusterError, match="cosched-n5"):
        cl.up(config(), env)
    assert net.list_netns() == ["cosched-n5"]


def _count_mutations(tmp_path: Path) -> int:
    env = make_env(tmp_path / "count")
    cl.up(config(2, cpus_per_node=0.5), env)
    assert isinstance(env.net, FakeNet)
    n = env.net.calls
    cl.down(env)
    return n


def test_rollback_after_failure_at_every_netlink_step(tmp_path: Path) -> None:
    total = _count_mutations(tmp_path)
    assert total > 20
    for k in range(1, total + 1):
        env = make_env(tmp_path / f"k{k}", net=FakeNet(fail_at=k))
        with pytest.raises(ClusterError, match="rolled back") as info:
            cl.up(config(2, cpus_per_node=0.5), env)
        assert isinstance(info.value.__cause__, InjectedFailure)
        assert_pristine(env)


def test_rollback_when_an_agent_fails(tmp_path: Path) -> None:
    agents = FakeAgents(fail_on="n1")
    env = make_env(tmp_path, agents=agents)
    with pytest.raises(ClusterError, match="agent for n1"):
        cl.up(config(2), env)
    assert agents.running == {}  # n0's agent was stopped again
    assert_pristine(env)


def test_agents_start_and_stop_side_by_side(tmp_path: Path) -> None:
    agents = FakeAgents()
    env = make_env(tmp_path, agents=agents)
    cl.up(config(3), env)
    assert agents.awaited == [["n0", "n1", "n2"]]  # one grace for the three, after all started
    assert len(agents.running) == 3
    cl.down(env)
    assert agents.running == {}


def test_rollback_when_an_agent_dies_in_its_grace(tmp_path: Path) -> None:
    class DiesAtStart(FakeAgents):
        def await_all(self, recs: list[Any]) -> None:
            raise RuntimeError("agent for n1 exited with status 2; see agent-n1.log")

    agents = DiesAtStart()
    env = make_env(tmp_path, agents=agents)
    with pytest.raises(ClusterError, match="agent for n1 exited with status 2"):
        cl.up(config(2), env)
    assert agents.running == {}  # both recorded before the wait, both stopped again
    assert_pristine(env)


def test_rollback_when_cgroup_write_fails(tmp_path: Path) -> None:
    class BadFS(FakeCgroupFS):
        def write(self, path: Path | str, value: str) -> None:
            if str(path).endswith("cpu.cfs_quota_us"):
                raise OSError(22, "Invalid argument")
            super().write(path, value)

    env = make_env(tmp_path, fs=BadFS(tmp_path / "cg").build())
    with pytest.raises(ClusterError, match="Invalid argument"):
        cl.up(config(2, cpus_per_node=0.5), env)
    assert_pristine(env)


def test_down_kills_leftovers_in_node_cgroups_thawing_first(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    fs = env.cg_fs
    assert isinstance(fs, FakeCgroupFS)
    cl.up(config(2), env)
    # what an agent would have made: a frozen per-job cgroup with a task in it
    fs.make("freezer", "cosched/n0/job1")
    fs.add_proc("freezer", "cosched/n0/job1", 4242)
    fs.set_knob("freezer", "cosched/n0/job1", "freezer.state", "FROZEN")
    existed, problems = cl.down(env)
    assert existed and problems == []
    assert 4242 in fs.killed
    assert_pristine(env)


def test_clean_without_state_file(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    fs = env.cg_fs
    assert isinstance(fs, FakeCgroupFS)
    cl.up(config(2), env)
    fs.add_proc("cpu", "cosched/n1", 77)
    os.unlink(state_mod.state_path(env.sdir()))  # as if the state were lost
    rep = clean_mod.clean(env)
    assert not rep.from_state and rep.problems == []
    assert 77 in rep.killed
    assert "netns cosched-n0" in rep.removed and "link csc-host" in rep.removed
    assert_pristine(env)
    assert clean_mod.clean(env).format() == "nothing to clean"


def test_clean_with_state_file_and_corrupt_state(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    cl.up(config(1), env)
    rep = clean_mod.clean(env)
    assert rep.from_state and rep.problems == []
    assert_pristine(env)
    cl.up(config(1), env)
    Path(state_mod.state_path(env.sdir())).write_text("{not json")
    rep = clean_mod.clean(env)
    assert rep.problems == []
    assert_pristine(env)


def test_teardown_reports_but_continues(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    cl.up(config(2), env)
    net = env.net
    assert isinstance(net, FakeNet)

    def broken(ns: str | None, ifname: str) -> bool:
        raise OSError("boom")

    net.delete_link = broken  # type: ignore[method-assign,assignment]
    existed, problems = cl.down(env)
    assert existed and any("csc-host" in p for p in problems)
    assert net.list_netns() == []  # the rest was still removed
    assert os.path.exists(state_mod.state_path(env.sdir()))  # kept for a retry


def test_clean_and_down_leave_foreign_cosched_cgroups_alone(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    fs = env.cg_fs
    assert isinstance(fs, FakeCgroupFS)
    # e.g. the agent's own integration test, sharing the cosched/ root
    fs.make("freezer", "cosched/itest-1/job")
    fs.add_proc("freezer", "cosched/itest-1/job", 555)
    cl.up(config(2), env)
    assert cl.down(env) == (True, [])
    assert fs.procs("freezer", "cosched/itest-1/job") == [555]
    cl.up(config(2), env)
    os.unlink(state_mod.state_path(env.sdir()))
    rep = clean_mod.clean(env)
    assert rep.problems == [] and 555 not in fs.killed
    assert fs.footprint() == [
        "freezer:cosched",
        "freezer:cosched/itest-1",
        "freezer:cosched/itest-1/job",
    ]
    assert any("itest-1" in x for x in rep.lingering)


@pytest.mark.parametrize("with_state", [True, False])
def test_frozen_task_in_every_hierarchy_is_thawed_before_any_kill(
    tmp_path: Path, with_state: bool
) -> None:
    # Found on the real kernel: emptying cpu/ first waits forever on a task
    # frozen through freezer/, so thawing must come before the first kill.
    env = make_env(tmp_path)
    fs = env.cg_fs
    assert isinstance(fs, FakeCgroupFS)
    cl.up(config(2), env)
    for ctrl in ("cpu", "cpuacct", "freezer"):
        fs.add_proc(ctrl, "cosched/n1", 99)
    fs.set_knob("freezer", "cosched/n1", "freezer.state", "FROZEN")
    if with_state:
        assert cl.down(env) == (True, [])
    else:
        os.unlink(state_mod.state_path(env.sdir()))
        assert clean_mod.clean(env).problems == []
    assert 99 in fs.killed
    assert_pristine(env)


def test_speeds_and_decision_interval_reach_nodes_agents_and_status(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    st = cl.up(config(2, cpus_per_node=0.5, speeds=(1.0, 0.643), decision_interval_ms=2.0), env)
    fs = env.cg_fs
    assert isinstance(fs, FakeCgroupFS)
    assert fs.knob("cpu", "cosched/n0", "cpu.cfs_quota_us") == "5000"
    assert fs.knob("cpu", "cosched/n1", "cpu.cfs_quota_us") == "3215"
    for a in st.agents:
        i = a.cmd.index("--decision-interval-ms")
        assert a.cmd[i + 1] == "2"
    report = cl.status(env, probe=False)
    assert report is not None and report["speeds"] == [1.0, 0.643]
    text = cl.format_status(report)
    assert "speeds 1,0.643" in text and "decision interval (local CDC schemes): 2 ms" in text
    assert "speed 0.643" in text
    cl.down(env)
    assert_pristine(env)


def test_decision_interval_below_a_tenth_of_a_ms_is_refused(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    with pytest.raises(ClusterError, match=r"--decision-interval-ms 0.05 is outside 0.1..1000"):
        cl.up(config(2, decision_interval_ms=0.05), env)
    assert_pristine(env)
