"""One kernel, two transports: our message library (``apps.mp``) or real MPI (mpi4py).

The kernels call only this thin interface -- the point-to-point and
collective calls of Yu & Byun 2011 Table 2's routine column (Isend, Irecv, Wait,
Send, Alltoall, Alltoallv, Allreduce, Reduce) plus a group ``split`` (FT's
pencil transposes run inside rows and columns of the process grid) -- on
numpy arrays. :class:`OursTransport` maps them onto :class:`apps.mp.Comm`
(whose collectives mark the collective phase for the agent, docs/cdc.md);
:class:`MpiTransport` onto an mpi4py communicator.

Both record the same things, so the two can be compared:

* the **message-size histogram**: one entry per send-side call the kernel
  makes -- a point-to-point send, or a collective counted once with the bytes
  it sends to each destination (an MPI call profiler's view, which is how
  Yu & Byun 2011 Table 2 counts: FT's Reduce is a third of its messages although
  its Alltoall sends to every rank). Each entry carries the routine, the
  kernel's category (``kind``: which Table 2 group it belongs to) and the
  byte count;
* the **communication time**: wall time spent inside transport calls (the
  part of a rank's run that is not computing).

Bookkeeping calls (``gather_obj``) are not recorded.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_GROUP_TAG = 1 << 30  # our library: point-to-point tags of group collectives start here


@dataclass
class Recorder:
    """What one rank sent (per call) and how long it spent communicating."""

    hist: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    bytes_sent: int = 0
    comm_s: float = 0.0
    calls: int = 0
    enabled: bool = True

    def add(self, routine: str, kind: str, nbytes: int, total: int | None = None) -> None:
        if self.enabled:
            self.hist[(routine, kind, int(nbytes))] += 1
            self.bytes_sent += int(nbytes if total is None else total)

    def kinds(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_r, kind, _n), c in self.hist.items():
            out[kind] += c
        return dict(out)

    def as_rows(self) -> list[dict[str, Any]]:
        return [
            {"routine": r, "kind": k, "bytes": n, "count": c}
            for (r, k, n), c in sorted(self.hist.items())
        ]


class _Timed:
    """Context manager adding the elapsed wall time to a recorder.

    With a message trace on (apps/mp/trace.py) it also marks the call's
    bounds, so the CPU between calls is recorded as the kernel's computation.
    """

    __slots__ = ("rec", "t0", "tracer")

    def __init__(self, rec: Recorder, tracer: Any = None) -> None:
        self.rec = rec
        self.t0 = 0.0
        self.tracer = tracer

    def __enter__(self) -> None:
        if self.tracer is not None:
            self.tracer.enter()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.rec.comm_s += time.perf_counter() - self.t0
        self.rec.calls += 1
        if self.tracer is not None:
            self.tracer.leave()


class Transport(ABC):
    """The calls the kernels need. ``rank``/``size`` are within this (sub)group."""

    name: str = ""
    rank: int
    size: int
    rec: Recorder

    def timed(self) -> _Timed:
        return _Timed(self.rec, self.tracer())

    def tracer(self) -> Any:
        """The message trace being recorded (apps/mp/trace.py), or None."""
        return None

    def mark(self, label: str) -> None:
        """Mark a point of the kernel in the message trace (an NPB iteration starts)."""
        tr = self.tracer()
        if tr is not None:
            tr.mark(label)

    # point to point ------------------------------------------------------------------
    @abstractmethod
    def isend(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> Any: ...

    @abstractmethod
    def irecv(self, source: int, tag: int, count: int, dtype: Any = np.float64) -> Any: ...

    @abstractmethod
    def waitall(self, reqs: Sequence[Any]) -> list[np.ndarray | None]: ...

    def wait(self, req: Any) -> np.ndarray | None:
        return self.waitall([req])[0]

    def send(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> None:
        self.wait(self.isend(dest, arr, tag, kind))

    def recv(self, source: int, tag: int, count: int, dtype: Any = np.float64) -> np.ndarray:
        out = self.wait(self.irecv(source, tag, count, dtype))
        assert out is not None
        return out

    # collectives ----------------------------------------------------------------------
    @abstractmethod
    def alltoall(self, blocks: np.ndarray, kind: str) -> np.ndarray:
        """``blocks[j]`` goes to rank j; returns an array of the same shape, row i from rank i."""

    @abstractmethod
    def alltoallv(
        self, blocks: Sequence[np.ndarray], counts: Sequence[int], kind: str
    ) -> list[np.ndarray]:
        """Variable blocks (one dtype); ``counts[i]`` elements arrive from rank i."""

    @abstractmethod
    def allreduce(self, arr: np.ndarray, op: str, kind: str) -> np.ndarray: ...

    @abstractmethod
    def reduce(self, arr: np.ndarray, op: str, root: int, kind: str) -> np.ndarray | None: ...

    @abstractmethod
    def bcast(self, arr: np.ndarray, root: int, kind: str) -> np.ndarray: ...

    @abstractmethod
    def split(self, color: int, key: int) -> Transport:
        """A sub-group of the ranks with the same ``color``, ordered by ``key``."""

    @abstractmethod
    def gather_obj(self, obj: Any) -> list[Any] | None:
        """Bookkeeping (reports): every rank's ``obj`` at rank 0, not recorded."""

    def close(self) -> None:  # noqa: B027 - optional
        pass


