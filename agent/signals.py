"""Signal-based switching: SIGSTOP/SIGCONT instead of the cgroup freezer (Rajaei et al. 2008 §4).

:class:`SignalSwitch` gives the agent that mechanism behind the interface the freezer
path uses (``freeze_many``, ``thaw_many``, ``prepare_thaw``, ``is_frozen``,
``is_thawed``), so confirmation, fail-safe, accounting and time-triggered plans are the
same code (agent ``--switch signals``). What it guarantees and what it does not, against
the freezer: docs/cluster.md, "Switch mechanisms".
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any

from common.cgroups.errors import FreezeError, ThawError

log = logging.getLogger(__name__)

STOPPED = "T"  # /proc/PID/stat: stopped by a signal
GONE = frozenset("ZX")  # zombie or dead: nothing left to stop


class SignalError(FreezeError):
    """A stop that cannot be confirmed (a traced process; no /proc)."""


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc/PID/stat; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm is in parentheses and may itself hold ") ": the state follows the last one
    end = raw.rfind(b")")
    if end < 0 or end + 2 >= len(raw):
        return None
    return chr(raw[end + 2])


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class SignalSwitch:
    """A cgroup driver whose freeze and thaw are SIGSTOP and SIGCONT (module doc).

    Everything else is the wrapped driver's (``__getattr__``): groups, weights,
    accounting, killing and removal stay in the one cgroup layer.
    """

    name_suffix = "+signals"

    def __init__(self, driver: Any, state: Any = proc_state) -> None:
        self._d = driver
        self._state = state
        self._stopped: set[str] = set()  # groups the agent wants stopped (empty ones too)
        self.freeze_timeout: float = float(driver.freeze_timeout)
        self.poll_interval: float = 1e-4
        self.last_write_s = self.last_confirm_s = 0.0  # not the wrapped freezer's

    def __getattr__(self, name: str) -> Any:
        return getattr(self._d, name)

    @property
    def name(self) -> str:
        return f"{self._d.name}{self.name_suffix}"

    # ---- state ---------------------------------------------------------------------------
    def _states(self, path: str) -> dict[int, str]:
        out = {}
        for pid in self._d.pids(path):
            st = self._state(pid)
            if st is not None and st not in GONE:
                out[pid] = st
        return out

    def is_frozen(self, path: str) -> bool:
        states = self._states(path)
        if not states:
            return path in self._stopped
        return all(s == STOPPED for s in states.values())

    def is_thawed(self, path: str) -> bool:
        return all(s != STOPPED for s in self._states(path).values())

    def _traced(self, path: str) -> list[int]:
        return [pid for pid, s in self._states(path).items() if s == "t"]

    # ---- switching -----------------------------------------------------------------------
    def freeze(self, path: str) -> float:
        return self.freeze_many([path])[path]

    def thaw(self, path: str) -> float:
        return self.thaw_many([path])[path]

    def freeze_many(
        self, paths: Iterable[str], between: Callable[[], None] | None = None
    ) -> dict[str, float]:
        """SIGSTOP every process of each group, then confirm each stopped (module doc).

        Signals go out to all groups before any is confirmed, as the freezer path
        writes every request first; ``between`` runs after the signals, before the
        confirmation (as in common/cgroups/driver.py). On failure the unconfirmed
        groups are continued again and :class:`FreezeError` names them; the
        confirmed ones stay stopped.
        """
        todo = list(paths)
        start: dict[str, float] = {}
        for p in todo:
            traced = self._traced(p)
            if traced:
                raise SignalError(
                    f"cannot stop {p} by signal: pid(s) {traced} are traced (state t);"
                    " use --switch freezer",
                    {},
                    [p],
                )
            self._stopped.add(p)
            start[p] = time.perf_counter()
            _signal(self._d.pids(p), signal.SIGSTOP)
        if between is not None:
            between()
        done, pending = self._poll(todo, start, stop=True)
        if pending:
            for p in pending:
                self._stopped.discard(p)
                _signal(self._d.pids(p), signal.SIGCONT)
            raise FreezeError(
                f"stop not confirmed within {self.freeze_timeout}s for {sorted(pending)};"
                " continued back",
                done,
                pending,
            )
        return done

    def thaw_many(self, paths: Iterable[str]) -> dict[str, float]:
        todo = list(paths)
        start = {}
        for p in todo:
            self._stopped.discard(p)
            start[p] = time.perf_counter()
            _signal(self._d.pids(p), signal.SIGCONT)
        done, pending = self._poll(todo, start, stop=False)
        if pending:
            raise ThawError(
                f"continue not confirmed within {self.freeze_timeout}s for {sorted(pending)}"
            )
        return done

    def _poll(
        self, todo: list[str], start: dict[str, float], stop: bool
    ) -> tuple[dict[str, float], list[str]]:
        done: dict[str, float] = {}
        pending = list(todo)
        t0 = time.perf_counter()
        # the driver's per-step split (agent/daemon.py apply): signalling, then confirming
        self.last_write_s = t0 - min(start.values(), default=t0)
        deadline = t0 + self.freeze_timeout
        interval = self.poll_interval
        while pending:
            still = []
            for p in pending:
                states = self._states(p)
                if stop:
                    # a child forked before its parent stopped is not stopped yet: stop it
                    late = [pid for pid, s in states.items() if s != STOPPED]
                    _signal(late, signal.SIGSTOP)
                    ok = not late
                else:
                    late = [pid for pid, s in states.items() if s == STOPPED]
                    _signal(late, signal.SIGCONT)
                    ok = not late
                if ok:
                    done[p] = time.perf_counter() - start[p]
                else:
                    still.append(p)
            pending = still
            if not pending or time.perf_counter() > deadline:
                break
            time.sleep(interval)  # never spin: the stopping tasks need this CPU
            interval = min(interval * 1.5, 1e-3)
        self.last_confirm_s = time.perf_counter() - t0
        return done, pending

    def prepare_thaw(self, paths: Iterable[str]) -> PreparedContinue:
        return PreparedContinue(self, list(paths))

    def add_pid(self, path: str, pid: int) -> None:
        """Place ``pid`` in the group; stop it at once if the group is stopped."""
        self._d.add_pid(path, pid)
        if path in self._stopped:
            os.kill(pid, signal.SIGSTOP)
            deadline = time.perf_counter() + self.freeze_timeout
            while True:
                st = self._state(pid)
                if st is None or st == STOPPED or st in GONE:
                    break
                if time.perf_counter() > deadline:
                    raise SignalError(
                        f"rank pid {pid} of {path} did not stop within {self.freeze_timeout}s",
                        {},
                        [path],
                    )
                time.sleep(self.poll_interval)

    def thaw_subtree(self, path: str) -> None:
        for cg in list(self._stopped):
            if cg == path or cg.startswith(path.rstrip("/") + "/"):
                self._stopped.discard(cg)
        with contextlib.suppress(OSError):
            _signal(self._d.pids(path), signal.SIGCONT)
        self._d.thaw_subtree(path)

    def kill_all(self, path: str) -> None:
        self._stopped.discard(path)
        self._d.kill_all(path)  # SIGKILL ends a stopped task as well

    def remove(self, path: str) -> None:
        self._stopped.discard(path)
        self._d.remove(path)

    # The freezer's v1 static key (Cgroups.pin_freezer) has nothing to keep warm here.
    def pin_freezer(self, parent: str) -> None:
        return None

    def unpin_freezer(self, parent: str) -> None:
        return None


class PreparedContinue:
    """The signal mechanism's :class:`common.cgroups.driver.PreparedThaw`: the pids to
    continue are read ahead of the instant; :meth:`write` is one ``kill()`` each."""

    def __init__(self, sw: SignalSwitch, paths: list[str]) -> None:
        self._sw = sw
        self.paths = paths
        self.failed: dict[str, str] = {}
        self._pids = {p: list(sw._d.pids(p)) for p in paths}
        self._start: dict[str, float] = {}

    def __enter__(self) -> PreparedContinue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self) -> None:
        for p in self.paths:
            self._sw._stopped.discard(p)
            self._start[p] = time.perf_counter()
            try:
                _signal(self._pids[p], signal.SIGCONT)
            except OSError as e:
                self.failed[p] = e.strerror or str(e)

    def confirm(self) -> dict[str, float]:
        todo = [p for p in self._start if p not in self.failed]
        done, pending = self._sw._poll(todo, self._start, stop=False)
        if pending:
            raise ThawError(
                f"continue not confirmed within {self._sw.freeze_timeout}s for {sorted(pending)}"
            )
        return done

    def close(self) -> None:
        return None
