"""cgroup drivers against the fake cgroupfs (no root, no kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cgroups import FreezeError, V1Driver, V2Driver, shares_to_weight, weight_to_shares
from common.cgroups.fake import fake_v1, fake_v2
from common.cgroups.layout import parse_layout

# ---- weight <-> shares ------------------------------------------------------


@pytest.mark.parametrize(
    ("weight", "shares"),
    [(100, 1024), (1, 10), (50, 512), (900, 9216), (10000, 102400), (200, 2048)],
)
def test_weight_to_shares(weight: int, shares: int) -> None:
    assert weight_to_shares(weight) == shares


@pytest.mark.parametrize(
    ("shares", "weight"),
    [(1024, 100), (2, 1), (512, 50), (9216, 900), (102400, 10000), (262144, 10000), (0, 1)],
)
def test_shares_to_weight(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight


def test_weight_clamps() -> None:
    assert weight_to_shares(0) == 10  # clamped to weight 1
    assert weight_to_shares(-5) >= 2
    assert weight_to_shares(10**9) == 102400


def test_roundtrip_every_weight() -> None:
    for w in range(1, 10001):
        s = weight_to_shares(w)
        assert s >= 2
        assert shares_to_weight(s) == w


# ---- v1 --------------------------------------------------------------------


@pytest.fixture
def v1(tmp_path: Path) -> tuple[V1Driver, Path]:
    fs = fake_v1(tmp_path)
    drv = V1Driver(tmp_path, fs=fs, freeze_timeout=0.2, poll_interval=1e-4)
    drv.ensure_parent("cosched/n0")
    return drv, tmp_path


def test_v1_create_in_every_hierarchy(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    drv.create("cosched/n0/job-1")
    for h in ("freezer", "cpu", "cpuacct"):
        assert (root / h / "cosched/n0/job-1").is_dir()
    assert not (root / "cpuset/cosched/n0").exists()  # no cpuset parent -> not used
    assert drv.exists("cosched/n0/job-1")
    assert drv.children("cosched/n0") == ["job-1"]


def test_v1_cpuset_child_inherits(tmp_path: Path) -> None:
    fs = fake_v1(tmp_path)
    drv = V1Driver(tmp_path, fs=fs)
    for comp in ("cosched", "cosched/n0"):
        fs.mkdir(tmp_path / "cpuset" / comp)
        fs.write(tmp_path / "cpuset" / comp / "cpuset.cpus", "1")
        fs.write(tmp_path / "cpuset" / comp / "cpuset.mems", "0")
    drv.ensure_parent("cosched/n0")
    drv.create("cosched/n0/job-1")
    assert (tmp_path / "cpuset/cosched/n0/job-1/cpuset.cpus").read_text().strip() == "1"
    drv.add_pid("cosched/n0/job-1", 4242)
    assert "4242" in (tmp_path / "cpuset/cosched/n0/job-1/cgroup.procs").read_text()
    assert drv.cpu_capacity("cosched/n0") == 1.0


def test_v1_pids_weight_usage(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    cg = "cosched/n0/job-1"
    drv.create(cg)
    drv.add_pid(cg, 11)
    drv.add_pid(cg, 12)
    assert drv.pids(cg) == [11, 12]
    assert "12" in (root / "cpu" / cg / "cgroup.procs").read_text().split()
    drv.set_weight(cg, 900)
    assert (root / "cpu" / cg / "cpu.shares").read_text().strip() == "9216"
    assert drv.get_weight(cg) == 900
    drv.fs.set_usage(cg, 123456789)  # type: ignore[attr-defined]
    assert drv.cpu_usage_ns(cg) == 123456789


def test_v1_freeze_polls_until_frozen(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    cg = "cosched/n0/job-1"
    drv.create(cg)
    drv.fs.freezing_reads = 3  # type: ignore[attr-defined]
    lat = drv.freeze(cg)
    assert lat >= 0
    assert drv.is_frozen(cg)
    assert drv.thaw(cg) >= 0
    assert (root / "freezer" / cg / "freezer.state").read_text().strip() == "THAWED"


def test_v1_freeze_timeout_thaws_back(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    a, b = "cosched/n0/job-a", "cosched/n0/job-b"
    drv.create(a)
    drv.create(b)
    drv.fs.stuck.add(root / "freezer" / b)  # type: ignore[attr-defined]
    with pytest.raises(FreezeError) as err:
        drv.freeze_many([a, b])
    assert "job-b" in str(err.value)
    assert err.value.failed == [b]
    assert a in err.value.done
    assert (root / "freezer" / b / "freezer.state").read_text().strip() == "THAWED"
    assert drv.is_frozen(a)


def test_v1_remove(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    cg = "cosched/n0/job-1"
    drv.create(cg)
    drv.remove(cg)
    for h in ("freezer", "cpu", "cpuacct"):
        assert not (root / h / cg).exists()
    drv.remove(cg)  # idempotent


def test_bad_paths_refused(v1: tuple[V1Driver, Path]) -> None:
    drv, _ = v1
    from common.cgroups import CgroupError

    for bad in ("../etc", "cosched/../../x", "", "/"):
        with pytest.raises(CgroupError):
            drv.create(bad)


def test_v1_kill_all_thaws_first(
    v1: tuple[V1Driver, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    drv, _ = v1
    cg = "cosched/n0/job-1"
    drv.create(cg)
    drv.add_pid(cg, 99999991)
    drv.freeze(cg)
    killed: list[int] = []

    def fake_kill(pid: int, sig: int) -> None:
        assert drv.is_thawed(cg)  # SIGKILL only after the thaw
        killed.append(pid)
        drv.fs.exit_pid(pid)  # type: ignore[attr-defined]

    monkeypatch.setattr("common.cgroups.driver.os.kill", fake_kill)
    drv.kill_all(cg)
    assert killed == [99999991]
    assert drv.pids(cg) == []


# ---- v2 --------------------------------------------------------------------


def test_v2_with_cpu_weight(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path, cpu_weight=True)
    drv = V2Driver(tmp_path, fs=fs, freeze_timeout=0.2, poll_interval=1e-4)
    drv.ensure_parent("cosched/n0")
    assert "cpu" in (tmp_path / "cgroup.subtree_control").read_text()
    cg = "cosched/n0/job-1"
    drv.create(cg)
    assert drv.capabilities.weights_enforced
    drv.set_weight(cg, 900)
    assert (tmp_path / cg / "cpu.weight").read_text().strip() == "900"
    assert drv.get_weight(cg) == 900
    drv.add_pid(cg, 7)
    assert drv.pids(cg) == [7]
    drv.freeze(cg)
    assert "frozen 1" in (tmp_path / cg / "cgroup.events").read_text()
    assert drv.is_frozen(cg)
    drv.thaw(cg)
    assert drv.is_thawed(cg)
    fs.set_usage(cg, 5_000_000)
    assert drv.cpu_usage_ns(cg) == 5_000_000
    drv.kill_all(cg)
    assert fs.killed == [7]
    drv.remove(cg)
    assert not (tmp_path / cg).exists()


def test_v2_without_cpu_weight_records_only(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path, cpu_weight=False)
    drv = V2Driver(tmp_path, fs=fs)
    drv.ensure_parent("cosched/n0")
    cg = "cosched/n0/job-1"
    drv.create(cg)
    assert not drv.capabilities.weights_enforced
    drv.set_weight(cg, 300)
    assert drv.get_weight(cg) == 300
    assert not (tmp_path / cg / "cpu.weight").exists()


def test_v2_freeze_timeout(tmp_path: Path) -> None:
    fs = fake_v2(tmp_path)
    drv = V2Driver(tmp_path, fs=fs, freeze_timeout=0.05, poll_interval=1e-4)
    drv.ensure_parent("cosched/n0")
    cg = "cosched/n0/job-1"
    drv.create(cg)
    fs.stuck.add(tmp_path / cg)
    with pytest.raises(FreezeError):
        drv.freeze(cg)
    assert (tmp_path / cg / "cgroup.freeze").read_text().strip() == "0"


# ---- detection ---------------------------------------------------------------

V1_MOUNTS = """\
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,nosuid,freezer 0 0
"""
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nsdelegate 0 0\n"


def test_detect() -> None:
    hybrid = parse_layout(V1_MOUNTS, "hugetlb")
    assert hybrid.mode == "hybrid"
    assert hybrid.hierarchy("freezer").mount == "/sys/fs/cgroup/freezer"  # type: ignore[union-attr]
    assert hybrid.version("cpuacct") == 2  # not in v1 here: cpu.stat of cgroup2
    d = parse_layout(V2_MOUNTS, "cpuset cpu io memory hugetlb pids")
    assert d.mode == "v2"
    assert {r: h.mount for r, h in d.controllers.items()} == dict.fromkeys(
        ("freezer", "cpu", "cpuacct", "cpuset", "blkio"), "/sys/fs/cgroup"
    )  # blkio: cgroup2's io, offered here
    assert "blkio" not in parse_layout(V2_MOUNTS, "cpuset cpu").controllers  # optional


def test_v1_freeze_anchor(v1: tuple[V1Driver, Path]) -> None:
    drv, root = v1
    drv.pin_freezer("cosched/n0")
    anchor = root / "freezer/cosched/n0/freeze-anchor"
    assert (anchor / "freezer.state").read_text().strip() == "FROZEN"
    assert not (root / "cpu/cosched/n0/freeze-anchor").exists()
    drv.unpin_freezer("cosched/n0")
    assert not anchor.exists()
