"""The tests of tests/unit/testbed/cluster/test_sshd.py that start processes or sockets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from testbed.cluster import sshd as sshd_mod
from testbed.cluster.sshd import SshPaths
from tests.support.cluster_fakes import HOSTS


def test_write_files_makes_a_private_directory_and_refuses_a_planted_link(tmp_path: Path) -> None:
    if sshd_mod.sshd_available() is not None:
        pytest.skip("ssh-keygen or sshd not installed")
    paths = SshPaths(str(tmp_path))
    sshd_mod.write_files(HOSTS, paths)
    assert stat.S_IMODE(os.stat(paths.dir).st_mode) == 0o700
    for f in (paths.host_key, paths.client_key, paths.authorized_keys, paths.inventory,
              paths.ssh_config, paths.known_hosts, paths.conf("n0")):  # fmt: skip
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    assert sshd_mod.remove_files(paths)
    assert sorted(os.listdir(tmp_path)) == []
    # someone plants ssh -> elsewhere: refused, nothing written through it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, paths.dir)
    with pytest.raises(sshd_mod.ClusterError, match="not a directory of ours"):
        sshd_mod.write_files(HOSTS, paths)
    assert os.listdir(elsewhere) == []
