"""Availability profile: free nodes over future time as a step function.

Conservative backfilling (Rajaei et al. 2008 §2 and §3.1 contrast it with the aggressive
EASY variant) gives every waiting job a reservation; the profile is the book in
which those reservations and the estimated ends of running jobs are written.

Representation: two parallel lists. ``times[i]`` is a breakpoint and
``free[i]`` the number of free nodes on ``[times[i], times[i+1])``; the last
segment extends to infinity. ``times[0]`` is the profile's origin (the last
time it was advanced to): nothing before it is kept, because reservations are
never made in the past.

Plain lists are used instead of a tree because profiles stay short (one or two
breakpoints per running or waiting job) and ``list.insert``/``bisect`` run in C;
a balanced tree in pure Python is slower at these sizes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

_INF = float("inf")


class Availability:
    """Free nodes over time, from ``origin`` on.

    All operations assume times at or after the origin; the caller advances
    the origin with :meth:`advance` as its clock moves.
    """

    __slots__ = ("free", "nodes", "times")

    def __init__(self, nodes: int, origin: float = 0.0) -> None:
        self.nodes = nodes
        self.times: list[float] = [origin]
        self.free: list[int] = [nodes]

    def __repr__(self) -> str:
        steps = ", ".join(f"{t:g}:{f}" for t, f in zip(self.times, self.free, strict=True))
        return f"Availability({self.nodes}, [{steps}])"

    @property
    def origin(self) -> float:
        """The earliest time the profile describes."""
        return self.times[0]

    def advance(self, now: float) -> None:
        """Forget everything before ``now`` (no-op if ``now`` is not later)."""
        times = self.times
        if now <= times[0]:
            return
        # Last breakpoint at or before now: its value holds at now.
        k = bisect_right(times, now) - 1
        if k > 0:
            del times[:k]
            del self.free[:k]
        times[0] = now

    def free_at(self, t: float) -> int:
        """Free nodes at time ``t`` (``t`` >= origin)."""
        return self.free[max(bisect_right(self.times, t) - 1, 0)]

    def _split(self, t: float) -> int:
        """Index of a breakpoint at ``t``, inserting one if needed."""
        times = self.times
        i = bisect_left(times, t)
        if i < len(times) and times[i] == t:
            return i
        times.insert(i, t)
        # A new breakpoint inherits the value of the segment it cuts.
        self.free.insert(i, self.free[i - 1])
        return i

    def add(self, start: float, end: float, delta: int) -> None:
        """Add ``delta`` free nodes on ``[start, end)`` (negative to reserve).

        ``start`` is clipped to the origin; an empty interval changes nothing.
        Adjacent equal segments are merged again so the profile does not grow
        with every reservation that is later released.
        """
        times = self.times
        if start < times[0]:
            start = times[0]
        if not end > start:
            return
        i = self._split(start)
        j = len(times) if end == _INF else self._split(end)
        free = self.free
        for k in range(i, j):
            free[k] += delta
        # Merge around the two edges (the only places where equal
        # neighbours may have appeared).
        if j < len(times) and free[j] == free[j - 1]:
            del times[j]
            del free[j]
        if i > 0 and free[i] == free[i - 1]:
            del times[i]
            del free[i]

    def reserve(self, start: float, duration: float, size: int) -> None:
        """Take ``size`` nodes on ``[start, start + duration)``."""
        self.add(start, start + duration, -size)

    def release(self, start: float, duration: float, size: int) -> None:
        """Give back what :meth:`reserve` took."""
        self.add(start, start + duration, size)

    def earliest(self, size: int, duration: float, limit: float = _INF) -> float | None:
        """Earliest start >= origin where ``size`` nodes are free for ``duration``.

        Returns None when no such start is strictly before ``limit`` (used by
        compression, which only cares about moving a job earlier). A zero
        duration still needs ``size`` nodes free at the start instant.
        """
        times = self.times
        free = self.free
        n = len(times)
        # Only breakpoints before the limit are candidate starts.
        stop = n if limit == _INF else bisect_left(times, limit)
        i = 0
        while i < stop:
            if free[i] < size:
                i += 1
                continue
            end = times[i] + duration
            k = i + 1
            # Walk the window; stop at the first segment that is too full.
            while k < n and times[k] < end:
                if free[k] < size:
                    break
                k += 1
            else:
                return times[i]
            # Segment k is too full: no start before it can work either.
            i = k + 1
        # Unreachable while the last segment has all nodes free, but keep the
        # type checker and a corrupted profile honest.
        return None

    def earliest_moving(
        self, size: int, duration: float, start: float, limit: float
    ) -> float | None:
        """Earliest start before ``limit`` for a job already reserved at ``start``.

        Same as taking the job's own reservation out and calling
        :meth:`earliest`, without rewriting the profile: compression asks this
        for every waiting job and most of them stay where they are.
        """
        times = self.times
        free = self.free
        # Make the reservation's edges breakpoints so that "inside own
        # reservation" is a plain index range.
        lo = self._split(start)
        hi = self._split(start + duration) if duration > 0 else lo
        n = len(times)
        stop = bisect_left(times, limit)
        found: float | None = None
        i = 0
        while i < stop:
            if free[i] + (size if lo <= i < hi else 0) < size:
                i += 1
                continue
            end = times[i] + duration
            k = i + 1
            while k < n and times[k] < end:
                if free[k] + (size if lo <= k < hi else 0) < size:
                    break
                k += 1
            else:
                found = times[i]
                break
            i = k + 1
        # Drop the edges again if they were not real steps.
        if lo < hi < len(times) and free[hi] == free[hi - 1]:
            del times[hi]
            del free[hi]
        if 0 < lo < len(times) and free[lo] == free[lo - 1]:
            del times[lo]
            del free[lo]
        return found
