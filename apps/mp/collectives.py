"""Collective operations over point-to-point messages (MPI semantics, bytes payloads).

Yu & Byun 2011 Table 2 characterises its workloads by their dominant pattern:
nearest neighbour (BT, SP, CG: point to point) and all-to-all (FT, IS:
collectives). Every collective here runs inside ``comm.collective(name)``,
which flags the collective phase in the state page and tells the agent
(HYBRID boosts a process for the length of a collective, Yu & Byun 2011 §2.3.2),
and names the collective in any error. Each collective has its own negative
tag, which user receives (even ``ANY_TAG``) never match; messages from one
sender with one tag are received in order, so consecutive collectives never
mix.

Algorithms (all ranks must call the same collectives in the same order):

* ``barrier(stop)``: linear through rank 0, as Wiseman & Feitelson 2003 §4.1.1's test
  program: every rank sends to rank 0, which answers everyone once all have
  arrived. The answer carries rank 0's ``stop`` flag, so all ranks agree on
  stopping after the same barrier. 2(n-1) messages, 2 hops.
* ``bcast``: binomial tree from ``root`` (ceil(log2 n) rounds).
* ``reduce``: linear to ``root``, combined in rank order, so a float sum is
  bit-for-bit the same on every run; ``allreduce`` = reduce to rank 0 + bcast.
* ``alltoall`` / ``alltoallv``: every pair exchanges directly, all receives
  posted before the sends (no ordering deadlock, whatever the sizes).

Numbers (reduce, allreduce) travel as int64 when every value a rank gives is
an ``int`` (exact), else as IEEE doubles; a result is int only if every
rank's values were. ``pack_ints``/``pack_floats`` and their inverses turn
lists of numbers into payloads for point-to-point messages.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from apps.mp.errors import MPError

if TYPE_CHECKING:
    from apps.mp.comm import Comm, Payload

TAG_BARRIER = -2
TAG_RELEASE = -3
TAG_BCAST = -4
TAG_REDUCE = -5
TAG_ALLTOALL = -6
TAG_ALLTOALLV = -7

Number = float  # ints are numbers too (PEP 484); they stay ints where all are ints

OPS: dict[str, Callable[[Number, Number], Number]] = {
    "sum": lambda a, b: a + b,
    "max": max,
    "min": min,
    "prod": lambda a, b: a * b,
}


# ---- numbers as payloads ----------------------------------------------------------------


def pack_floats(values: Sequence[float]) -> bytes:
    """Doubles in the host's byte order (all ranks of a cluster share it)."""
    return array("d", values).tobytes()


def unpack_floats(data: Payload) -> list[float]:
    a = array("d")
    a.frombytes(data)
    return a.tolist()


def pack_ints(values: Sequence[int]) -> bytes:
    """Signed 64-bit integers; raises MPError for a value that does not fit."""
    try:
        return array("q", values).tobytes()
    except OverflowError:
        raise MPError("an integer does not fit in 64 bits") from None


def unpack_ints(data: Payload) -> list[int]:
    a = array("q")
    a.frombytes(data)
    return a.tolist()


def _encode(values: Sequence[Number]) -> bytes:
    """One type byte ('q' or 'd') and the values."""
    if all(isinstance(v, int) for v in values):
        return b"q" + pack_ints([int(v) for v in values])
    try:
        return b"d" + pack_floats([float(v) for v in values])
    except (TypeError, ValueError):
        raise MPError("reduce: values must be numbers") from None


def _decode(data: bytes) -> list[Number]:
    kind, body = data[:1], data[1:]
    if kind == b"q":
        return list(unpack_ints(body))
    if kind == b"d":
        return list(unpack_floats(body))
    raise MPError(f"reduce: bad number payload (type byte {kind!r})")


# ---- the collectives -----------------------------------------------------------------------


def barrier(comm: Comm, stop: bool = False) -> bool:
    """Wait for every rank; returns rank 0's ``stop`` on every rank."""
    if comm.size == 1:
        return stop
    with comm.collective("barrier"):
        if comm.rank == 0:
            comm.waitall([comm._irecv(j, TAG_BARRIER) for j in range(1, comm.size)])
            flag = b"1" if stop else b"0"
            comm.waitall([comm._isend(j, flag, TAG_RELEASE) for j in range(1, comm.size)])
            return stop
        comm._send(0, b"", TAG_BARRIER)
        return comm._recv(0, TAG_RELEASE) == b"1"


