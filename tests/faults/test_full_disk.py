"""Fault injection (issue 13): the I/O app on a full disk. Its rank directory is on a
4 KiB tmpfs, so the first 8,193-byte file fails with ENOSPC: the rank prints one line
naming the error and the fix and exits 1; the job ends failed with the rank in its
reason and its other rank killed; agents and controller keep serving, and the next
job runs done. The tmpfs is unmounted and nothing is left. Root, real local cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import Live, running

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    with running(root_cluster_env, tmp_path) as lv:
        yield lv


@pytest.fixture
def full_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "full"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k,mode=1777", "cosched-full", str(d)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def _ended(live: Live, job_id: int, limit: float = 60.0) -> dict[str, Any]:
    end = time.monotonic() + limit
    while True:
        rec = live.req("job", job_id=job_id)
        if rec["state"] in ("done", "failed", "killed"):
            return dict(rec)
        assert time.monotonic() < end, rec
        time.sleep(0.1)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_io_app_on_a_full_disk_fails_in_one_line(live: Live, full_dir: Path) -> None:
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod

    live.start("gang", quantum=0.1)
    app = [sys.executable, "-m", "apps.synthetic", "--preset", "io", "--duration", "2"]
    spec = {"size": 2, "cwd": str(ROOT), "env": {"PYTHONPATH": str(ROOT)}}
    bad = live.req("submit", spec={**spec, "argv": [*app, "--dir", str(full_dir)],
                                   "name": "full"})["job_id"]  # fmt: skip
    rec = _ended(live, bad)
    assert rec["state"] == "failed" and "exited with 1" in rec["reason"], rec
    errs = [Path(r["stderr"]).read_text() for r in rec["ranks"] if r.get("stderr")]
    lines = [ln for e in errs for ln in e.splitlines() if "No space left on device" in ln]
    assert lines, errs
    assert all("Traceback" not in e for e in errs), errs
    assert "free space there or give --dir" in lines[-1] and str(full_dir) in lines[-1], lines
    # the daemons are fine: status answers, and a job elsewhere runs to the end
    assert live.req("status")["nodes_unreachable"] == []
    ok = live.req("submit", spec={**spec, "argv": [*app, "--duration", "0.5"],
                                  "name": "ok"})["job_id"]  # fmt: skip
    assert _ended(live, ok)["state"] == "done"
    print(f"full disk: job failed ({rec['reason']}); the rank said: {lines[-1]}")
    live.stop()
    live.down()
    rep = clean_mod.clean(cluster_mod.Env(state_dir=str(live.state_dir)))
    assert not (rep.from_state or rep.removed or rep.killed or rep.problems), rep.format()
