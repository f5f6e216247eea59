"""A job's network bytes per ack (agent/netuse.py), on made-up socket tables."""

from __future__ import annotations

import os
from pathlib import Path

from agent.netuse import NetMeter, socket_inodes


class Table:
    """The node's TCP sockets as sock_diag would list them: inode -> (acked, received)."""

    def __init__(self) -> None:
        self.sockets: dict[int, tuple[int, int]] = {}
        self.closed = False

    def __call__(self) -> dict[int, tuple[int, int]]:
        return dict(self.sockets)

    def close(self) -> None:
        self.closed = True


def test_bytes_since_the_previous_ack_per_job() -> None:
    table = Table()
    held = {1: {10, 11}, 2: {20}, 3: set()}  # pid -> socket inodes
    meter = NetMeter(table, lambda pids: set().union(*(held[p] for p in pids)))
    table.sockets = {10: (100, 5), 11: (0, 7), 20: (1, 1), 99: (10**9, 10**9)}
    # a socket seen for the first time counts from its creation
    assert meter.deltas({"a": [1], "b": [2, 3]}) == {"a": [100, 12], "b": [1, 1]}
    table.sockets = {10: (150, 5), 11: (0, 17), 20: (1, 1), 99: (2 * 10**9, 0)}
    assert meter.deltas({"a": [1], "b": [2, 3]}) == {"a": [50, 10], "b": [0, 0]}
    # socket 11 closed: what it moved since is lost, never negative; 99 is no job's
    del table.sockets[11]
    table.sockets[10] = (160, 5)
    assert meter.deltas({"a": [1], "b": [2]}) == {"a": [10, 0], "b": [0, 0]}
    # a job no longer given is forgotten: back, its sockets count from zero again
    assert meter.deltas({"b": [2]}) == {"b": [0, 0]}
    assert meter.deltas({"a": [1]}) == {"a": [160, 5]}
    meter.close()
    assert table.closed


def test_no_live_job_reads_no_sockets() -> None:
    def boom() -> dict[int, tuple[int, int]]:
        raise AssertionError("read with nothing to measure")

    assert NetMeter(boom, lambda pids: set()).deltas({}) == {}


def test_socket_inodes_from_proc(tmp_path: Path) -> None:
    fd = tmp_path / "7" / "fd"
    fd.mkdir(parents=True)
    os.symlink("socket:[4242]", fd / "3")
    os.symlink("/dev/null", fd / "0")
    os.symlink("pipe:[17]", fd / "4")
    assert socket_inodes([7, 8], proc=str(tmp_path)) == {4242}  # 8: gone, nothing
