"""A fixed window of the last N float observations, allocated once.

The controller keeps the last 10,000 quantum skews, thaw skews, lateness and
freeze confirmations for its p50/p99. A ``deque`` of floats grows by a float
object and a slot per observation until it is full (at 0.2 s quanta, 2,000 s for
the per-quantum windows), which a soak reads as memory growth; this array of
doubles takes its full size at start and never changes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence


class Window:
    """The last ``size`` values appended, oldest first when iterated."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"window size must be >= 1, got {size}")
        self._buf = array("d", bytes(8 * size))
        self._size = size
        self._next = 0  # where the next value goes
        self._count = 0

    def append(self, v: float) -> None:
        self._buf[self._next] = v
        self._next = (self._next + 1) % self._size
        if self._count < self._size:
            self._count += 1

    def extend(self, values: Sequence[float]) -> None:
        """``append`` of each value, in two slice writes (a quantum's per-node figures)."""
        vals = list(values[-self._size :])
        n, i = len(vals), self._next
        first = min(n, self._size - i)
        self._buf[i : i + first] = array("d", vals[:first])
        if n > first:
            self._buf[: n - first] = array("d", vals[first:])
        self._next = (i + n) % self._size
        self._count = min(self._size, self._count + n)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[float]:
        start = (self._next - self._count) % self._size
        for i in range(self._count):
            yield self._buf[(start + i) % self._size]

    def clear(self) -> None:
        self._next = self._count = 0
