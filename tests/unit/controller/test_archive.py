"""Ended jobs leave the controller's memory for the job archive (controller/archive.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from controller.archive import ArchiveError, JobArchive
from controller.jobs import RequestError
from controller.scheduler import Scheduler
from tests.support.controller_fakes import Clock, FakePool, make, step


def _run_jobs(n: int) -> tuple[Scheduler, FakePool, Clock, list[int]]:
    s, pool, clock = make("gang", n=2)
    ids = [s.submit({"size": 1, "argv": ["x"], "name": f"j{k}"}, "alice") for k in range(n)]
    for _ in range(200):
        step(s, clock)
        for j in ids:
            if s.table.jobs[j].active:
                pool.exit(j, 0)
        if all(s.table.jobs[j].ended for j in ids):
            break
    return s, pool, clock, ids


def test_old_ended_jobs_move_to_the_archive_and_are_still_found(tmp_path: Path) -> None:
    s, _pool, clock, ids = _run_jobs(20)
    s.table.archive = JobArchive(str(tmp_path / "jobs.jsonl"))
    s.table.keep_ended = 5
    assert s.table.prune_ended(clock()) == 15
    assert len(s.table.jobs) == 5 and s.table.prune_ended(clock()) == 0
    f = tmp_path / "jobs.jsonl"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert len(f.read_text().splitlines()) == 15
    now = clock()
    everything = s.table.records(now, True)
    assert [r["job_id"] for r in everything] == ids
    assert all(r["state"] == "done" and "ranks" not in r for r in everything)
    assert [r["job_id"] for r in s.table.records(now, False)] == []
    old = s.table.record(ids[0], now)
    assert old["name"] == "j0" and old["ranks"][0]["exit_code"] == 0
    assert s.table.job_counts()[("done", "production")] == 20
    with pytest.raises(RequestError, match="no job"):
        s.kill(ids[0], "alice", False)
    # a checkpoint keeps the archived counts (the exporter's totals survive a restart)
    payload = s.to_payload()
    s2, _, _ = make("gang", n=2)
    s2.restore(payload)
    assert s2.table.job_counts()[("done", "production")] == 20
    assert s2.table.next_id == ids[-1] + 1


def test_the_archive_refuses_links_and_open_files(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(ArchiveError, match="not a regular file"):
        JobArchive(str(link))
    open_file = tmp_path / "open.jsonl"
    open_file.write_text("")
    os.chmod(open_file, 0o644)
    with pytest.raises(ArchiveError, match="chmod 600"):
        JobArchive(str(open_file))
    a = JobArchive(str(tmp_path / "new.jsonl"))
    assert a.append([{"job_id": 1}, {"job_id": 1, "state": "done"}]) == 2
    (tmp_path / "new.jsonl").open("a").write("{torn")
    assert a.find(1) == {"job_id": 1, "state": "done"}  # the last wins, torn line skipped
    assert a.find(2) is None
