"""Parsing a cgroup's block I/O statistics (common/cgroups/iostat.py), v1 and cgroup2."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cgroups.errors import CgroupError
from common.cgroups.iostat import IoBytes, parse_v1, parse_v2, read_io_bytes

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