def bcast(comm: Comm, data: Payload, root: int = 0) -> bytes:
    """Binomial tree: in round k, ranks that have the data send it 2**k ranks further."""
    n, rank = comm.size, comm.rank
    _check_root(comm, root, "bcast")
    if n == 1:
        return bytes(data)
    with comm.collective("bcast"):
        rel = (rank - root) % n
        out = bytes(data) if rel == 0 else b""
        mask = 1
        while mask < n:
            if rel & mask:
                out = comm._recv((rank - mask) % n, TAG_BCAST)
                break
            mask <<= 1
        mask >>= 1
        sends = []
        while mask > 0:
            if rel + mask < n:
                sends.append(comm._isend((rank + mask) % n, out, TAG_BCAST))
            mask >>= 1
        comm.waitall(sends)
        return out


def reduce(
    comm: Comm, values: Sequence[Number], op: str = "sum", root: int = 0
) -> list[Number] | None:
    """Element-wise ``op`` of every rank's values at ``root`` (None elsewhere)."""
    _check_root(comm, root, "reduce")
    fn = OPS.get(op)
    if fn is None:
        raise comm._err(f"reduce: unknown op {op!r}; valid ops: {', '.join(OPS)}")
    mine = _encode(values)
    if comm.size == 1:
        return _decode(mine)
    with comm.collective("reduce"):
        if comm.rank != root:
            comm._send(root, mine, TAG_REDUCE)
            return None
        others = [j for j in range(comm.size) if j != root]
        got = dict(
            zip(others, comm.waitall([comm._irecv(j, TAG_REDUCE) for j in others]), strict=True)
        )
        got[root] = mine
        acc: list[Number] = []
        for j in range(comm.size):
            vals = _decode(got[j])
            if j == 0:
                acc = vals
                continue
            if len(vals) != len(acc):
                raise comm._err(f"reduce: rank {j} gave {len(vals)} values, rank 0 gave {len(acc)}")
            acc = [fn(a, b) for a, b in zip(acc, vals, strict=True)]
        return acc


def allreduce(comm: Comm, values: Sequence[Number], op: str = "sum") -> list[Number]:
    """``reduce`` to rank 0, then ``bcast`` of the result."""
    if comm.size == 1:
        return reduce(comm, values, op, 0) or []
    with comm.collective("allreduce"):
        out = reduce(comm, values, op, 0)
        data = bcast(comm, _encode(out) if out is not None else b"", 0)
        return _decode(data)


def _exchange(comm: Comm, blocks: Sequence[Payload], tag: int, what: str) -> list[bytes]:
    if len(blocks) != comm.size:
        raise comm._err(f"{what}: {len(blocks)} blocks for {comm.size} ranks")
    out: list[bytes] = [b""] * comm.size
    out[comm.rank] = bytes(blocks[comm.rank])
    if comm.size == 1:
        return out
    with comm.collective(what):
        # Rank r sends to r+1, r+2, ... first, so no rank is everyone's first target.
        others = [(comm.rank + k) % comm.size for k in range(1, comm.size)]
        recvs = [comm._irecv(j, tag) for j in others]
        sends = [comm._isend(j, blocks[j], tag) for j in others]
        comm.waitall(recvs + sends)
        for j, r in zip(others, recvs, strict=True):
            out[j] = r.data
    return out


def alltoall(comm: Comm, blocks: Sequence[Payload]) -> list[bytes]:
    """Every rank sends ``blocks[j]`` to rank j; blocks must all have one size (MPI_Alltoall)."""
    sizes = {memoryview(b).nbytes for b in blocks}
    if len(sizes) > 1:
        raise comm._err(f"alltoall: blocks of different sizes {sorted(sizes)}; use alltoallv")
    return _exchange(comm, blocks, TAG_ALLTOALL, "alltoall")


def alltoallv(comm: Comm, blocks: Sequence[Payload]) -> list[bytes]:
    """As alltoall with a size per destination (MPI_Alltoallv)."""
    return _exchange(comm, blocks, TAG_ALLTOALLV, "alltoallv")


def _check_root(comm: Comm, root: int, what: str) -> None:
    if not isinstance(root, int) or not 0 <= root < comm.size:
        raise comm._err(f"{what}: root {root} is not a rank of this job (0..{comm.size - 1})")
