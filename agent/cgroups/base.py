"""The cgroup driver interface shared by the v1 and v2 backends.

Paths handed to a driver are *relative* cgroup paths such as ``cosched/n0/job-7``;
the driver maps them onto its root (``/sys/fs/cgroup`` or a fake tree in tests).
All kernel file I/O goes through a :class:`CgroupFS` so unit tests can swap in
:class:`agent.cgroups.fake.FakeCgroupFS`, which emulates the kernel's reactions.
"""

from __future__ import annotations

import contextlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WEIGHT = 100
MIN_WEIGHT = 1
MAX_WEIGHT = 10000
# v1 cpu.shares bounds enforced by the kernel (MIN_SHARES/MAX_SHARES in sched.h).
MIN_SHARES = 2
MAX_SHARES = 262144
# systemd's linear mapping: weight 100 (the v2 default) == 1024 shares (the v1 default).
SHARES_PER_WEIGHT = 1024 / 100


class CgroupError(RuntimeError):
    """A cgroup operation failed."""


class FreezeError(CgroupError):
    """A freeze was not confirmed in time; the group was thawed back.

    ``done`` holds the latencies of the groups that did freeze, ``failed`` the rest.
    """

    def __init__(
        self, msg: str, done: dict[str, float] | None = None, failed: list[str] | None = None
    ) -> None:
        super().__init__(msg)
        self.done = done or {}
        self.failed = failed or []


class ThawError(CgroupError):
    """A thaw was not confirmed in time."""


def clamp_weight(weight: int) -> int:
    return max(MIN_WEIGHT, min(MAX_WEIGHT, int(weight)))


def weight_to_shares(weight: int) -> int:
    """v2 weight (1..10000) -> v1 cpu.shares; 100 -> 1024, linear, never below 2."""
    shares = round(clamp_weight(weight) * SHARES_PER_WEIGHT)
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def shares_to_weight(shares: int) -> int:
    """v1 cpu.shares -> v2 weight; 1024 -> 100, linear, clamped to 1..10000."""
    return clamp_weight(round(int(shares) / SHARES_PER_WEIGHT))


@dataclass(frozen=True)
class Capabilities:
    """What a backend can really enforce on this host."""

    weights_enforced: bool
    native_kill: bool


class CgroupFS:
    """Plain file I/O on a cgroup filesystem (the real kernel does the rest)."""

    def read(self, path: Path | str) -> str:
        # Raw os calls: this sits in the freeze-confirmation poll loop, where
        # a buffered text open() costs several times more CPU.
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = []
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("ascii")

    def write(self, path: Path | str, value: str) -> None:
        # One write() per value: cgroup files act on each write call.
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)

    def exists(self, path: Path) -> bool:
        return path.exists()

    def listdir(self, path: Path) -> list[str]:
        return [e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]


def parse_pids(text: str) -> list[int]:
    return [int(tok) for tok in text.split()]


def check_rel(path: str) -> str:
    """Refuse absolute paths and '..' so a job id can never escape the parent."""
    rel = path.strip("/")
    if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise CgroupError(f"bad cgroup path {path!r}")
    return rel


