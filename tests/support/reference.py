"""A CPU reference measured in the same test: what the host actually gives one busy
process right now (issue 13: timing assertions relative to the host, not absolute)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import TracebackType

import psutil

SPIN = [sys.executable, "-c", "while True: pass"]


class Reference:
    """A busy loop beside the thing measured; ``share()`` is the fraction of one core it
    got between ``mark()`` and now (1.0 on an idle host, less on a busy one)."""

    def __enter__(self) -> Reference:
        self.proc = subprocess.Popen(SPIN)
        self.ps = psutil.Process(self.proc.pid)
        time.sleep(0.1)
        self.mark()
        return self

    def mark(self) -> None:
        self.c0, self.t0 = self._cpu(), time.monotonic()

    def _cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def share(self) -> float:
        return (self._cpu() - self.c0) / max(1e-9, time.monotonic() - self.t0)

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.proc.kill()
        self.proc.wait()
