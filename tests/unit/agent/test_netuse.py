"""A job's network bytes per ack (agent/netuse.py), on made-up sockets."""

from __future__ import annotations

import os
from pathlib import Path

from agent.netuse import NetMeter, job_sockets


class Sockets:
    """The kernel's counters: (pid, fd) -> (acked, received); None = not a TCP socket."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, int], tuple[int, int] | None] = {}

    def read(self, pid: int, fd: int) -> tuple[int, int] | None:
        if (pid, fd) not in self.counts:
            raise OSError(9, "Bad file descriptor")  # closed since it was listed
        return self.counts[(pid, fd)]


def test_bytes_since_the_previous_ack_per_job() -> None:
    k = Sockets()
    held = {1: {10: (1, 3), 11: (1, 4), 12: (1, 5)}, 2: {20: (2, 3)}, 3: {}}

    def sockets_of(pids: object) -> dict[int, tuple[int, int]]:
        return {ino: w for p in pids for ino, w in held[p].items()}  # type: ignore[attr-defined]

    meter = NetMeter(k.read, sockets_of)
    k.counts = {(1, 3): (100, 5), (1, 4): (0, 7), (1, 5): None, (2, 3): (1, 1)}
    # a socket seen for the first time counts from its creation; a unix socket not at all
    assert meter.deltas({"a": [1], "b": [2, 3]}) == {"a": [100, 12], "b": [1, 1]}
    k.counts.update({(1, 3): (150, 5), (1, 4): (0, 17)})
    assert meter.deltas({"a": [1], "b": [2, 3]}) == {"a": [50, 10], "b": [0, 0]}
    # socket 11 closed after the listing: what it moved since is lost, never negative
    del k.counts[(1, 4)]
    k.counts[(1, 3)] = (160, 5)
    assert meter.deltas({"a": [1], "b": [2]}) == {"a": [10, 0], "b": [0, 0]}
    # a job no longer given is forgotten: back, its sockets count from zero again
    assert meter.deltas({"b": [2]}) == {"b": [0, 0]}
    assert meter.deltas({"a": [1]}) == {"a": [160, 5]}
    assert meter.deltas({}) == {}


def test_job_sockets_from_proc(tmp_path: Path) -> None:
    fd = tmp_path / "7" / "fd"
    fd.mkdir(parents=True)
    os.symlink("socket:[4242]", fd / "3")
    os.symlink("/dev/null", fd / "0")
    os.symlink("pipe:[17]", fd / "4")
    assert job_sockets([7, 8], proc=str(tmp_path)) == {4242: (7, 3)}  # 8: gone, nothing


def test_a_job_with_huge_numbers_of_sockets_is_read_only_so_far(tmp_path: Path) -> None:
    from agent import netuse

    fd = tmp_path / "7" / "fd"
    fd.mkdir(parents=True)
    for i in range(netuse.MAX_SOCKETS + 50):
        os.symlink(f"socket:[{1000 + i}]", fd / str(i))
    assert len(job_sockets([7], proc=str(tmp_path))) == netuse.MAX_SOCKETS
