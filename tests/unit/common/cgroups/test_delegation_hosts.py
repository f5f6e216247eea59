"""The cluster on every kind of host, against the one fake (kernel rules of cgroup-v2.rst).

v2-only without systemd (under the root), v2-only under systemd with and
without delegation, hybrid with a controller bound to v1, and the "no
internal processes" rule. Each refusal is one line and leaves nothing behind.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from common.cgroups import Cgroups, CgroupSetupError, Layout, parse_layout, resolve_base
from common.cgroups.delegation import own_cgroup
from common.cgroups.fake import FakeCgroupFS, fake_hybrid, fake_v2
from testbed.cluster import clean as clean_mod
from testbed.cluster import cluster as cl
from testbed.cluster.errors import ClusterError
from tests.support.cluster_fakes import assert_pristine, config, make_env

SCOPE = "system.slice/cosched-run.scope"


def _systemd(fs: FakeCgroupFS, own: str) -> object:
    def detect(prefer: str, f: object) -> Layout:
        lay = fs.layout(prefer)
        lay = Layout(
            lay.controllers, lay.unified, lay.v2_controllers, lay.bound_v1, "", True, False
        )
        return resolve_base(lay, fs, proc_cgroup_text=f"0::/{own}\n")

    return detect


def _env(tmp_path: Path, fs: FakeCgroupFS, detect: object = None) -> cl.Env:
    env = make_env(tmp_path, fs=fs)
    if detect is not None:
        env.detect_cgroups = detect  # type: ignore[assignment]
    return env


def test_v2_only_host_without_systemd_cpusets_and_leaves(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path / "cg")
    env = _env(tmp_path, fs)
    st = cl.up(config(2, cpus_per_node=1), env)
    assert st.cgroup_layout["mode"] == "v2"
    assert fs.knob("", "", "cgroup.subtree_control").split() == ["cpu", "cpuset"]
    assert set(fs.knob("", "cosched", "cgroup.subtree_control").split()) == {"cpu", "cpuset"}
    assert fs.knob("", "cosched/n1", "cpuset.cpus.effective") == "1"
    assert "cpu" in fs.knob("", "cosched/n0", "cgroup.subtree_control").split()
    assert fs.has("", "cosched/n0/agent")
    assert st.cpu["rt_runtime_us_per_node"].startswith("none")
    report = cl.status(env, probe=False)
    assert report is not None and report["cgroups"].startswith("v2")
    assert "cpuset.cpus=1" in cl.format_status(report)
    # what the agent then does below its node: a job with an enforced weight
    cg = Cgroups(Layout.from_dict(st.cgroup_layout), fs=fs)
    cg.ensure_parent("cosched/n0")
    cg.create("cosched/n0/job-1")
    cg.set_weight("cosched/n0/job-1", 900)
    assert fs.knob("", "cosched/n0/job-1", "cpu.weight") == "900"
    fs.add_proc("", "cosched/n0/job-1", 4242)
    cg.freeze("cosched/n0/job-1")
    assert cl.down(env) == (True, [])
    assert 4242 in fs.killed
    assert_pristine(env)


def test_v2_cfs_bandwidth_is_cpu_max(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path / "cg")
    env = _env(tmp_path, fs)
    cl.up(config(2, cpus_per_node=0.25), env)
    assert fs.knob("", "cosched/n0", "cpu.max") == "2500 10000"
    cl.down(env)
    assert_pristine(env)


def test_v2_under_systemd_uses_the_delegated_unit(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path / "cg")
    fs.make("", SCOPE)
    fs.delegate(SCOPE)
    # the scope's own root cgroup gets the controllers from systemd
    fs.set_knob("", "", "cgroup.subtree_control", "+cpu +cpuset")
    fs.set_knob("", "system.slice", "cgroup.subtree_control", "+cpu +cpuset")
    fs.add_proc("", SCOPE, 500)  # cosched itself, inside its scope
    env = _env(tmp_path, fs, _systemd(fs, SCOPE))
    st = cl.up(config(2, cpus_per_node=1), env)
    assert st.nodes[0]["cgroup"] == f"{SCOPE}/cosched/n0"
    assert fs.procs("", SCOPE) == [] and fs.procs("", f"{SCOPE}/supervisor") == [500]
    assert fs.knob("", f"{SCOPE}/cosched/n1", "cpuset.cpus.effective") == "1"
    assert f"{SCOPE}/cosched/n0" in st.agents[0].cmd
    assert "delegated" in cl.format_status(cl.status(env, probe=False) or {})
    assert cl.down(env) == (True, [])
    assert not fs.has("", f"{SCOPE}/cosched")
    # and clean finds a cluster below the unit without the state file
    cl.up(config(1), env)
    Path(env.sdir(), "cluster.json").unlink()
    rep = clean_mod.clean(env)
    assert rep.problems == [] and not fs.has("", f"{SCOPE}/cosched"), rep.format()


def test_v2_under_systemd_without_delegation_is_one_line_and_creates_nothing(
    tmp_path: Path,
) -> None:
    fs = fake_v2(tmp_path / "cg")
    fs.make("", "system.slice/ssh.service")
    before = fs.footprint()
    env = _env(tmp_path, fs, _systemd(fs, "system.slice/ssh.service"))
    with pytest.raises(ClusterError, match="Delegate=yes") as err:
        cl.up(config(2), env)
    assert "\n" not in str(err.value)
    assert fs.footprint() == before
    assert env.net.footprint() == {"netns": [], "root_links": []}  # type: ignore[attr-defined]


def test_hybrid_host_v2_with_a_controller_bound_to_v1(tmp_path: Path) -> None:
    fs = fake_hybrid(tmp_path / "cg")
    env = _env(tmp_path, fs)
    with pytest.raises(ClusterError, match=r"cpuset is bound to the v1 hierarchy at .*cpuset"):
        cl.up(config(2, cpus_per_node=1, cgroup="v2"), env)
    assert fs.footprint() == []
    # without a CPU limit v2 works here: freezer and accounting are core
    st = cl.up(config(2, cgroup="v2"), env)
    assert st.cgroup_layout["mode"] == "v2" and fs.has("unified", "cosched/n0/agent")
    assert not fs.has("freezer", "cosched")
    assert "NOT enforced" in cl.format_status(cl.status(env, probe=False) or {})
    assert cl.down(env) == (True, [])
    assert_pristine(env)


def test_hybrid_auto_uses_v1_and_clean_also_sweeps_cgroup2(tmp_path: Path) -> None:
    fs = fake_hybrid(tmp_path / "cg")
    env = _env(tmp_path, fs)
    cl.up(config(1, cgroup="v2"), env)
    Path(env.sdir(), "cluster.json").unlink()
    rep = clean_mod.clean(env)
    assert rep.problems == [] and fs.footprint() == [], rep.format()
    st = cl.up(config(1), env)
    assert st.cgroup_layout["mode"] == "hybrid" and fs.has("freezer", "cosched/n0/agent")
    cl.down(env)
    assert_pristine(env)


def test_no_internal_processes_refused_before_anything(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path / "cg")
    fs.make("", "cosched")
    fs.add_proc("", "cosched", 77)  # someone's process in our inner group
    env = _env(tmp_path, fs)
    with pytest.raises(ClusterError, match="holds processes"):
        cl.up(config(2, cpus_per_node=1), env)
    assert fs.footprint() == [":cosched"]


def test_fake_follows_the_kernel_rules(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path)
    cg = Cgroups(fs.layout(), fs=fs)
    cg.ensure_parent("a/b")
    assert fs.knob("", "a", "cgroup.controllers") == "cpu"
    fs.make("", "a/b/job")
    fs.write(tmp_path / "a/b/job/cgroup.procs", "4")
    with pytest.raises(OSError):  # cpu passed on to a populated child: no process in a/b
        fs.write(tmp_path / "a/b/cgroup.procs", "5")
    fs.make("", "c")
    fs.add_proc("", "c", 6)
    with pytest.raises(CgroupSetupError, match="holds processes"):
        cg.ensure_parent("c")  # refused before writing: the kernel takes +cpu here
    assert fs.knob("", "c", "cgroup.subtree_control") == ""
    with pytest.raises(FileNotFoundError):
        fs.write(tmp_path / "cgroup.subtree_control", "+memory")


def test_fake_threaded_controllers_make_a_thread_root(tmp_path: Path) -> None:
    """cpu is threaded: a group may enable it beside its processes and becomes a thread
    root, whose children take no process (what the kernel did in the v2-only stage)."""
    fs = fake_v2(tmp_path)
    fs.set_knob("", "", "cgroup.subtree_control", "+cpu +hugetlb")
    fs.make("", "g/leaf")
    fs.write(tmp_path / "g/cgroup.procs", "5")
    with pytest.raises(OSError) as busy:  # a domain controller: no internal processes
        fs.set_knob("", "g", "cgroup.subtree_control", "+hugetlb")
    fs.set_knob("", "g", "cgroup.subtree_control", "+cpu")
    assert [fs.knob("", r, "cgroup.type") for r in ("g", "g/leaf")] == [
        "domain threaded",
        "domain invalid",
    ]
    with pytest.raises(OSError) as invalid:
        fs.write(tmp_path / "g/leaf/cgroup.procs", "5")
    assert (busy.value.errno, invalid.value.errno) == (errno.EBUSY, errno.EOPNOTSUPP)


def test_layout_detection_per_controller() -> None:
    mounts = (
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
    )
    lay = parse_layout(mounts, "hugetlb")
    assert lay.mode == "hybrid"
    assert lay.hierarchy("cpu") == lay.hierarchy("cpuacct")
    assert lay.version("freezer") == 2 and lay.version("cpuset") is None
    assert parse_layout(mounts, "hugetlb", "v2").version("cpu") is None
    with pytest.raises(CgroupSetupError, match="no v1 hierarchy"):
        parse_layout("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "cpu", "v1")
    assert Layout.from_dict(lay.to_dict()) == lay
    assert own_cgroup("12:freezer:/x\n0::/system.slice/a.scope\n") == "system.slice/a.scope"


def test_v2_teardown_uses_cgroup_kill(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path)
    cg = Cgroups(fs.layout(), fs=fs)
    cg.ensure_parent("cosched/n0")
    cg.create("cosched/n0/job-1")
    fs.add_proc("", "cosched/n0/job-1", 31)
    cg.freeze("cosched/n0/job-1")

    def no_signals(pid: int, sig: int) -> None:
        raise AssertionError("cgroup.kill should have taken the subtree")

    assert cg.remove_tree("cosched/n0", no_signals) == [31]
    assert fs.killed == [31] and not fs.has("", "cosched/n0")