# ---- our library -----------------------------------------------------------------------

_NP_OPS: dict[str, Callable[..., Any]] = {"sum": np.add, "max": np.maximum, "min": np.minimum}


class OursTransport(Transport):
    """Over :class:`apps.mp.Comm`; a sub-group (``split``) talks over the same connections."""

    name = "ours"

    def __init__(
        self,
        comm: Any,
        members: Sequence[int] | None = None,
        rec: Recorder | None = None,
        gid: int = 0,
    ) -> None:
        self.comm = comm
        self.members = list(members) if members is not None else list(range(comm.size))
        self.world = members is None or len(self.members) == comm.size
        self.rank = self.members.index(comm.rank)
        self.size = len(self.members)
        self.rec = rec or Recorder()
        self.gid = gid
        self._seq = 0

    def tracer(self) -> Any:
        return getattr(self.comm, "tracer", None)

    def isend(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> Any:
        buf = np.ascontiguousarray(arr)
        self.rec.add("Isend", kind, buf.nbytes)
        with self.timed():
            return (self.comm.isend(self.members[dest], buf.tobytes(), tag), None)

    def send(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> None:
        buf = np.ascontiguousarray(arr)
        self.rec.add("Send", kind, buf.nbytes)
        with self.timed():
            self.comm.send(self.members[dest], buf.tobytes(), tag)

    def irecv(self, source: int, tag: int, count: int, dtype: Any = np.float64) -> Any:
        with self.timed():
            return (self.comm.irecv(self.members[source], tag), (count, np.dtype(dtype)))

    def waitall(self, reqs: Sequence[Any]) -> list[np.ndarray | None]:
        with self.timed():
            self.comm.waitall([r for r, _ in reqs])
        out: list[np.ndarray | None] = []
        for r, spec in reqs:
            if spec is None:
                out.append(None)
                continue
            count, dt = spec
            a = np.frombuffer(r.data, dtype=dt)
            if a.size != count:
                raise ValueError(f"expected {count} elements from rank {r.source}, got {a.size}")
            out.append(a)
        return out

    def _group_exchange(self, blocks: Sequence[bytes], what: str) -> list[bytes]:
        """Direct pairwise exchange inside a sub-group (the library's own is world-wide)."""
        self._seq += 1
        tag = _GROUP_TAG + (self.gid % 1024) * 1024 + self._seq % 1024
        me = self.rank
        out = [b""] * self.size
        out[me] = bytes(blocks[me])
        others = [(me + k) % self.size for k in range(1, self.size)]
        with self.comm.collective(what):
            rs = [self.comm.irecv(self.members[j], tag) for j in others]
            ss = [self.comm.isend(self.members[j], blocks[j], tag) for j in others]
            self.comm.waitall(rs + ss)
        for j, r in zip(others, rs, strict=True):
            out[j] = r.data
        return out

    def alltoall(self, blocks: np.ndarray, kind: str) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks)
        per = blocks[0].nbytes
        self.rec.add("Alltoall", kind, per, per * (self.size - 1))
        data = [blocks[j].tobytes() for j in range(self.size)]
        with self.timed():
            got = self.comm.alltoall(data) if self.world else self._group_exchange(data, "alltoall")
        out = np.empty_like(blocks)
        for i, b in enumerate(got):
            out[i] = np.frombuffer(b, dtype=blocks.dtype).reshape(blocks.shape[1:])
        return out

    def alltoallv(
        self, blocks: Sequence[np.ndarray], counts: Sequence[int], kind: str
    ) -> list[np.ndarray]:
        dt = blocks[0].dtype
        sizes = [b.nbytes for j, b in enumerate(blocks) if j != self.rank]
        self.rec.add("Alltoallv", kind, round(sum(sizes) / max(1, len(sizes))), sum(sizes))
        data = [np.ascontiguousarray(b).tobytes() for b in blocks]
        with self.timed():
            got = (
                self.comm.alltoallv(data) if self.world else self._group_exchange(data, "alltoallv")
            )
        out = [np.frombuffer(b, dtype=dt) for b in got]
        for i, (a, c) in enumerate(zip(out, counts, strict=True)):
            if a.size != c:
                raise ValueError(f"alltoallv: {a.size} elements from rank {i}, expected {c}")
        return out

    def _values(self, arr: np.ndarray) -> tuple[list[Any], np.dtype[Any], tuple[int, ...]]:
        a = np.asarray(arr)
        cplx = np.iscomplexobj(a)
        flat = a.astype(np.complex128).view(np.float64).ravel() if cplx else a.ravel()
        return flat.tolist(), a.dtype, a.shape

    @staticmethod
    def _back(vals: Sequence[Any], dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
        if np.issubdtype(dtype, np.complexfloating):
            return np.asarray(vals, dtype=np.float64).view(np.complex128).reshape(shape)
        return np.asarray(vals, dtype=dtype).reshape(shape)

    def _check_world(self, what: str) -> None:
        if not self.world:
            raise NotImplementedError(f"{what} on a sub-group is not needed by any kernel")

    def allreduce(self, arr: np.ndarray, op: str, kind: str) -> np.ndarray:
        self._check_world("allreduce")
        a = np.asarray(arr)
        self.rec.add("Allreduce", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        vals, dt, shape = self._values(a)
        with self.timed():
            res = self.comm.allreduce(vals, op)
        return self._back(res, dt, shape)

    def reduce(self, arr: np.ndarray, op: str, root: int, kind: str) -> np.ndarray | None:
        self._check_world("reduce")
        a = np.asarray(arr)
        self.rec.add("Reduce", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        vals, dt, shape = self._values(a)
        with self.timed():
            res = self.comm.reduce(vals, op, root)
        return None if res is None else self._back(res, dt, shape)

    def bcast(self, arr: np.ndarray, root: int, kind: str) -> np.ndarray:
        self._check_world("bcast")
        a = np.ascontiguousarray(arr)
        self.rec.add("Bcast", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        with self.timed():
            data = self.comm.bcast(a.tobytes(), root)
        return np.frombuffer(data, dtype=a.dtype).reshape(a.shape).copy()

    def split(self, color: int, key: int) -> Transport:
        # Every rank learns every (color, key) without recording it: bookkeeping.
        import pickle

        mine = pickle.dumps((color, key, self.comm.rank))
        allv = [pickle.loads(b) for b in self.comm.alltoall([mine] * self.comm.size)]
        members = [r for c, k, r in sorted(allv, key=lambda t: (t[1], t[2])) if c == color]
        return OursTransport(self.comm, members, self.rec, gid=color + 1 + 64 * (self.gid + 1))

    def gather_obj(self, obj: Any) -> list[Any] | None:
        import pickle

        data = pickle.dumps(obj)
        if self.comm.size == 1:
            return [obj]
        if self.comm.rank == 0:
            got = [obj] + [pickle.loads(self.comm.recv(j, 7)) for j in range(1, self.comm.size)]
            return got
        self.comm.send(0, data, 7)
        return None

    def close(self) -> None:
        if self.world:
            self.comm.close()


# ---- real MPI (mpi4py) -----------------------------------------------------------------


class MpiTransport(Transport):
    """Over an mpi4py communicator (ranks started by ``mpirun``)."""

    name = "mpi"

    def __init__(self, comm: Any = None, rec: Recorder | None = None) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.rec = rec or Recorder()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    def isend(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> Any:
        buf = np.ascontiguousarray(arr)
        self.rec.add("Isend", kind, buf.nbytes)
        with self.timed():
            return (self.comm.Isend(buf, dest, tag), None, buf)

    def irecv(self, source: int, tag: int, count: int, dtype: Any = np.float64) -> Any:
        buf = np.empty(count, dtype=dtype)
        with self.timed():
            return (self.comm.Irecv(buf, source, tag), buf, None)

    def waitall(self, reqs: Sequence[Any]) -> list[np.ndarray | None]:
        with self.timed():
            self.MPI.Request.Waitall([r for r, _, _ in reqs])
        return [buf for _, buf, _ in reqs]

    def send(self, dest: int, arr: np.ndarray, tag: int, kind: str) -> None:
        buf = np.ascontiguousarray(arr)
        self.rec.add("Send", kind, buf.nbytes)
        with self.timed():
            self.comm.Send(buf, dest, tag)

    def alltoall(self, blocks: np.ndarray, kind: str) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks)
        per = blocks[0].nbytes
        self.rec.add("Alltoall", kind, per, per * (self.size - 1))
        out = np.empty_like(blocks)
        with self.timed():
            self.comm.Alltoall(blocks, out)
        return out

    def alltoallv(
        self, blocks: Sequence[np.ndarray], counts: Sequence[int], kind: str
    ) -> list[np.ndarray]:
        from mpi4py.util.dtlib import from_numpy_dtype

        dt = blocks[0].dtype
        sizes = [b.nbytes for j, b in enumerate(blocks) if j != self.rank]
        self.rec.add("Alltoallv", kind, round(sum(sizes) / max(1, len(sizes))), sum(sizes))
        scounts = np.array([b.size for b in blocks], dtype=np.int64)
        sdispl = np.concatenate([[0], np.cumsum(scounts)[:-1]])
        rcounts = np.asarray(counts, dtype=np.int64)
        rdispl = np.concatenate([[0], np.cumsum(rcounts)[:-1]])
        send = np.concatenate([np.ascontiguousarray(b) for b in blocks]).astype(dt, copy=False)
        recv = np.empty(int(rcounts.sum()), dtype=dt)
        with self.timed():
            mt = from_numpy_dtype(dt)
            self.comm.Alltoallv(
                [send, (scounts.tolist(), sdispl.tolist()), mt],
                [recv, (rcounts.tolist(), rdispl.tolist()), mt],
            )
        return [recv[int(d) : int(d) + int(c)] for d, c in zip(rdispl, rcounts, strict=True)]

    def allreduce(self, arr: np.ndarray, op: str, kind: str) -> np.ndarray:
        a = np.ascontiguousarray(arr)
        self.rec.add("Allreduce", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        out = np.empty_like(a)
        with self.timed():
            self.comm.Allreduce(a, out, op=self._ops[op])
        return out

    def reduce(self, arr: np.ndarray, op: str, root: int, kind: str) -> np.ndarray | None:
        a = np.ascontiguousarray(arr)
        self.rec.add("Reduce", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        out = np.empty_like(a) if self.rank == root else None
        with self.timed():
            self.comm.Reduce(a, out, op=self._ops[op], root=root)
        return out

    def bcast(self, arr: np.ndarray, root: int, kind: str) -> np.ndarray:
        a = np.array(arr, copy=True)
        self.rec.add("Bcast", kind, a.nbytes, a.nbytes if self.size > 1 else 0)
        with self.timed():
            self.comm.Bcast(a, root=root)
        return a

    def split(self, color: int, key: int) -> Transport:
        return MpiTransport(self.comm.Split(color, key), self.rec)

    def gather_obj(self, obj: Any) -> list[Any] | None:
        res: list[Any] | None = self.comm.gather(obj, root=0)
        return res
