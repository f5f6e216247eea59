"""The tests of tests/unit/testbed/cluster/test_rootfs.py that start processes or sockets."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testbed.cluster import rootfs


@pytest.mark.skipif(
    shutil.which("systemctl") is None, reason="systemctl (systemd) is not installed"
)
def test_customise_gives_each_node_its_own_keys_identity_and_no_idle_work(tmp_path: Path) -> None:
    r = tmp_path / "root"
    for d in ("etc/ssh/sshd_config.d", "etc/systemd/system/multi-user.target.wants",
              "lib/systemd/system", "var/cache/apt/archives", "var/lib/dbus"):  # fmt: skip
        (r / d).mkdir(parents=True)
    (r / "etc/ssh/ssh_host_ed25519_key").write_text("secret")
    (r / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (r / "etc/hostname").write_text("builder\n")
    (r / "var/cache/apt/archives/x.deb").write_text("")
    (r / "lib/systemd/system/prometheus.service").write_text(
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n")  # fmt: skip
    os.symlink("/lib/systemd/system/prometheus.service",
               r / "etc/systemd/system/multi-user.target.wants/prometheus.service")  # fmt: skip
    rootfs.customise(str(r))
    assert not list((r / "etc/ssh").glob("ssh_host_*"))
    assert "Include /etc/cosched-node/sshd_config" in (
        r / "etc/ssh/sshd_config.d/00-cosched-node.conf").read_text()  # fmt: skip
    assert (r / "etc/machine-id").read_text() == "" and not (r / "etc/hostname").exists()
    assert not (r / "etc/systemd/system/multi-user.target.wants/prometheus.service").exists()
    assert os.readlink(r / "etc/systemd/system/apt-daily.timer") == "/dev/null"
    assert not (r / "var/cache/apt/archives/x.deb").exists()
    assert (r / "etc/cosched-node").stat().st_mode & 0o777 == 0o700
