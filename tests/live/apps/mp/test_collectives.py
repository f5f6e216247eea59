"""Collectives (apps/mp/collectives.py): every one gives the right values for 1..8 ranks,
numbers keep their type, the collective phase is flagged, and bad calls are refused."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agent import nicproto
from apps.mp import Comm, MPError, WaitMode
from apps.mp.collectives import pack_floats, pack_ints, unpack_floats, unpack_ints
from tests.support.mp_helpers import spmd


def _all_collectives(c: Comm) -> dict[str, Any]:
    r, n = c.rank, c.size
    return {
        "bcast": [c.bcast(b"x%d" % root if r == root else b"", root) for root in range(n)],
        "reduce": [c.reduce([r, 2.0 * r], "sum", root=root) for root in range(n)],
        "reduce_min": c.reduce([r + 1], "min", root=n - 1),
        "max": c.allreduce([r, -r], "max"),
        "min": c.allreduce([r, -r], "min"),
        "sum": c.allreduce([1, r]),
        "prod": c.allreduce([2.0], "prod"),
        "a2a": c.alltoall([b"%d>%d" % (r, j) for j in range(n)]),
        "a2av": c.alltoallv([b"z" * (r + j) for j in range(n)]),
        "stop": [c.barrier(stop=k == 1 and r == 0) for k in range(2)],
    }


def _check(n: int, out: list[dict[str, Any]]) -> None:
    total = sum(range(n))
    for r, res in enumerate(out):
        assert res["bcast"] == [b"x%d" % root for root in range(n)]
        assert res["reduce"] == [[total, 2.0 * total] if r == root else None for root in range(n)]
        assert res["reduce_min"] == ([1] if r == n - 1 else None)
        assert res["max"] == [n - 1, 0]
        assert res["min"] == [0, -(n - 1)]
        assert res["sum"] == [n, total] and all(isinstance(v, int) for v in res["sum"])
        assert res["prod"] == [2.0**n]
        assert res["a2a"] == [b"%d>%d" % (j, r) for j in range(n)]
        assert res["a2av"] == [b"z" * (j + r) for j in range(n)]
        assert res["stop"] == [False, True]


@pytest.mark.parametrize("n", range(1, 9))
def test_every_collective_gives_the_right_values(n: int) -> None:
    _check(n, spmd(n, _all_collectives))


@pytest.mark.parametrize(("n", "wait"), [(4, "spin"), (3, "spinblock")])
def test_collectives_under_the_other_waiting_actions(n: int, wait: str) -> None:
    _check(n, spmd(n, _all_collectives, wait=WaitMode(wait, "spin", 50.0)))


def test_prod_and_float_sums_are_the_same_on_every_rank() -> None:
    def body(c: Comm) -> Any:
        return c.allreduce([2.0, 0.1 * (c.rank + 1)], "prod"), c.allreduce([0.1] * 3)

    out = spmd(5, body)
    assert all(o == out[0] for o in out)
    assert out[0][0][0] == 32.0


def test_a_collective_is_flagged_in_the_state_page_while_it_runs() -> None:
    seen: list[int] = []

    def body(c: Comm) -> Any:
        if c.rank == 1:
            time.sleep(0.2)  # rank 0 waits inside the barrier meanwhile
            seen.append(nicproto.read_state(peer[0].page.mem).in_collective)
        else:
            peer.append(c)
        c.barrier()
        return nicproto.read_state(c.page.mem).in_collective

    peer: list[Comm] = []
    assert spmd(2, body, order=[0, 1]) == [0, 0]
    assert seen == [1]


def test_bad_collective_calls_are_refused_with_one_line() -> None:
    def body(c: Comm) -> Any:
        with pytest.raises(MPError, match=r"rank \d: bcast: root 3 is not a rank of this job"):
            c.bcast(b"", root=3)
        with pytest.raises(MPError, match="unknown op 'avg'; valid ops: sum, max, min, prod"):
            c.reduce([1.0], "avg")
        with pytest.raises(MPError, match="alltoall: 1 blocks for 2 ranks"):
            c.alltoall([b""])
        with pytest.raises(MPError, match="blocks of different sizes"):
            c.alltoall([b"a", b"bb"])
        return True

    assert spmd(2, body) == [True, True]


def test_mismatched_reduce_lengths_name_the_rank() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 0:
            with pytest.raises(MPError, match="rank 0: reduce 0: reduce: rank 1 gave 2 values"):
                c.reduce([1.0])
            return True
        c.reduce([1.0, 2.0])
        return True

    assert spmd(2, body) == [True, True]


def test_number_helpers_round_trip() -> None:
    assert unpack_ints(pack_ints([1, -(2**63), 2**63 - 1])) == [1, -(2**63), 2**63 - 1]
    assert unpack_floats(pack_floats([0.5, -1e300])) == [0.5, -1e300]
    with pytest.raises(MPError, match="does not fit in 64 bits"):
        pack_ints([2**64])


def test_barrier_waits_for_the_slowest_rank() -> None:
    def body(c: Comm) -> Any:
        t0 = time.monotonic()
        if c.rank == 2:
            time.sleep(0.3)
        c.barrier()
        return time.monotonic() - t0

    out = spmd(3, body)
    assert min(out) >= 0.29, out
