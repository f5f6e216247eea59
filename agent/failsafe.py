"""Fail-safe state machine: lose the controller -> everything runnable.

Pure (an injected clock), so the transitions are unit-tested without sockets.
The agent calls ``heard()`` on every authenticated frame of an established
session and ``poll()`` from its loop; ``poll()`` returns the transition to act
on exactly once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable


class Mode(enum.Enum):
    CONTROLLED = "controlled"  # obeying quantum commands
    FAILSAFE = "failsafe"  # controller silent: all thawed, default weights, Linux decides


class Transition(enum.Enum):
    NONE = "none"
    ACTIVATE = "activate"  # CONTROLLED -> FAILSAFE: thaw all, default weights
    RESUME = "resume"  # FAILSAFE -> CONTROLLED: obey commands again


class FailSafe:
    def __init__(self, timeout: float, clock: Callable[[], float]) -> None:
        if timeout <= 0:
            raise ValueError("failsafe timeout must be > 0")
        self.timeout = timeout
        self._clock = clock
        # Start as if just heard: a freshly (re)started agent gives the
        # controller one timeout to show up before it thaws reattached jobs.
        self._last = clock()
        self.mode = Mode.CONTROLLED
        self.activations = 0
        self.ever_heard = False

    def heard(self) -> Transition:
        """An authenticated frame arrived from the controller."""
        self._last = self._clock()
        self.ever_heard = True
        if self.mode is Mode.FAILSAFE:
            self.mode = Mode.CONTROLLED
            return Transition.RESUME
        return Transition.NONE

    def poll(self) -> Transition:
        if self.mode is Mode.CONTROLLED and self.age() > self.timeout:
            self.mode = Mode.FAILSAFE
            self.activations += 1
            return Transition.ACTIVATE
        return Transition.NONE

    def age(self) -> float:
        """Seconds since the controller was last heard (or since start)."""
        return max(0.0, self._clock() - self._last)

    def time_left(self) -> float:
        """Seconds until poll() would activate (0 if due or already failsafe)."""
        if self.mode is Mode.FAILSAFE:
            return float("inf")
        return max(0.0, self.timeout - self.age())

    @property
    def active(self) -> bool:
        return self.mode is Mode.FAILSAFE
