"""A sweep's progress on stderr: runs done, failed and the time left.

On a terminal, a tqdm bar (done/total, failed in its postfix, ETA from the runs
finished in this invocation, so stored runs do not make it look fast); in a log
(not a terminal) one line at most every ``every`` seconds and one at the end.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(
        self,
        total: int,
        done: int,
        desc: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        every: float = 30.0,
    ) -> None:
        self.total, self.done, self.failed, self.desc = total, done, 0, desc
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.every = every
        self.t0 = self.last = time.monotonic()
        self.start_done = done
        self.bar: Any = None
        self.closed = False
        if enabled and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=done,
                desc=desc,
                unit="run",
                file=self.stream,
                dynamic_ncols=True,
                smoothing=0.1,
            )
            self.bar.set_postfix_str("failed 0", refresh=False)

    def update(self, ok: bool) -> None:
        self.done += 1
        if not ok:
            self.failed += 1
        if self.bar is not None:
            if not ok:
                self.bar.set_postfix_str(f"failed {self.failed}", refresh=False)
            self.bar.update(1)
        elif self.enabled and time.monotonic() - self.last >= self.every:
            self._line()

    def eta(self) -> float | None:
        ran = self.done - self.start_done
        if ran <= 0:
            return None
        return (time.monotonic() - self.t0) / ran * (self.total - self.done)

    def _line(self) -> None:
        self.last = time.monotonic()
        eta = self.eta()
        left = "" if eta is None else f", ETA {_clock(eta)}"
        print(
            f"{self.desc}: {self.done}/{self.total} done, {self.failed} failed, "
            f"{_clock(self.last - self.t0)} elapsed{left}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.done > self.start_done:
            self._line()
