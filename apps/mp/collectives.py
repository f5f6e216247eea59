"""Collective operations over point-to-point messages (MPI semantics, bytes payloads).

All run inside ``comm.collective()`` so the agent sees the collective phase
(HYBRID's boost, seed 002 §2.3.2). Each uses its own negative tag; messages
from one sender with one tag are received in order, so consecutive
collectives never mix.

* ``barrier(stop)``: through rank 0, as seed 000 §4.1.1's test program: every
  rank sends to rank 0, which answers everyone once all have arrived. The
  answer carries rank 0's ``stop`` flag, so all ranks agree on stopping after
  the same barrier.
* ``bcast``: binomial tree from ``root``.
* ``reduce``: linear to ``root``, combined in rank order (the same float sum
  on every run); ``allreduce`` = reduce to rank 0 + bcast.
* ``alltoall`` / ``alltoallv``: every pair exchanges directly, all receives
  posted before the sends (the FT and IS pattern of seed 002 Table 2).
Numbers travel as IEEE doubles (array 'd').
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from apps.mp.errors import MPError

if TYPE_CHECKING:
    from apps.mp.comm import Comm

TAG_BARRIER = -2
TAG_RELEASE = -3
TAG_BCAST = -4
TAG_REDUCE = -5
TAG_ALLTOALL = -6
TAG_ALLTOALLV = -7

OPS: dict[str, Callable[[float, float], float]] = {
    "sum": lambda a, b: a + b,
    "max": max,
    "min": min,
    "prod": lambda a, b: a * b,
}


def barrier(comm: Comm, stop: bool = False) -> bool:
    if comm.size == 1:
        return stop
    with comm.collective():
        if comm.rank == 0:
            comm.waitall([comm.irecv(j, TAG_BARRIER) for j in range(1, comm.size)])
            flag = b"1" if stop else b"0"
            comm.waitall([comm.isend(j, flag, TAG_RELEASE) for j in range(1, comm.size)])
            return stop
        comm.send(0, b"", TAG_BARRIER)
        return comm.recv(0, TAG_RELEASE) == b"1"


def bcast(comm: Comm, data: bytes, root: int = 0) -> bytes:
    n, rank = comm.size, comm.rank
    _check_root(comm, root)
    if n == 1:
        return data
    with comm.collective():
        rel = (rank - root) % n
        mask = 1
        while mask < n:
            if rel & mask:
                data = comm.recv((rank - mask) % n, TAG_BCAST)
                break
            mask <<= 1
        mask >>= 1
        sends = []
        while mask > 0:
            if rel + mask < n:
                sends.append(comm.isend((rank + mask) % n, data, TAG_BCAST))
            mask >>= 1
        comm.waitall(sends)
        return data


def _encode(values: Sequence[float]) -> bytes:
    return array("d", values).tobytes()


def _decode(data: bytes) -> list[float]:
    a = array("d")
    a.frombytes(data)
    return a.tolist()


def reduce(
    comm: Comm, values: Sequence[float], op: str = "sum", root: int = 0
) -> list[float] | None:
    _check_root(comm, root)
    fn = OPS.get(op)
    if fn is None:
        raise MPError(f"unknown reduce op {op!r}; valid ops: {', '.join(OPS)}")
    mine = [float(v) for v in values]
    if comm.size == 1:
        return mine
    with comm.collective():
        if comm.rank != root:
            comm.send(root, _encode(mine), TAG_REDUCE)
            return None
        others = [j for j in range(comm.size) if j != root]
        got = dict(
            zip(others, comm.waitall([comm.irecv(j, TAG_REDUCE) for j in others]), strict=True)
        )
        got[root] = _encode(mine)
        acc: list[float] | None = None
        for j in range(comm.size):
            vals = _decode(got[j])
            if len(vals) != len(mine):
                raise MPError(f"reduce: rank {j} gave {len(vals)} values, rank {root} {len(mine)}")
            acc = vals if acc is None else [fn(a, b) for a, b in zip(acc, vals, strict=True)]
        assert acc is not None
        return acc


def allreduce(comm: Comm, values: Sequence[float], op: str = "sum") -> list[float]:
    if comm.size == 1:
        return reduce(comm, values, op, 0) or []
    with comm.collective():
        out = reduce(comm, values, op, 0)
        data = bcast(comm, _encode(out) if out is not None else b"", 0)
        return _decode(data)


def _exchange(comm: Comm, blocks: Sequence[bytes], tag: int, what: str) -> list[bytes]:
    if len(blocks) != comm.size:
        raise MPError(f"{what}: {len(blocks)} blocks for {comm.size} ranks")
    out: list[bytes] = [b""] * comm.size
    out[comm.rank] = bytes(blocks[comm.rank])
    if comm.size == 1:
        return out
    with comm.collective():
        others = [(comm.rank + k) % comm.size for k in range(1, comm.size)]
        recvs = [comm.irecv(j, tag) for j in others]
        sends = [comm.isend(j, blocks[j], tag) for j in others]
        comm.waitall(recvs + sends)
        for j, r in zip(others, recvs, strict=True):
            out[j] = r.data
    return out


def alltoall(comm: Comm, blocks: Sequence[bytes]) -> list[bytes]:
    """Every rank sends ``blocks[j]`` to rank j; blocks must all have one size (MPI_Alltoall)."""
    sizes = {len(b) for b in blocks}
    if len(sizes) > 1:
        raise MPError(f"alltoall: blocks of different sizes {sorted(sizes)}; use alltoallv")
    return _exchange(comm, blocks, TAG_ALLTOALL, "alltoall")


def alltoallv(comm: Comm, blocks: Sequence[bytes]) -> list[bytes]:
    """As alltoall with a size per destination (MPI_Alltoallv)."""
    return _exchange(comm, blocks, TAG_ALLTOALLV, "alltoallv")


def _check_root(comm: Comm, root: int) -> None:
    if not 0 <= root < comm.size:
        raise MPError(f"root {root} is not a rank of this job (0..{comm.size - 1})")
