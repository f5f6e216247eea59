"""testbed/cluster/rootfs.py: the systemd nodes' Debian tree, its cache key and mirror."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cluster import rootfs

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_mirror_comes_from_the_hosts_apt_sources() -> None:
    assert rootfs.mirror_from_sources([DEB822]) == "http://deb.debian.org/debian"
    one_line = "deb [arch=amd64] http://mirror.example/debian/ bookworm main contrib\n"
    assert rootfs.mirror_from_sources(["# nothing\n", one_line]) == "http://mirror.example/debian"
    assert rootfs.mirror_from_sources(["deb http://x/debian trixie main\n"]) is None
    # the security archive alone is not a mirror for the suite
    assert rootfs.mirror_from_sources([DEB822.split("\n\n")[1]]) is None


def test_the_cache_key_changes_with_what_the_tree_holds() -> None:
    key = rootfs.cache_key()
    assert key.startswith("bookworm-") and key == rootfs.cache_key()
    assert rootfs.cache_key(packages=(*rootfs.PACKAGES, "vim")) != key
    assert rootfs.cache_key(recipe=rootfs.RECIPE + 1) != key
    assert rootfs.cache_key(packages=tuple(reversed(rootfs.PACKAGES))) == key


def test_debootstrap_is_asked_for_a_minimal_tree_with_the_packages() -> None:
    cmd = rootfs.debootstrap_command("/t", "http://m/debian")
    assert cmd[:2] == ["debootstrap", "--variant=minbase"]
    assert cmd[-3:] == ["bookworm", "/t", "http://m/debian"]
    assert set(cmd[2].removeprefix("--include=").split(",")) == set(rootfs.PACKAGES)


def test_mounts_a_failed_build_left_are_found_deepest_first() -> None:
    text = ("proc /c/.build-x/proc proc rw 0 0\nsysfs /c/.build-x/sys sysfs rw 0 0\n"
            "x /c/.build-x/sys/fs/cgroup cgroup2 rw 0 0\nproc /proc proc rw 0 0\n"
            "y /c/.build-xy tmpfs rw 0 0\n")  # fmt: skip
    assert rootfs.mounts_below(text, "/c/.build-x") == [
        "/c/.build-x/sys/fs/cgroup", "/c/.build-x/proc", "/c/.build-x/sys"]  # fmt: skip


def test_a_cached_tree_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    tree = cache / rootfs.cache_key()
    tree.mkdir(parents=True)
    (tree / rootfs.MARKER).write_text('{"build_s": 97.5, "mirror": "http://m"}')
    monkeypatch.setattr(rootfs, "available", lambda: "must not be called")
    got = rootfs.ensure(directory=str(cache), mirror="http://m")
    assert got.path == str(tree) and not got.built_now and got.build_s == 97.5
    assert got.describe().startswith("root file system from the cache in ")


def test_a_tree_without_its_marker_is_rebuilt_and_no_debootstrap_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / rootfs.cache_key() / "etc").mkdir(parents=True)  # an interrupted build
    monkeypatch.setattr(rootfs.shutil, "which", lambda name: None)
    with pytest.raises(rootfs.ClusterError) as e:
        rootfs.ensure(directory=str(cache), mirror="http://m")
    assert "apt-get install debootstrap" in str(e.value) and "\n" not in str(e.value)
