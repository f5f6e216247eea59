"""What one simulated rank executes: steps of computation, sends and waits.

A rank's program is a list of *segments*, each a tuple of steps run ``count``
times; a step is

    (cpu_s, sends, recvs, recv_bytes, flags)

-- compute ``cpu_s`` seconds of a reference CPU (a node of speed 1), then
send each ``(dst rank, bytes)`` of ``sends`` (non-blocking, in order), then
wait until one message from each rank of ``recvs`` has arrived (messages
between two ranks are received in the order they were sent, as over the
library's TCP connections), ``recv_bytes`` being what those carry. ``flags``:
``COLL_ON`` (entering a collective, before the sends) and ``COLL_OFF``
(leaving it, after the waits), for HYBRID (Yu & Byun 2011 §2.3.2).

Programs come from two places:

* :func:`from_trace` -- a kernel's recorded message trace (apps/mp/trace.py):
  one NPB repetition = prologue + the recorded steady-state iteration
  repeated NPB's iteration count + epilogue;
* :func:`synthetic` -- the synthetic program's parameters
  (apps/synthetic.py: compute, ``--comm`` rounds, the barrier), with the
  library's collective algorithms (apps/mp/collectives.py).

Pure: no I/O (traces are read by testbed/sim/cdc/traces.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

COLL_ON = 1
COLL_OFF = 2

Step = tuple[float, tuple[tuple[int, int], ...], tuple[int, ...], int, int]
Segment = tuple[tuple[Step, ...], int]


@dataclass(frozen=True)
class RankProgram:
    """One rank's segments (module docstring); ``body`` marks the repeated iterations."""

    segments: tuple[Segment, ...]
    body: tuple[bool, ...] = ()  # per segment: an iteration body (what a fluid jump may shorten)

    def cpu_s(self) -> float:
        return sum(sum(s[0] for s in steps) * n for steps, n in self.segments)

    def messages(self) -> int:
        return sum(sum(len(s[1]) for s in steps) * n for steps, n in self.segments)

    def steps(self) -> int:
        return sum(len(steps) * n for steps, n in self.segments)


@dataclass(frozen=True)
class JobProgram:
    """Every rank's program of one job, and what it is."""

    app: str
    ranks: tuple[RankProgram, ...]
    label: str = ""
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def repeated(self, reps: int) -> JobProgram:
        """The program run ``reps`` times back to back (a job of several repetitions)."""
        if reps < 1:
            raise ValueError(f"repetitions must be >= 1, got {reps}")
        return JobProgram(
            self.app,
            tuple(RankProgram(r.segments * reps, r.body * reps) for r in self.ranks),
            self.label,
            {**self.info, "reps": reps * int(self.info.get("reps", 1))},
        )

    def comm_share_estimate(self) -> float:
        """Messages per CPU-second of the busiest rank (how fine-grained the job is)."""
        r = max(self.ranks, key=lambda p: p.cpu_s())
        cpu = r.cpu_s()
        return r.messages() / cpu if cpu > 0 else 0.0


# ---- steps from a trace ---------------------------------------------------------------------


#: Compute between a step's sends and its wait shorter than this joins the compute
#: before the sends (the transport's own bookkeeping between Isend and Wait, 1-4 µs in the
#: recorded traces): the sends leave that much early instead of costing a step of their own.
MERGE_S = 10e-6