class CgroupDriver(ABC):
    """Create/remove job cgroups, move pids, freeze/thaw (confirmed), weights, usage."""

    name: str = "abstract"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fs: CgroupFS | None = None,
        freeze_timeout: float = 1.0,
        poll_interval: float = 50e-6,
    ) -> None:
        self.root = Path(root)
        self.fs = fs or CgroupFS()
        self.freeze_timeout = freeze_timeout
        self.poll_interval = poll_interval

    # ---- structure -------------------------------------------------------
    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abstractmethod
    def available(self) -> bool:
        """True if the hierarchies this backend needs are mounted under root."""

    @abstractmethod
    def ensure_parent(self, parent: str) -> None:
        """mkdir -p the parent in every hierarchy this backend uses."""

    @abstractmethod
    def create(self, path: str) -> None: ...

    @abstractmethod
    def remove(self, path: str) -> None:
        """rmdir the group everywhere; it must be empty (no processes, no children)."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def children(self, parent: str) -> list[str]:
        """Names of the direct child groups of parent (empty if parent is missing)."""

    @abstractmethod
    def add_pid(self, path: str, pid: int) -> None: ...

    @abstractmethod
    def pids(self, path: str) -> list[int]: ...

    @abstractmethod
    def set_weight(self, path: str, weight: int) -> None: ...

    @abstractmethod
    def get_weight(self, path: str) -> int: ...

    @abstractmethod
    def cpu_usage_ns(self, path: str) -> int: ...

    @abstractmethod
    def kill_all(self, path: str) -> None:
        """SIGKILL every process in the group (thawing first where needed)."""

    @abstractmethod
    def pin_freezer(self, parent: str) -> None:
        """Backend-specific freezer state held while an agent runs."""

    @abstractmethod
    def unpin_freezer(self, parent: str) -> None:
        """Undo pin_freezer (called on agent exit)."""

    def cpu_capacity(self, parent: str) -> float:
        """CPUs available to parent; backends refine this with quota/cpuset."""
        return float(len(os.sched_getaffinity(0)))

    # ---- freezing: request + confirm primitives -----------------------------
    @abstractmethod
    def _request_freeze(self, path: str) -> None: ...

    @abstractmethod
    def _request_thaw(self, path: str) -> None: ...

    @abstractmethod
    def is_frozen(self, path: str) -> bool:
        """True only once the kernel reports the group fully frozen."""

    @abstractmethod
    def is_thawed(self, path: str) -> bool: ...

    def freeze(self, path: str) -> float:
        """Freeze and wait for confirmation; returns the latency in seconds."""
        return self.freeze_many([path])[path]

    def thaw(self, path: str) -> float:
        return self.thaw_many([path])[path]

    def freeze_many(self, paths: Iterable[str]) -> dict[str, float]:
        """Write all freeze requests first, then poll them together.

        Issuing every request before polling overlaps the kernel work of all
        groups, so switching k jobs costs about one freeze latency, not k.
        On timeout every group that did not freeze is thawed back and
        FreezeError names them (the confirmed ones stay frozen).
        """
        todo = list(paths)
        start: dict[str, float] = {}
        for p in todo:
            start[p] = time.perf_counter()
            self._request_freeze(p)
        done, pending = self._poll(todo, start, self.is_frozen, True)
        if pending:
            for p in pending:
                with contextlib.suppress(OSError):
                    self._request_thaw(p)
            raise FreezeError(
                f"freeze not confirmed within {self.freeze_timeout}s for {sorted(pending)};"
                " thawed back",
                done,
                pending,
            )
        return done

    def thaw_many(self, paths: Iterable[str]) -> dict[str, float]:
        todo = list(paths)
        start: dict[str, float] = {}
        for p in todo:
            start[p] = time.perf_counter()
            self._request_thaw(p)
        done, pending = self._poll(todo, start, self.is_thawed, False)
        if pending:
            raise ThawError(
                f"thaw not confirmed within {self.freeze_timeout}s for {sorted(pending)}"
            )
        return done

    def _poll(
        self,
        todo: list[str],
        start: dict[str, float],
        ok: Callable[[str], bool],
        want_frozen: bool,
    ) -> tuple[dict[str, float], list[str]]:
        done: dict[str, float] = {}
        pending = list(todo)
        deadline = time.perf_counter() + self.freeze_timeout
        interval = self.poll_interval
        while pending:
            still: list[str] = []
            for p in pending:
                if ok(p):
                    done[p] = time.perf_counter() - start[p]
                else:
                    still.append(p)
            pending = still
            if not pending or time.perf_counter() > deadline:
                break
            # Sleep, never spin: a spinning poller starves the very tasks that
            # must reach the freezer on this CPU (measured: ~4 ms per freeze).
            # Back off (x1.5 up to 1 ms): a task that must first be scheduled
            # by CFS to freeze can take ms on a loaded host, and fixed 50 us
            # polls then cost more CPU than everything else the agent does.
            self._wait(
                pending, min(interval, max(0.0, deadline - time.perf_counter())), want_frozen
            )
            interval = min(interval * 1.5, max(self.poll_interval, 1e-3))
        return done, pending

    def _wait(self, pending: list[str], interval: float, want_frozen: bool) -> None:
        """Pause between confirmation checks; backends with change notification override."""
        time.sleep(interval)
