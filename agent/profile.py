"""A debug switch: profile the agent's loop thread between two SIGUSR2 (issue 32 item 2).

The first SIGUSR2 starts a :mod:`cProfile` profile of the thread the signal is handled
on (the main thread: the selectors loop, agent/daemon.py); the next one stops it and
writes ``profile-<pid>-<n>.pstats`` into the agent's run directory, logging the path.
A signal rather than a flag or an environment variable so that a running cluster's
agents can be profiled around one measured stretch and nothing else, with nothing to
restart (benchmarks/agent_boundary_cost.py reads the files). cProfile times every
Python call, so a profiled agent is slower than an unprofiled one: the profile says
where the loop's time goes, not how much there is (the benchmark measures that apart).
"""

from __future__ import annotations

import cProfile
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType

log = logging.getLogger("agent")


class LoopProfile:
    """Toggled by :meth:`toggle` (the SIGUSR2 handler); ``out_dir()`` where files go."""

    def __init__(self, out_dir: Callable[[], Path]) -> None:
        self.out_dir = out_dir
        self.prof: cProfile.Profile | None = None
        self.written: list[Path] = []

    def toggle(self, signum: int = 0, frame: FrameType | None = None) -> None:
        if self.prof is None:
            self.prof = cProfile.Profile()
            self.prof.enable()
            log.warning("profiling the agent's loop until the next SIGUSR2")
            return
        self.prof.disable()
        path = self.out_dir() / f"profile-{os.getpid()}-{len(self.written) + 1}.pstats"
        try:
            self.prof.dump_stats(str(path))
        except OSError as e:
            log.warning("cannot write the loop's profile to %s: %s", path, e)
        else:
            self.written.append(path)
            log.warning("loop profile written to %s", path)
        self.prof = None

    def install(self) -> None:
        signal.signal(signal.SIGUSR2, self.toggle)
