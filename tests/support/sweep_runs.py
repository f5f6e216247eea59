"""Run functions for the sweep tests (module level, so worker processes can import them).

``params`` may ask a run to fail (raise), to kill its worker (``die``: SIGKILL
itself, or only on its first attempts, counted in a file), to kill another
worker of its pool once (``kill_sibling``), to kill its parent once (``kill_parent``, a
counter file: under Dask the worker whose child runs it), to take time
(``sleep``) or to leave a line in a log file per execution (``log``), so a test
can count which runs a sweep executed.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _log(params: Mapping[str, Any], seed: int) -> None:
    if params.get("log"):
        with open(params["log"], "a") as fh:  # one short line per write: atomic with O_APPEND
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(f"{params['x']} {seed} {os.getpid()}\n")


def square(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    _log(params, seed)
    if params.get("sleep"):
        time.sleep(float(params["sleep"]))
    if params.get("fail"):
        raise ValueError(f"asked to fail (x={params['x']})")
    if params.get("kill_sibling") and _count(Path(params["kill_sibling"])) == 1:
        _kill_a_sibling()
    if params.get("kill_parent") and _count(Path(params["kill_parent"])) == 1:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(5)  # the child exits with its parent (testbed/sweep/worker.py's watch)
    die = params.get("die")
    if die == "always" or (die and _count(Path(die)) <= int(params.get("deaths", 1))):
        os.kill(os.getpid(), signal.SIGKILL)
    rng = random.Random(seed * 1000 + int(params["x"]))
    return {"x": params["x"], "y": params["x"] ** 2 + seed, "noise": rng.random(), "pid": 0}


def _kill_a_sibling() -> None:
    """SIGKILL another worker of this pool (an idle one, or one running another run)."""
    import psutil

    me = psutil.Process()
    for p in me.parent().children():
        if p.pid != me.pid:
            p.kill()
            return


def _count(path: Path) -> int:
    """How many times this has been called for ``path`` (a counter in the file)."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        n = int(fh.read() or 0) + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(n))
    return n


def not_a_mapping(params: Mapping[str, Any], seed: int) -> Any:
    return [params["x"], seed]


def failing_square(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Fails for x = 2 while the file ``fail_if`` exists."""
    if params["x"] == 2 and Path(params["fail_if"]).exists():
        raise RuntimeError("x=2 is broken")
    return {"x": params["x"], "y": params["x"] ** 2 + seed, "noise": 0.0, "pid": 0}