def steps_of(ops: Sequence[Sequence[Any]], merge_s: float = MERGE_S) -> list[Step]:
    """Turn trace ops (apps/mp/trace.py) into steps.

    A step ends at each wait; compute before a send or a wait joins that
    step's compute (between the sends and the wait only when shorter than
    ``merge_s``, see MERGE_S); collective entry flags the next send or
    wait's step, exit the step whose wait it follows. Trailing compute
    becomes a step with nothing to send or wait for.
    """
    out: list[Step] = []
    cpu = 0.0
    sends: list[tuple[int, int]] = []
    flags = 0
    for op in ops:
        kind = op[0]
        if kind == "c":
            if sends and float(op[1]) >= merge_s:  # real compute after sends: they leave first
                out.append((cpu, tuple(sends), (), 0, flags))
                cpu, sends, flags = 0.0, [], 0
            cpu += float(op[1])
        elif kind == "s":
            sends.append((int(op[1]), int(op[2])))
        elif kind == "w":
            recvs = tuple(int(m[0]) for m in op[1])
            nbytes = sum(int(m[1]) for m in op[1])
            out.append((cpu, tuple(sends), recvs, nbytes, flags))
            cpu, sends, flags = 0.0, [], 0
        elif kind == "on":
            if sends:
                out.append((cpu, tuple(sends), (), 0, flags))
                cpu, sends, flags = 0.0, [], 0
            flags |= COLL_ON
        elif kind == "off":
            if sends or cpu > 0 or flags:
                out.append((cpu, tuple(sends), (), 0, flags | COLL_OFF))
                cpu, sends, flags = 0.0, [], 0
            elif out:
                c, s, r, b, f = out[-1]
                out[-1] = (c, s, r, b, f | COLL_OFF)
        elif kind == "m":
            continue
        else:
            raise ValueError(f"unknown trace op {op!r}")
    if sends or cpu > 0 or flags:
        out.append((cpu, tuple(sends), (), 0, flags))
    return out


@dataclass(frozen=True)
class TraceParts:
    """One rank's recorded repetition cut at its marks."""

    prologue: list[list[Any]]
    iterations: list[list[list[Any]]]
    epilogue: list[list[Any]]


def split_marks(ops: Sequence[Sequence[Any]]) -> TraceParts:
    """The first repetition (``rep`` mark to the next ``rep`` or ``end``) cut at ``iter`` and
    ``post`` marks."""
    start = next((i for i, o in enumerate(ops) if o[0] == "m" and o[1] == "rep"), None)
    if start is None:
        raise ValueError("the trace has no 'rep' mark (recorded without apps/npb's runner?)")
    end = next(
        (i for i in range(start + 1, len(ops)) if ops[i][0] == "m" and ops[i][1] in ("rep", "end")),
        len(ops),
    )
    rep = [list(o) for o in ops[start + 1 : end]]
    prologue: list[list[Any]] = []
    iterations: list[list[list[Any]]] = []
    epilogue: list[list[Any]] = []
    cur = prologue
    for o in rep:
        if o[0] == "m" and o[1] == "iter":
            iterations.append([])
            cur = iterations[-1]
        elif o[0] == "m" and o[1] == "post":
            cur = epilogue
        elif o[0] != "m":
            cur.append(o)
    return TraceParts(prologue, iterations, epilogue)


def _steady(iterations: list[list[list[Any]]]) -> list[Step]:
    """The iteration the simulator repeats: the recorded iterations' mean compute per step
    where they have one shape (after the first, which may warm up), else the last."""
    if not iterations:
        return []
    shaped = [steps_of(it) for it in iterations]
    last = shaped[-1]
    same = [s for s in shaped[1:] if [x[1:] for x in s] == [x[1:] for x in last]] or [last]
    out: list[Step] = []
    for k, st in enumerate(last):
        cpu = sum(s[k][0] for s in same) / len(same)
        out.append((cpu, st[1], st[2], st[3], st[4]))
    return out


def from_trace(
    app: str,
    rank_ops: Sequence[Sequence[Sequence[Any]]],
    iterations: int,
    label: str = "",
    info: dict[str, Any] | None = None,
) -> JobProgram:
    """One NPB repetition per rank: prologue, the steady iteration × ``iterations``, epilogue."""
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    ranks = []
    for ops in rank_ops:
        parts = split_marks(ops)
        segs: list[Segment] = []
        body: list[bool] = []
        pro = steps_of(parts.prologue)
        if pro:
            segs.append((tuple(pro), 1))
            body.append(False)
        it = _steady(parts.iterations)
        if it:
            segs.append((tuple(it), iterations))
            body.append(True)
        epi = steps_of(parts.epilogue)
        if epi:
            segs.append((tuple(epi), 1))
            body.append(False)
        ranks.append(RankProgram(tuple(segs), tuple(body)))
    return JobProgram(app, tuple(ranks), label, dict(info or {}))


# ---- the synthetic program -------------------------------------------------------------------
# The library's collectives (apps/mp/collectives.py), as the messages each rank sends and
# waits for: linear barrier through rank 0, binomial bcast, linear reduce, allreduce =
# reduce + bcast, alltoall = direct exchange with every rank.


