"""What the flood test and benchmarks/flood.py watch: switches and status answers.

* :func:`switch_gaps`: the freezer state of every job group, sampled every 5 ms;
  per node, the longest time it went without a change (with two gangs
  alternating, a node switches every quantum, so this minus the quantum is the
  longest a switch came late);
* :class:`StatusProbe`: a thread asking every daemon for ``status`` every 0.2 s,
  keeping each one's slowest answer and any failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support.security import Sec


def switch_gaps(
    sec: Sec,
    seconds: float,
    nodes: tuple[str, ...] = ("n0", "n1"),
    until: Callable[[], bool] | None = None,
) -> dict[str, float]:
    """Sampled for ``seconds``, or until ``until()`` holds when it is given."""
    last: dict[str, tuple[frozenset[str], float]] = {}
    longest: dict[str, float] = {}
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end and not (until is not None and until()):
        frozen: dict[str, set[str]] = {}
        for (node, job), state in sec.live.freezer_states().items():
            if state == "FROZEN":
                frozen.setdefault(node, set()).add(job)
        for node in nodes:
            cur = frozenset(frozen.get(node, set()))
            prev = last.get(node)
            if prev is None or prev[0] != cur:
                last[node] = (cur, now)
            longest[node] = max(longest.get(node, 0.0), now - last[node][1])
        time.sleep(0.005)
    return longest


class StatusProbe:
    def __init__(self, sec: Sec, every: float = 0.2) -> None:
        self.sec = sec
        self.every = every
        self.slowest: dict[str, float] = {}
        self.answers: dict[str, int] = {}
        self.failed: list[str] = []
        # agent connections closed before their hello: under a flood from the same
        # address the agent evicts the oldest unauthenticated ones (docs/security.md)
        self.evicted: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StatusProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(60)

    def _agent_status(self, name: str, deadline: float) -> None:
        """Status from an agent, retried while it closes the connection before the
        hello (an eviction, the documented limit), as a legitimate client would."""
        while True:
            try:
                self.sec.agent_status(name, timeout=max(0.1, deadline - time.monotonic()))
                return
            except ConnectionError as e:
                if "closed the connection" not in str(e) or time.monotonic() > deadline:
                    raise
                self.evicted.append(f"{name}: {e}")

    def _run(self) -> None:
        names = ["controller", *(n["name"] for n in self.sec.nodes())]
        while not self._stop.is_set():
            for name in names:
                t0 = time.monotonic()
                try:
                    if name == "controller":
                        with self.sec.live.client(retry=10.0) as c:
                            c.request("status")
                    else:
                        self._agent_status(name, deadline=t0 + 10.0)
                except Exception as e:
                    self.failed.append(f"{name}: {type(e).__name__}: {e}")
                    continue
                took = time.monotonic() - t0
                self.slowest[name] = max(self.slowest.get(name, 0.0), took)
                self.answers[name] = self.answers.get(name, 0) + 1
            self._stop.wait(self.every)
