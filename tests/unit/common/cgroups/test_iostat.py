"""A cgroup's block I/O statistics (common/cgroups/iostat.py), v1 and cgroup2: parsing,
and reading them through the driver on the fake kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cgroups import Cgroups
from common.cgroups.errors import CgroupError
from common.cgroups.fake import V1_HIERARCHIES, FakeCgroupFS
from common.cgroups.iostat import IoBytes, parse_v1, parse_v2, read_io_bytes
from common.cgroups.layout import RESOURCES, Layout

V1 = """254:0 Read 8192
254:0 Write 4194304
254:0 Sync 4194304
254:0 Async 8192
254:0 Discard 0
254:0 Total 4202496
253:0 Read 100
253:0 Write 0
253:0 Sync 0
253:0 Async 100
253:0 Discard 0
253:0 Total 100
Total 4202596
"""

V2 = """254:0 rbytes=8192 wbytes=4194304 rios=2 wios=64 dbytes=0 dios=0
253:0 rbytes=100 wbytes=0 rios=1 wios=0 dbytes=0 dios=0
"""


def test_v1_and_v2_sum_reads_and_writes_over_the_devices() -> None:
    assert parse_v1(V1) == IoBytes(8292, 4194304)
    assert parse_v2(V2) == IoBytes(8292, 4194304)
    assert parse_v1("Total 0\n") == IoBytes() == parse_v2("")
    assert (IoBytes(10, 20) - IoBytes(4, 5)).total == 21


def test_a_mangled_file_is_one_line() -> None:
    with pytest.raises(CgroupError, match="unreadable line"):
        parse_v1("254:0 Write lots\n")
    with pytest.raises(CgroupError, match="unreadable field 'wbytes=x'"):
        parse_v2("254:0 rbytes=1 wbytes=x\n")


def test_read_picks_the_file_the_group_has(tmp_path: Path) -> None:
    (tmp_path / "blkio.throttle.io_service_bytes").write_text(V1)
    assert read_io_bytes(str(tmp_path)).write == 4194304
    (tmp_path / "io.stat").write_text("254:0 rbytes=1 wbytes=2\n")
    assert read_io_bytes(str(tmp_path)) == IoBytes(1, 2)
    with pytest.raises(CgroupError) as err:
        read_io_bytes(str(tmp_path / "none"))
    assert "no block I/O statistics" in str(err.value) and "\n" not in str(err.value)


# ---- through the driver, on the fake kernel ------------------------------------------------
def _v1_with_blkio(tmp_path: Path) -> tuple[Cgroups, FakeCgroupFS]:
    fs = FakeCgroupFS(tmp_path, kind="v1", v1=(*V1_HIERARCHIES, "blkio")).build()
    return Cgroups(Layout.v1_at(str(tmp_path), (*RESOURCES, "blkio")), fs=fs), fs


def test_v1_counts_only_once_the_queues_are_set_up(tmp_path: Path) -> None:
    cg, fs = _v1_with_blkio(tmp_path)
    cg.ensure_parent("cosched/n0")
    cg.create("cosched/n0/job-1")
    assert fs.has("blkio", "cosched/n0/job-1")  # made in the blkio hierarchy too
    fs.charge_io("blkio", "cosched/n0/job-1", 4096, 8192)
    assert cg.io_bytes("cosched/n0/job-1") == IoBytes(0, 0)  # the kernel's rule (iostat.py)
    disks = tmp_path / "sys-block"
    (disks / "vda").mkdir(parents=True)
    (disks / "vda" / "dev").write_text("254:0\n")
    cg._io.sys_block = str(disks)  # type: ignore[union-attr]
    assert cg.io_accounting("cosched/n0") is None
    assert fs.knob("blkio", "cosched/n0", "blkio.throttle.read_bps_device") == ""  # no limit
    fs.charge_io("blkio", "cosched/n0/job-1", 4096, 8192)
    assert cg.io_bytes("cosched/n0/job-1") == IoBytes(4096, 8192)


def test_v2_enables_io_down_to_the_node(tmp_path: Path) -> None:
    fs = FakeCgroupFS(tmp_path, kind="v2", v2_controllers="cpu cpuset io").build()
    cg = Cgroups(fs.layout("v2"), fs=fs)
    cg.ensure_parent("cosched/n0")
    assert cg.io_accounting("cosched/n0") is None
    assert "io" in fs.knob("", "cosched/n0", "cgroup.subtree_control").split()
    cg.create("cosched/n0/job-1")
    fs.charge_io("", "cosched/n0/job-1", 1 << 20, 0)
    assert cg.io_bytes("cosched/n0/job-1") == IoBytes(1 << 20, 0)


def test_no_io_controller_is_one_line_not_a_failure(tmp_path: Path) -> None:
    fs = FakeCgroupFS(tmp_path, kind="hybrid", v2_controllers="hugetlb").build()
    cg = Cgroups(fs.layout(), fs=fs)
    why = cg.io_accounting("cosched/n0")
    assert why is not None and "offers no io" in why and "\n" not in why
    with pytest.raises(CgroupError, match="no block I/O accounting"):
        cg.io_bytes("cosched/n0/job-1")


def test_v2_io_refused_below_a_group_with_processes(tmp_path: Path) -> None:
    fs = FakeCgroupFS(tmp_path, kind="v2", v2_controllers="io").build()
    cg = Cgroups(fs.layout("v2"), fs=fs)
    cg.ensure_parent("cosched/n0", ())
    fs.add_proc("", "cosched/n0", 4242)
    why = cg.io_accounting("cosched/n0")
    assert why is not None and "holds processes" in why


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_a_job_group_gets_its_block_groups_when_made(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel makes a group's blkg at its first bio only best effort; else that I/O
    is charged to the parent (iostat.py). A "no limit" rule written at creation makes it."""
    if kind == "v1":
        fs = FakeCgroupFS(tmp_path / "fs", kind="v1", v1=(*V1_HIERARCHIES, "blkio")).build()
        cg = Cgroups(Layout.v1_at(str(fs.root), fs.v1_hierarchies), fs=fs)
        rule, value = "blkio.throttle.read_bps_device", f"254:0 {2**64 - 1}"
    else:
        fs = FakeCgroupFS(tmp_path / "fs", kind="v2", v2_controllers="cpu cpuset io").build()
        cg = Cgroups(fs.layout("v2"), fs=fs)
        rule, value = "io.max", "254:0 rbps=max"
    disks = tmp_path / "sys-block"
    (disks / "vda").mkdir(parents=True)
    (disks / "vda" / "dev").write_text("254:0\n")
    cg._io.sys_block = str(disks)  # type: ignore[union-attr]
    written: list[tuple[str, str]] = []
    real_write = fs.write

    def spy(path: Path | str, v: str) -> None:
        written.append((str(path), v))
        real_write(path, v)

    monkeypatch.setattr(fs, "write", spy)
    cg.ensure_parent("cosched/n0")
    cg.create("cosched/other")  # before accounting, and elsewhere: nothing written
    assert cg.io_accounting("cosched/n0") is None
    written.clear()
    cg.create("cosched/n0-x")  # a sibling whose name only starts like the parent's
    assert not [p for p, _ in written if p.endswith(rule)]
    cg.create("cosched/n0/job-1")
    assert [(p.rpartition("/")[2], v) for p, v in written if p.endswith(rule)] == [(rule, value)]
    assert any("cosched/n0/job-1/" in p for p, _ in written if p.endswith(rule))
    assert cg.io_bytes("cosched/n0/job-1") == IoBytes(0, 0)
