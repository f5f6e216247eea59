"""``cluster up --ssh``: the pure parts of testbed/cluster/sshd.py (configs, inventory,
ssh_config, known_hosts, StrictModes) and its place in up/down, with fakes."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cluster import clean as clean_mod
from testbed.cluster import cluster as cl
from testbed.cluster import sshd as sshd_mod
from testbed.cluster import state as state_mod
from testbed.cluster.sshd import SshHost, SshPaths
from tests.support.cluster_fakes import HOSTS, assert_pristine, config, make_env

PATHS = SshPaths("/run/cosched")


def _conf(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.split(None, 1)
            out[k] = v
    return out


def test_sshd_config_listens_on_the_control_address_only_and_takes_keys_only() -> None:
    c = _conf(sshd_mod.render_sshd_config(HOSTS[1], PATHS, strict_modes=True))
    assert c["ListenAddress"] == "10.212.0.1:22"
    assert c["HostKey"] == "/run/cosched/ssh/host_ed25519_key"
    assert c["PidFile"] == "/run/cosched/ssh/sshd-n0.pid"
    assert c["AuthorizedKeysFile"] == "/run/cosched/ssh/authorized_keys"
    assert c["PermitRootLogin"] == "prohibit-password"
    assert c["PasswordAuthentication"] == "no"
    assert c["KbdInteractiveAuthentication"] == "no"
    assert c["UsePAM"] == "no"
    assert c["AllowUsers"] == "root"
    assert c["StrictModes"] == "yes"
    assert c["Subsystem"] == "sftp internal-sftp"
    off = _conf(sshd_mod.render_sshd_config(HOSTS[0], PATHS, strict_modes=False))
    assert off["StrictModes"] == "no" and off["ListenAddress"] == "10.212.0.254:22"


def test_strict_modes_only_where_every_directory_above_is_roots_and_not_shared() -> None:
    def fake(modes: dict[str, tuple[int, int]]) -> Any:
        def lstat(p: str) -> os.stat_result:
            if p not in modes:
                raise FileNotFoundError(p)
            uid, mode = modes[p]
            return os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, 0, 0, 0, 0, 0))

        return lstat

    run = {"/": (0, 0o755), "/run": (0, 0o755), "/run/cosched": (0, 0o700)}
    assert sshd_mod.path_is_safe("/run/cosched", fake(run))
    tmp = {"/": (0, 0o755), "/tmp": (0, 0o1777), "/tmp/x": (0, 0o700)}
    assert not sshd_mod.path_is_safe("/tmp/x", fake(tmp))
    other = dict(run, **{"/run/cosched": (1000, 0o700)})
    assert not sshd_mod.path_is_safe("/run/cosched", fake(other))
    assert not sshd_mod.path_is_safe("/run/missing", fake(run))


def test_known_hosts_names_every_address_with_the_one_host_key() -> None:
    text = sshd_mod.render_known_hosts(HOSTS, "ssh-ed25519 AAAAC3Nz cosched-cluster-host\n")
    assert text.splitlines() == [
        "10.212.0.254,head ssh-ed25519 AAAAC3Nz",
        "10.212.0.1,n0 ssh-ed25519 AAAAC3Nz",
        "10.212.0.2,n1 ssh-ed25519 AAAAC3Nz",
    ]


def test_ssh_config_lets_ssh_F_reach_each_node_by_name() -> None:
    text = sshd_mod.render_ssh_config(HOSTS, PATHS)
    blocks = {}
    for chunk in ("\n" + text).split("\nHost ")[1:]:
        lines = chunk.strip().splitlines()
        blocks[lines[0]] = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines[1:]}
    assert set(blocks) == {"head", "n0", "n1"}
    n0 = blocks["n0"]
    assert n0["HostName"] == "10.212.0.1" and n0["User"] == "root" and n0["Port"] == "22"
    assert n0["IdentityFile"] == "/run/cosched/ssh/id_ed25519"
    assert n0["UserKnownHostsFile"] == "/run/cosched/ssh/known_hosts"
    assert n0["StrictHostKeyChecking"] == "yes" and n0["BatchMode"] == "yes"


def test_inventory_has_the_groups_and_variables_the_roles_use() -> None:
    inv = yaml.safe_load(sshd_mod.render_inventory(HOSTS, PATHS))
    top = inv["all"]
    v = top["vars"]
    assert v["ansible_user"] == "root"
    assert v["ansible_python_interpreter"] == "/usr/bin/python3"
    assert v["cosched_local_cluster"] is True
    assert v["ansible_ssh_private_key_file"] == "/run/cosched/ssh/id_ed25519"
    assert "UserKnownHostsFile=/run/cosched/ssh/known_hosts" in v["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in v["ansible_ssh_common_args"]
    kids = top["children"]
    assert set(kids) == {"controller", "agents", "monitor"}
    head = kids["controller"]["hosts"]["head"]
    assert head == {
        "ansible_host": "10.212.0.254",
        "cosched_control_address": "10.212.0.254",
        "cosched_node_name": "head",
    }
    assert list(kids["monitor"]["hosts"]) == ["head"]
    n1 = kids["agents"]["hosts"]["n1"]
    assert n1 == {
        "ansible_host": "10.212.0.2",
        "cosched_control_address": "10.212.0.2",
        "cosched_data_address": "10.211.0.2",
        "cosched_node_name": "n1",
    }


def test_hosts_from_state_put_the_head_first() -> None:
    nodes = [{"name": "n0", "ctl_ip": "10.212.0.1", "netns": "cosched-n0", "data_ip": "10.211.0.1"}]
    assert sshd_mod.hosts_from_state(nodes, "10.212.0.254") == HOSTS[:2]


def test_ssh_state_round_trips_through_the_ledger() -> None:
    s = sshd_mod.SshState("/d/ssh", "/d/inventory.yml", "/d/ssh_config", True)
    s.sshds = [sshd_mod.SshdRecord("n0", 12, 3.5, ["sshd"], "/d/ssh/sshd-n0.log")]
    assert sshd_mod.SshState.from_dict(s.to_dict()) == s


class FakeSsh:
    def __init__(self, fail: bool = False) -> None:
        self.up_calls: list[list[str]] = []
        self.down_calls = 0
        self.fail = fail
        self.procs: dict[str, list[str]] = {}

    def up(self, st: sshd_mod.SshState, hosts: list[SshHost], paths: SshPaths,
           procs: Any, save: Any) -> None:  # fmt: skip
        self.up_calls.append([h.name for h in hosts])
        self.procs = {h.name: procs(h) for h in hosts}
        st.sshds = [sshd_mod.SshdRecord(h.name, 1, 1.0, [], "") for h in hosts]
        save()
        if self.fail:
            raise RuntimeError("sshd on 10.212.0.2 exited with status 255")

    def down(self, st: sshd_mod.SshState) -> list[str]:
        self.down_calls += 1
        return []


def _env(tmp_path: Path, ssh: FakeSsh) -> cl.Env:
    env = make_env(tmp_path)
    env.ssh_up = ssh.up
    env.ssh_down = ssh.down
    env.sshd_available = lambda: None
    return env


def test_up_with_ssh_records_it_and_down_stops_it(tmp_path: Path) -> None:
    ssh = FakeSsh()
    env = _env(tmp_path, ssh)
    st = cl.up(config(2, ssh=True, start_agents=False), env)
    assert ssh.up_calls == [["head", "n0", "n1"]]
    assert st.ssh is not None and st.ssh["inventory"] == str(tmp_path / "state/inventory.yml")
    # the nodes' sshd go into their agent leaf; the head's stays where it is
    assert ssh.procs["head"] == [] and all("n0/agent" in p for p in ssh.procs["n0"])
    report = cl.status(env, probe=False)
    assert report is not None and report["ssh"]["inventory"] == st.ssh["inventory"]
    assert "ssh: yes" in cl.format_status(report)
    assert cl.down(env) == (True, [])
    assert ssh.down_calls == 1
    assert_pristine(env)


def test_status_says_no_ssh_without_it(tmp_path: Path) -> None:
    env = _env(tmp_path, FakeSsh())
    cl.up(config(1, start_agents=False), env)
    report = cl.status(env, probe=False)
    assert report is not None and report["ssh"] is None
    assert "ssh: no" in cl.format_status(report)
    cl.down(env)


def test_a_failing_sshd_rolls_everything_back(tmp_path: Path) -> None:
    ssh = FakeSsh(fail=True)
    env = _env(tmp_path, ssh)
    with pytest.raises(cl.ClusterError, match=r"exited with status 255.*rolled back"):
        cl.up(config(2, ssh=True, start_agents=False), env)
    assert ssh.down_calls == 1
    assert_pristine(env)


def test_up_refuses_ssh_without_sshd_before_making_anything(tmp_path: Path) -> None:
    env = _env(tmp_path, FakeSsh())
    env.sshd_available = lambda: "/usr/sbin/sshd is missing — apt-get install openssh-server"
    with pytest.raises(cl.ClusterError, match=r"--ssh needs sshd.*openssh-server"):
        cl.up(config(1, ssh=True), env)
    assert_pristine(env)


def test_clean_removes_ssh_files_a_crash_left_without_a_state(tmp_path: Path) -> None:
    env = _env(tmp_path, FakeSsh())
    paths = SshPaths(env.sdir())
    os.makedirs(paths.dir)
    for f in (paths.inventory, paths.ssh_config, paths.conf("n0")):
        Path(f).write_text("x")
    Path(paths.pidfile("n0")).write_text("999999999\n")  # no such process: not killed
    rep = clean_mod.clean(env)
    assert paths.inventory in rep.removed and paths.dir in rep.removed
    assert not os.path.exists(paths.dir) and not rep.killed
    assert not os.path.exists(state_mod.state_path(env.sdir()))


def test_remove_files_tolerates_a_pidfile_its_sshd_unlinks_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race CI hit: `clean` sent SIGTERM, and the dying sshd removed its pidfile
    # while rmtree walked the directory.
    paths = SshPaths(str(tmp_path))
    os.makedirs(paths.dir)
    pidfile = os.path.join(paths.dir, "sshd-head.pid")
    Path(pidfile).write_text("1\n")
    Path(paths.dir, "authorized_keys").write_text("")
    real_unlink = os.unlink

    def racing_unlink(path: Any, *args: Any, **kw: Any) -> None:
        if str(path).endswith("sshd-head.pid"):
            real_unlink(pidfile)  # the sshd got there first
        real_unlink(path, *args, **kw)

    monkeypatch.setattr(os, "unlink", racing_unlink)
    assert paths.dir in sshd_mod.remove_files(paths)
    assert not os.path.lexists(paths.dir)


def test_remove_files_still_reports_other_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = SshPaths(str(tmp_path))
    os.makedirs(paths.dir)
    Path(paths.dir, "authorized_keys").write_text("")

    def refusing_unlink(path: Any, *args: Any, **kw: Any) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "unlink", refusing_unlink)
    with pytest.raises(PermissionError):
        sshd_mod.remove_files(paths)
