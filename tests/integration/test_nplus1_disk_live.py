"""Issue 31 end to end: a job's disk use, measured by the agents from its cgroup's block
I/O statistics (v1 blkio or cgroup2 io), reaches the real controller as the disk part of
the demand vector ``nplus1`` is fed, on a 2-node cluster; a compute job's stays at zero.

The disk job writes 1 MiB with O_DIRECT, over and over, to a file of its own (the kind of
write the kernel charges to the writer's group at once: docs/nplus1.md); the compute job
only spins. The controller's ``status`` shows each job's last measured vector.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import COMPUTE, Live

DISK = [
    "python3",
    "-c",
    "import mmap,os,sys\nbuf=mmap.mmap(-1,1<<20)\nbuf.write(b'x'*(1<<20))\n"
    "fd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT|os.O_DIRECT,0o600)\n"
    "while True:\n os.pwrite(fd,buf,0)",
]


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores: one per node")
    lv = Live(root_cluster_env, tmp_path)
    try:
        lv.up()
        yield lv
    finally:
        lv.stop()
        with contextlib.suppress(Exception):
            lv.down()


@pytest.mark.root
def test_a_disk_bound_job_shows_its_disk_share_at_the_controller(
    live: Live, tmp_path: Path
) -> None:
    live.start("nplus1", "--param", "n=1", "--param", "devices=cpu,disk", quantum=0.1)
    target = tmp_path / "disk-job.dat"
    disk = live.req("submit", spec={"size": 1, "argv": [*DISK, str(target)], "name": "disk"})
    cpu = live.req("submit", spec={"size": 1, "argv": COMPUTE, "name": "cpu"})
    d, c = str(disk["job_id"]), str(cpu["job_id"])
    seen: dict[str, list[float]] = {d: [], c: []}
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and (len(seen[d]) < 20 or len(seen[c]) < 20):
        devices = live.req("status")["last_quantum"]["devices"]
        for j in (d, c):
            if "disk" in devices.get(j, {}):
                seen[j].append(devices[j]["disk"])
        time.sleep(0.05)
    groups = {
        r["node"]: Path(f"/proc/{r['pid']}/cgroup").read_text()
        for j in live.req("jobs")
        for r in j.get("ranks", [])
        if r.get("pid") and Path(f"/proc/{r['pid']}").exists()
    }
    assert len(seen[d]) >= 20 and len(seen[c]) >= 20, (seen, live.log_text()[-2000:])
    print(f"disk share per quantum: disk job {seen[d]}, compute job {seen[c]}")
    assert max(seen[d]) > 0.05, (seen, groups)  # MiBs per quantum against 100 MB/s
    assert max(seen[c]) < 0.01, seen  # a spinning job moves no block I/O
    assert target.exists() and target.stat().st_size == 1 << 20  # the job really wrote
