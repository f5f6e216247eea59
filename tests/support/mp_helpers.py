"""Helpers for the message-library tests (tests/live/apps/mp/, tests/unit/apps/mp/).

* ``spmd(n, body)``: n ranks as threads of this process on 127.0.0.1, each
  with a pre-bound listening socket (no port races); the default waiting
  action is ``block`` so that threads do not fight over the GIL while
  spinning (tests that want spinning say so).
* ``RankProcess``: one rank in its own process (``python -m tests.support.mp_rank``),
  for what threads cannot show: process CPU time, a killed peer, timing
  without the GIL in the way.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apps.mp import Comm, WaitMode

ROOT = Path(__file__).resolve().parents[2]
BLOCK = WaitMode("block", "block")


def listeners(n: int) -> tuple[int, list[socket.socket]]:
    """n consecutive free ports from one base (ranks on one address use base + rank)."""
    for _ in range(100):
        base = random.randrange(20000, 31900)  # below the ephemeral range (tests/ports.py)
        socks: list[socket.socket] = []
        try:
            for k in range(n):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                socks.append(s)
                s.bind(("127.0.0.1", base + k))
                s.listen(16)
            return base, socks
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def free_base(n: int) -> int:
    """A base port with n free ports after it (free now; nothing holds them)."""
    base, socks = listeners(n)
    for s in socks:
        s.close()
    return base


def spmd(
    n: int,
    body: Callable[[Comm], Any],
    timeout: float = 30.0,
    order: list[int] | None = None,
    **kw: Any,
) -> list[Any]:
    """Run ``body`` on n ranks (threads); re-raise the first failure."""
    base, socks = listeners(n)
    out: list[Any] = [None] * n
    errs: list[BaseException] = []
    kw.setdefault("wait", BLOCK)

    def main(r: int) -> None:
        try:
            with Comm(r, n, port=base, job="t", listener=socks[r], connect_timeout=10, **kw) as c:
                out[r] = body(c)
        except BaseException as e:
            errs.append(e)

    ts = {r: threading.Thread(target=main, args=(r,), daemon=True) for r in range(n)}
    for r in order or range(n):
        ts[r].start()
    for t in ts.values():
        t.join(timeout)
    if errs:
        raise errs[0]
    assert all(not t.is_alive() for t in ts.values()), "a rank hung"
    return out


class RankProcess:
    """Rank ``rank`` of a job of ``size`` in a child process running a scenario of mp_rank."""

    def __init__(
        self, scenario: str, rank: int, size: int, port: int, env: dict[str, str] | None = None
    ) -> None:
        full = dict(os.environ)
        for k in list(full):
            if k.startswith("COSCHED_"):
                del full[k]
        full.update(
            COSCHED_RANK=str(rank),
            COSCHED_SIZE=str(size),
            COSCHED_PORT=str(port),
            COSCHED_JOB="t",
            PYTHONPATH=str(ROOT),
        )
        full.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mp_rank", scenario],
            cwd=ROOT,
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def line(self) -> dict[str, Any]:
        """The child's next JSON line (it prints one when ready and one with results)."""
        assert self.proc.stdout is not None
        raw = self.proc.stdout.readline()
        if not raw:
            self.proc.wait(10)
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"rank process ended (rc {self.proc.returncode}): {err}")
        return dict(json.loads(raw))

    def finish(self, timeout: float = 20.0) -> tuple[int, str]:
        _out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
