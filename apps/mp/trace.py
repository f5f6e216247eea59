"""A message trace of one rank: what it computed between calls and what it sent and waited for.

The simulator (testbed/sim/cdc/) replays the NPB-like kernels from traces of
their own runs over this library (docs/simulator.md "CDC"). A trace is the
sequence of a rank's operations, recorded where they happen:

* ``["c", s]`` -- CPU seconds (this thread's, ``time.thread_time``) spent
  between two calls of the kernel's transport: the computation, without
  the library's own work or any waiting;
* ``["s", dst, n]`` -- a message of ``n`` payload bytes to rank ``dst``
  (every message the library puts on a connection, collectives expanded
  into theirs; messages to itself are local copies and not recorded);
* ``["w", [[src, n], ...]]`` -- a wait that needed these received messages
  (a ``wait``/``waitall``/``recv``, or one inside a collective), in the
  order they completed;
* ``["on"]`` / ``["off"]`` -- entering and leaving a collective (HYBRID);
* ``["m", label]`` -- a mark the kernel sets (the start of an NPB iteration).

Recording is off unless ``COSCHED_TRACE`` names a directory: each rank then
writes ``<dir>/rank<r>.json`` when its communicator closes. The cost when
off is one attribute test per call.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

TRACE_ENV = "COSCHED_TRACE"

Op = list[Any]


class Tracer:
    """Collects one rank's operations (module docstring)."""

    def __init__(self, rank: int, size: int, out_dir: str | None = None) -> None:
        self.rank = rank
        self.size = size
        self.out_dir = out_dir
        self.ops: list[Op] = []
        self.depth = 0
        self.cpu_mark = time.thread_time()

    @classmethod
    def from_env(cls, rank: int, size: int, env: Any = None) -> Tracer | None:
        d = (os.environ if env is None else env).get(TRACE_ENV)
        return cls(rank, size, d) if d else None

    # ---- compute accounting: CPU outside the library's calls ----------------------------
    def enter(self) -> None:
        if self.depth == 0:
            c = time.thread_time() - self.cpu_mark
            if c > 0:
                if self.ops and self.ops[-1][0] == "c":
                    self.ops[-1][1] += c
                else:
                    self.ops.append(["c", c])
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.cpu_mark = time.thread_time()

    # ---- events -------------------------------------------------------------------------
    def send(self, dst: int, nbytes: int) -> None:
        if dst != self.rank:
            self.ops.append(["s", dst, nbytes])

    def wait(self, got: list[tuple[int, int]]) -> None:
        msgs = [[s, n] for s, n in got if s != self.rank]
        if msgs:
            self.ops.append(["w", msgs])

    def coll(self, on: bool) -> None:
        self.ops.append(["on"] if on else ["off"])

    def mark(self, label: str) -> None:
        self.ops.append(["m", label])

    # ---- output -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "size": self.size, "ops": self.ops}

    def write(self) -> Path | None:
        if not self.out_dir:
            return None
        path = Path(self.out_dir) / f"rank{self.rank}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        return path
