"""Checkpoint file format, corrupt-file refusal, and restore into a fresh policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller import checkpoint as ckpt
from controller.scheduler import Scheduler
from tests.support.controller_fakes import BUSY, Clock, FakePool, step


def test_round_trip_and_prev(tmp_path: Path) -> None:
    path = str(tmp_path / "c.json")
    ckpt.write(path, {"a": 1})
    ckpt.write(path, {"a": 2})
    assert ckpt.read(path) == {"a": 2}
    assert ckpt.read(path + ".prev") == {"a": 1}


@pytest.mark.parametrize(
    ("mangle", "needle"),
    [
        (lambda b: b[: len(b) // 2], "truncated or not JSON"),
        (lambda b: b"", "empty file"),
        (lambda b: b.replace(b'"a": 1', b'"a": 7'), "checksum mismatch"),
        (lambda b: b.replace(b'"version": 1', b'"version": 9'), "version 9"),
        (lambda b: b'{"hello": 1}', "not a cosched controller checkpoint"),
    ],
)
def test_corrupt_file_refused_and_kept(tmp_path: Path, mangle, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.json"
    ckpt.write(str(path), {"a": 1})
    bad = mangle(path.read_bytes())
    path.write_bytes(bad)
    with pytest.raises(ckpt.CheckpointError, match=needle):
        ckpt.read(str(path))
    assert path.read_bytes() == bad  # refused, not repaired or removed


def _sched(policy: str, pool: FakePool, clock: Clock) -> Scheduler:
    return Scheduler(policy, {}, pool, wall=clock, mono=clock)


@pytest.mark.parametrize("policy", ["gang", "paired-gang", "easy"])
def test_restore_loses_no_job_and_keeps_placement(tmp_path: Path, policy: str) -> None:
    pool = FakePool(2)
    clock = Clock()
    s = _sched(policy, pool, clock)
    ids = [s.submit(BUSY, "alice"), s.submit({"size": 1, "argv": ["x"]}, "bob")]
    ids.append(s.submit(BUSY, "carol"))
    s.set_class(ids[2], "interactive", "carol", operator=False)
    step(s, clock, 6)
    pool.exit(ids[1])
    step(s, clock)
    path = str(tmp_path / "c.json")
    ckpt.write(path, s.to_payload())
    before = {j: (x.state, x.nodes, x.cpu_ns, x.job_class) for j, x in s.table.jobs.items()}

    s2 = _sched(policy, pool, clock)
    s2.restore(ckpt.read(path))
    report = s2.reconcile()
    assert set(s2.table.jobs) == set(before)
    for j, x in s2.table.jobs.items():
        assert (x.nodes, x.cpu_ns, x.job_class) == before[j][1:]
    if policy != "easy":
        for j, x in s2.table.jobs.items():
            if x.active:
                where = s2.policy.placement(j)  # type: ignore[union-attr]
                assert where is not None
                assert [s2.nodes[i].name for i in where[1]] == x.nodes
    assert s2.table.next_id == s.table.next_id
    assert not report["orphans"]
    if policy == "paired-gang":
        p1, p2 = s.policy.predictor, s2.policy.predictor  # type: ignore[union-attr]
        for j in s2.table.in_policy:
            assert p2.history(j) == p1.history(j)
    step(s2, clock, 4)
    new = s2.submit({"size": 1, "argv": ["x"]}, "dave")
    assert new == s.table.next_id


def test_reconcile_records_jobs_that_ended_meanwhile(tmp_path: Path) -> None:
    pool = FakePool(2)
    clock = Clock()
    s = _sched("gang", pool, clock)
    a = s.submit(BUSY, "alice")
    b = s.submit(BUSY, "bob")
    step(s, clock, 2)
    payload = json.loads(json.dumps(s.to_payload()))
    pool.exit(a, 0)  # ends while no controller runs; the event is queued by the agents
    pool.live["n0"].discard(str(b))  # rank vanished from an agent entirely
    s2 = _sched("gang", pool, clock)
    s2.restore(payload)
    report = s2.reconcile()
    assert s2.table.jobs[a].state == "done" and s2.table.jobs[a].exit_code == 0
    assert b in report["ended"] or s2.table.jobs[b].ended or b in report["adopted"]


def test_restore_refuses_other_policy(tmp_path: Path) -> None:
    pool = FakePool(2)
    clock = Clock()
    s = _sched("gang", pool, clock)
    with pytest.raises(ValueError, match="policy 'gang'"):
        _sched("easy", pool, clock).restore(s.to_payload())


def test_a_checkpoint_others_can_read_or_a_link_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    ckpt.write(str(path), {"a": 1})
    assert path.stat().st_mode & 0o777 == 0o600  # holds every job's command and env
    path.chmod(0o644)
    with pytest.raises(ckpt.CheckpointError, match="mode 0644 lets others read"):
        ckpt.read(str(path))
    path.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(ckpt.CheckpointError, match="symbolic link"):
        ckpt.read(str(link))
    assert ckpt.read(str(path)) == {"a": 1}
