"""A Dask worker's runs, each in a child process of its own (docs/sweeps.md, "A Dask cluster").

A Dask worker runs a task in a thread beside its event loop (heartbeats, comms, the
profiler), and a pure-Python run then shares one GIL with that loop: measured, a run
thread was blocked 3.2 % of its wall time on Dask against 0.2 % in a local worker
process (docs/results/sweeps/dask-vs-pool.md). So the task thread hands the run to a
child process and sleeps on a pipe; the run has a GIL to itself, as in the local pool.

Each task thread of a worker has at most one child at a time, kept between runs (the run
modules stay imported); children are started with ``subprocess`` (fork and exec: a Dask
worker has threads, and a daemonic worker process may not use ``multiprocessing``). A
child exits when its pipe closes or its worker is gone.

A child holds one run, so a child that dies was killed by that run (or by something
outside, such as the out-of-memory killer): the run is run again in a new child, and
after ``attempts`` deaths it is recorded as failed with the signal, as the local pool
charges a run that kills its worker when run alone (testbed/sweep/local.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from testbed.sweep.local import DIED
from testbed.sweep.worker import KNOWN, Outcome, execute, init_local_worker

# The child's first step: the worker's import path, then serve() (argv: the pipe fds).
BOOT = (
    "import sys\n"
    "from multiprocessing.connection import Connection\n"
    "inp = Connection(int(sys.argv[1]), writable=False)\n"
    "sys.path[:] = inp.recv()\n"
    "from testbed.sweep.child import serve\n"
    "serve(inp, Connection(int(sys.argv[2]), readable=False))\n"
)


def serve(inp: Connection, out: Connection) -> None:
    """The child: run what arrives on ``inp`` (a pickled spec and the fingerprints the
    worker knows), send back its :class:`Outcome`; exit when the worker is gone."""
    import cloudpickle

    init_local_worker(os.getppid(), {})
    while True:
        try:
            spec, known = cloudpickle.loads(inp.recv_bytes())
        except (EOFError, OSError):
            return
        KNOWN.update(known)
        outcome = execute(spec)
        try:
            out.send(outcome)
        except OSError:
            return


class Child:
    """One child process and the two pipes to it."""

    def __init__(self) -> None:
        to_child, from_us = os.pipe()
        to_us, from_child = os.pipe()
        try:
            self.proc = subprocess.Popen(
                # -I: nothing imported from the working directory or PYTHON* variables
                # before the worker's own path is in place
                [sys.executable, "-I", "-c", BOOT, str(to_child), str(from_child)],
                stdin=subprocess.DEVNULL,
                pass_fds=(to_child, from_child),
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        self.send = Connection(from_us, readable=False)
        self.recv = Connection(to_us, writable=False)
        self.send.send(list(sys.path))

    def run(self, spec: Any, known: dict[str, str]) -> Outcome | None:
        """The run's outcome, or None if the child died running it."""
        import cloudpickle

        try:
            self.send.send_bytes(cloudpickle.dumps((spec, known)))
            got = self.recv.recv()
        except (EOFError, OSError):
            return None
        assert isinstance(got, Outcome)
        return got

    def death(self) -> str:
        """How the child ended (after ``run`` returned None): the signal or exit status."""
        self.close()
        code = self.proc.wait()
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def close(self) -> None:
        self.send.close()
        self.recv.close()


_idle: list[Child] = []  # children between runs, in this worker process
_lock = threading.Lock()


def run_in_child(spec: Any, attempts: int = 3) -> Outcome:
    """A Dask task: run ``spec`` in a child process of this worker (never raises for the
    run's own errors; a run that kills its child ``attempts`` times is failed)."""
    from testbed.sweep.fingerprint import fingerprint

    module = spec.func.__module__
    known = {module: KNOWN.get(module) or fingerprint(module)}  # cached in this worker
    deaths: list[str] = []
    while len(deaths) < attempts:
        with _lock:
            child = _idle.pop() if _idle else None
        if child is not None and child.proc.poll() is not None:  # died idle: not this run's
            child.close()
            child = None
        if child is None:
            child = Child()
        outcome = child.run(spec, known)
        if outcome is not None:
            with _lock:
                _idle.append(child)
            return outcome
        deaths.append(child.death())
    n = len(deaths)
    how = ", ".join(sorted(set(deaths)))
    return Outcome(spec.key, None, f"{DIED} ({how}; {n} times, each in a new process)")