def _barrier(r: int, n: int) -> list[Step]:
    if r == 0:
        return [
            (0.0, (), tuple(range(1, n)), 0, COLL_ON),
            (0.0, tuple((j, 1) for j in range(1, n)), (), 0, COLL_OFF),
        ]
    return [(0.0, ((0, 0),), (0,), 1, COLL_ON | COLL_OFF)]


def _bcast(
    r: int, n: int, nbytes: int
) -> list[tuple[tuple[tuple[int, int], ...], tuple[int, ...]]]:
    """(sends, recvs) of one rank in a binomial bcast from rank 0: receive, then send."""
    mask = 1
    recv: tuple[int, ...] = ()
    while mask < n:
        if r & mask:
            recv = ((r - mask) % n,)
            break
        mask <<= 1
    mask >>= 1
    sends = []
    while mask > 0:
        if r + mask < n:
            sends.append(((r + mask) % n, nbytes))
        mask >>= 1
    out: list[tuple[tuple[tuple[int, int], ...], tuple[int, ...]]] = []
    if recv:
        out.append(((), recv))
    if sends:
        out.append((tuple(sends), ()))
    return out


def _allreduce(r: int, n: int, nbytes: int) -> list[Step]:
    """Reduce to rank 0 (linear), then bcast (binomial), flagged as one collective."""
    size = nbytes + 1  # the library's type byte
    steps: list[Step] = []
    if r == 0:
        steps.append((0.0, (), tuple(range(1, n)), size * (n - 1), 0))
    else:
        steps.append((0.0, ((0, size),), (), 0, 0))
    for sends, recvs in _bcast(r, n, size):
        steps.append((0.0, sends, recvs, size * len(recvs), 0))
    c, s, rv, b, f = steps[0]
    steps[0] = (c, s, rv, b, f | COLL_ON)
    c, s, rv, b, f = steps[-1]
    steps[-1] = (c, s, rv, b, f | COLL_OFF)
    return steps


def _alltoall(r: int, n: int, nbytes: int) -> list[Step]:
    others = tuple((r + k) % n for k in range(1, n))
    return [(0.0, tuple((j, nbytes) for j in others), others, nbytes * len(others), 3)]


def _nn(r: int, n: int, nbytes: int) -> list[Step]:
    left, right = (r - 1) % n, (r + 1) % n
    peers = (left,) if left == right else (left, right)
    return [(0.0, tuple((p, nbytes) for p in peers), peers, nbytes * len(peers), 0)]


def synthetic(
    size: int,
    compute_s: float,
    comm: str,
    msg_bytes: int,
    rounds: int,
    iterations: int,
    label: str = "synthetic",
) -> JobProgram:
    """apps/synthetic.py's loop: compute, ``rounds`` exchanges in ``comm``, a barrier."""
    if comm not in ("none", "nn", "a2a", "allreduce"):
        raise ValueError(f"comm must be none, nn, a2a or allreduce, got {comm!r}")
    if size < 1 or iterations < 1 or compute_s < 0 or msg_bytes < 0 or rounds < 0:
        raise ValueError("size and iterations >= 1, compute, bytes and rounds >= 0")
    ranks = []
    for r in range(size):
        it: list[Step] = []
        if size > 1 and comm != "none":
            for _ in range(rounds):
                if comm == "nn":
                    it += _nn(r, size, msg_bytes)
                elif comm == "a2a":
                    it += _alltoall(r, size, msg_bytes)
                else:
                    it += _allreduce(r, size, max(8, msg_bytes // 8 * 8))
        if size > 1:
            it += _barrier(r, size)
        if not it:
            it = [(0.0, (), (), 0, 0)]
        c, s, rv, b, f = it[0]
        it[0] = (c + compute_s, s, rv, b, f)
        ranks.append(RankProgram(((tuple(it), iterations),), (True,)))
    info = {
        "compute_s": compute_s,
        "comm": comm,
        "msg_bytes": msg_bytes,
        "rounds": rounds,
        "iterations": iterations,
    }
    return JobProgram("synthetic", tuple(ranks), label, info)
