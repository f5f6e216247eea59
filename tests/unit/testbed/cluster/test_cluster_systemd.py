"""``cluster up --systemd`` against the fakes: the head, the node groups systemd-nspawn
boots in, the inventory, the refusals, teardown and rollback (no container runs here;
tests/integration/test_deploy_systemd.py boots them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from common.cgroups import Cgroups, Layout
from common.cgroups.delegation import release_base
from common.cgroups.fake import fake_hybrid
from testbed.cluster import cluster as cl
from testbed.cluster.errors import ClusterError
from tests.support.cluster_fakes import (
    FakeNodes,
    assert_pristine,
    config,
    sd_config,
    systemd_env,
    v2_host,
)


def test_a_hybrid_host_is_refused_in_one_line_that_says_how_to_switch(tmp_path: Path) -> None:
    fs = fake_hybrid(tmp_path / "cg")
    env = systemd_env(tmp_path, fs, FakeNodes())
    with pytest.raises(ClusterError) as e:
        cl.up(sd_config(2), env)
    msg = str(e.value)
    assert "\n" not in msg and "cosched host cgroups v2-only" in msg
    assert "cpu at " in msg and "v1 hierarchies hold" in msg
    assert_pristine(env)


def test_no_nspawn_and_agents_from_here_are_refused(tmp_path: Path) -> None:
    env = systemd_env(tmp_path, v2_host(tmp_path), FakeNodes())
    env.nspawn_available = lambda: (
        "systemd-nspawn is missing — install it: apt-get install systemd-container"
    )
    with pytest.raises(ClusterError, match="apt-get install systemd-container"):
        cl.up(sd_config(2), env)
    with pytest.raises(ClusterError, match="get their agents from the playbook"):
        cl.up(config(2, systemd=True, ssh=True), env)
    assert_pristine(env)


def test_release_base_lets_systemd_start_the_agent_again_beside_its_jobs(tmp_path: Path) -> None:
    """The restart of a delegated agent with jobs left (KillMode=process) failed with
    219/CGROUP on a systemd node: its unit's cgroup passed cpu on, so the new main
    process could not be put there. release_base (the unit's ExecStopPost) undoes that."""
    fs = v2_host(tmp_path)
    unit = "system.slice/cosched-agent.service"
    fs.make("", unit)
    fs.delegate(unit)
    lay = Layout.from_dict(fs.layout("v2").to_dict()).with_base(unit, delegated=True)
    cg = Cgroups(lay, fs=fs)
    fs.set_knob("", "", "cgroup.subtree_control", "+cpu")
    fs.set_knob("", "system.slice", "cgroup.subtree_control", "+cpu")
    cg.enter_leaf(unit, "supervisor", 100)  # the agent, as it starts
    cg.ensure_parent(f"{unit}/cosched/n0")
    cg.create(f"{unit}/cosched/n0/job-1")
    cg.add_pid(f"{unit}/cosched/n0/job-1", 200)
    fs.exit_pid(100)  # `systemctl stop`: the agent goes, its job stays
    with pytest.raises(OSError):  # what systemd ran into: EBUSY
        fs.write(f"{fs.root}/{unit}/cgroup.procs", "300")
    changed = release_base(cg)
    assert changed[-1] == unit and f"{unit}/cosched" in changed
    fs.write(f"{fs.root}/{unit}/cgroup.procs", "300")  # the new agent's process
    assert 300 in fs.procs("", unit) and 200 in fs.procs("", f"{unit}/cosched/n0/job-1")
    assert release_base(Cgroups(fs.layout("v2"), fs=fs)) == []  # no delegated base: nothing


def test_clean_without_a_state_file_takes_the_nodes_and_nspawns_groups(tmp_path: Path) -> None:
    """After a crash: the node groups (head included) with nspawn's supervisor and payload
    groups and the container's own groups below, their processes killed by membership."""
    from testbed.cluster import clean as clean_mod

    fs = v2_host(tmp_path)
    env = systemd_env(tmp_path, fs, FakeNodes())
    for n in ("head", "n0"):
        fs.make("", f"cosched/{n}/supervisor")
        fs.make("", f"cosched/{n}/payload/system.slice/ssh.service")
    fs.add_proc("", "cosched/n0/supervisor", 4001)  # systemd-nspawn
    fs.add_proc("", "cosched/n0/payload/system.slice/ssh.service", 4002)  # sshd in the node
    fs.make("", "cosched/other")  # not a node's: left alone
    rep = clean_mod.clean(env)
    assert not rep.problems, rep.format()
    assert {4001, 4002} <= set(rep.killed)
    assert not fs.has("", "cosched/head") and not fs.has("", "cosched/n0")
    assert fs.has("", "cosched/other")


def test_the_agent_unit_gives_the_controllers_back_after_every_exit() -> None:
    import jinja2

    from tests.support.ansible import ANSIBLE_DIR

    src = (ANSIBLE_DIR / "roles/agent/templates/cosched-agent.service.j2").read_text()
    unit = jinja2.Template(src).render(
        ansible_managed="x", cosched_node_name="n0", cosched_config_dir="/etc/c",
        agent_daemon_name="agent-n0", cosched_venv_python="/v/bin/python",
        cosched_agent_fifo_priority=10, cosched_agent_kill_mode="process",
        cosched_agent_backend="auto")  # fmt: skip
    lines = [ln for ln in unit.splitlines() if ln and not ln.startswith("#")]
    assert "Delegate=yes" in lines and "KillMode=process" in lines
    # ExecStopPost (run in the unit's .control leaf), not ExecStartPre (in the unit's
    # own cgroup, refused while the controllers are enabled there)
    assert "ExecStopPost=/v/bin/python -P -m agent.release --backend auto" in lines
    assert not any(ln.startswith("ExecStartPre") for ln in lines)


@pytest.mark.skipif(os.path.isdir("/run/systemd/system"), reason="a host run by systemd")
def test_agent_release_does_nothing_outside_a_delegated_unit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent import release

    fs = v2_host(tmp_path)  # cgroup2 passing cpu on, but no systemd, no delegated base
    fs.set_knob("", "", "cgroup.subtree_control", "+cpu")
    Cgroups(fs.layout("v2"), fs=fs).ensure_parent("cosched/n0")
    asked: list[str] = []

    def open_cgroups(backend: str) -> Cgroups:
        asked.append(backend)
        return Cgroups(fs.layout("v2"), fs=fs)

    monkeypatch.setattr(release, "open_cgroups", open_cgroups)
    assert release.main([]) == 0 and asked == ["auto"]
    assert fs.knob("", "cosched", "cgroup.subtree_control").split() == ["cpu"]  # untouched
