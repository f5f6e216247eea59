"""What a worker does with one run, whichever executor sent it (this process, a local
worker process, a Dask worker): call it, time it, turn its result into JSON text or
its exception into an error, and say which code and host made it.

Returning JSON text (not the object) means every executor hands the coordinator the
same bytes, so results cannot depend on what ran them (docs/sweeps.md).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from testbed.sweep.fingerprint import fingerprint

# Fingerprints the coordinator computed, handed to local workers that share its files
# (a Dask worker computes its own: its code may be another copy).
KNOWN: dict[str, str] = {}


@dataclass(frozen=True)
class Outcome:
    """One run's outcome: ``result`` (JSON text) or ``error`` (its last line) and ``detail``."""

    key: str
    result: str | None
    error: str = ""
    detail: str = ""
    seconds: float = 0.0
    code: str = ""
    host: str = ""


def execute(spec: object) -> Outcome:
    """Run ``spec`` (a :class:`testbed.sweep.RunSpec`); never raises for the run's own errors."""
    from testbed.sweep import RunSpec

    assert isinstance(spec, RunSpec)
    t0 = time.perf_counter()
    module = spec.func.__module__
    code = KNOWN.get(module) or fingerprint(module)
    try:
        value = spec.func(spec.params, spec.seed)
        if not isinstance(value, Mapping):
            raise TypeError(f"the run returned {type(value).__name__}, not a mapping")
        text = json.dumps(value)
    except Exception as e:  # the run's own failure: recorded, the sweep goes on
        return Outcome(
            spec.key,
            None,
            f"{type(e).__name__}: {e}".splitlines()[0],
            traceback.format_exc(),
            time.perf_counter() - t0,
            code,
            socket.gethostname(),
        )
    return Outcome(spec.key, text, "", "", time.perf_counter() - t0, code, socket.gethostname())


def init_local_worker(coordinator: int, known: dict[str, str]) -> None:
    """A local worker process: Ctrl-C is the coordinator's to handle (it stops the
    workers), and the worker exits when its coordinator is gone, even after SIGKILL
    (a process pool's workers otherwise wait forever on their queue)."""
    import psutil

    KNOWN.update(known)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        born = psutil.Process(coordinator).create_time()
    except psutil.NoSuchProcess:
        os._exit(1)

    def gone() -> bool:
        try:  # the creation time tells the coordinator from a process reusing its pid
            p = psutil.Process(coordinator)
            return bool(p.create_time() != born or p.status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True

    def watch() -> None:
        while not gone():
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="coordinator-watch", daemon=True).start()
