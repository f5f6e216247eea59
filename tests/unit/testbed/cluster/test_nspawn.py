"""testbed/cluster/nspawn.py: the systemd nodes' command line and files (no container)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from testbed.cluster import nspawn

SPEC = nspawn.NodeSpec("n0", "cosched-n0", "10.212.0.1", "/s/ssh/node-n0")


def test_the_node_boots_in_its_namespace_with_a_pure_cgroup2_view() -> None:
    cmd = nspawn.nspawn_command(SPEC, "/cache/tree", "/sys/fs/cgroup/unified", ["/work/wt"])
    # a private mount namespace where the cgroup2 mount is /sys/fs/cgroup, then nspawn
    # exec'd by the shell (same PID as the one recorded)
    assert cmd[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert cmd[5:9] == ["/bin/sh", "-c", 'mount --bind "$0" /sys/fs/cgroup && exec "$@"',
                        "/sys/fs/cgroup/unified"]  # fmt: skip
    ns = cmd[9:]
    assert ns[0] == "systemd-nspawn" and "--boot" in ns
    for flag in ("--directory=/cache/tree", "--volatile=overlay", "--machine=n0",
                 "--register=no", "--keep-unit",
                 "--network-namespace-path=/run/netns/cosched-n0",
                 "--bind-ro=/s/ssh/node-n0:/etc/cosched-node",
                 "--bind-ro=/s/ssh/node-n0/hostname:/etc/hostname",
                 "--bind-ro=/work/wt"):  # fmt: skip
        assert flag in ns, flag


def test_software_binds_cover_the_checkout_venv_and_interpreter_but_never_usr() -> None:
    assert nspawn.software_binds("/work/wt", "/work/wt/.venv", "/root/.pyenv/versions/3.11.7") == [
        "/work/wt", "/root/.pyenv/versions/3.11.7"]  # fmt: skip
    # a Debian interpreter: the node has its own /usr (the same bookworm python3)
    assert nspawn.software_binds("/src/cosched", "/opt/venv", "/usr") == [
        "/opt/venv", "/src/cosched"]  # fmt: skip


def test_the_nodes_sshd_listens_on_its_control_address_with_the_clusters_keys() -> None:
    conf = nspawn.render_node_sshd(SPEC)
    assert "ListenAddress 10.212.0.1:22" in conf
    assert "HostKey /etc/cosched-node/host_ed25519_key" in conf
    assert "AuthorizedKeysFile /etc/cosched-node/authorized_keys" in conf
    assert "PasswordAuthentication no" in conf and "AllowUsers root" in conf


def test_the_container_init_is_pid_1_of_its_own_namespace() -> None:
    assert nspawn.is_container_init("Name:\tsystemd\nNSpid:\t4242\t1\n")
    assert not nspawn.is_container_init("Name:\tsystemd\nNSpid:\t4242\t57\n")
    assert not nspawn.is_container_init("Name:\tsystemd\nNSpid:\t1\n")  # the host's own
    # nspawn's own child is PID 1 of the namespace before it execs systemd
    assert not nspawn.is_container_init("Name:\tsystemd-nspawn\nNSpid:\t4242\t1\n")


def test_node_files_are_private(tmp_path: Path) -> None:
    host_key = tmp_path / "hk"
    host_key.write_text("KEY")
    spec = nspawn.NodeSpec("n1", "cosched-n1", "10.212.0.2", str(tmp_path / "node-n1"))
    nspawn.write_node_files(spec, str(host_key), "ssh-ed25519 AAAA client\n")
    d = Path(spec.node_dir)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert (d / "hostname").read_text() == "n1\n"
    assert stat.S_IMODE((d / "host_ed25519_key").stat().st_mode) == 0o600
    assert (d / "authorized_keys").read_text() == "ssh-ed25519 AAAA client\n"
    assert "10.212.0.2:22" in (d / "sshd_config").read_text()


def test_run_dirs_made_by_up_go_with_what_a_killed_nspawn_left(tmp_path: Path) -> None:
    made = tmp_path / "systemd" / "nspawn"
    (made / "locks").mkdir(parents=True)
    (made / "locks" / "inode-65024:1597463").write_text("")
    (made / "propagate" / "n0").mkdir(parents=True)
    nspawn.remove_run_dirs([str(tmp_path / "systemd"), str(made)])
    assert not (tmp_path / "systemd").exists()
    assert nspawn.missing_run_dirs((str(tmp_path), str(tmp_path / "nope"))) == [
        str(tmp_path / "nope")]  # fmt: skip


def test_stop_sends_sigterm_twice_then_sigkill_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[int, int]] = []
    alive = {10: True, 11: True}
    monkeypatch.setattr(nspawn, "same_process", lambda pid, start: alive.get(pid, False))
    monkeypatch.setattr(nspawn.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(nspawn.os, "waitpid", lambda pid, flags: (0, 0))

    def sleep(_s: float) -> None:
        alive[10] = False  # n0 shuts down in order; n1 hangs

    rec = nspawn.ContainerRecord
    recs = [rec("n0", 10, 1.0, "cosched/n0", "/l", state="running"),
            rec("n1", 11, 1.0, "cosched/n1", "/l", state="degraded")]  # fmt: skip
    killed = nspawn.stop(recs, timeout_s=0.05, sleep=sleep)
    # both get the halt request; n1, still there halfway, a second SIGTERM, then SIGKILL
    assert sent == [(10, 15), (11, 15), (11, 15), (11, 9)]
    assert len(killed) == 1 and killed[0].startswith("n1: systemd-nspawn (pid 11) still ran")
    # a node still booting gets both at once (its systemd may not handle the first yet)
    sent.clear()
    alive[12] = True
    nspawn.stop([nspawn.ContainerRecord("n2", 12, 1.0, "cosched/n2", "/l")], 0.05, lambda s: None)
    assert sent[:2] == [(12, 15), (12, 15)]
