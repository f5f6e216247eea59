"""A Dask distributed cluster as a sweep's executor (``--dask tcp://HOST:8786``; docs/sweeps.md).

The coordinator connects as a client, checks before any run that every worker can
import this code and runs the same version of it (the fingerprint of the run
functions' sources), then submits one task per run (all in one ``client.map``) and
takes the outcomes as they end. A worker runs each run in a child process of its
own (``child.py``: the run then
shares no GIL with the worker's event loop); a run that kills its child is run again in
a new one, and after ``attempts`` deaths recorded as failed with the signal. A worker
that dies has its tasks moved to other workers by the scheduler;
a run whose workers died ``distributed.scheduler.allowed-failures`` + 1 times is
recorded as failed. Workers need the repository importable (the same commit, e.g.
on a shared file system) and, for pure-Python runs, one thread each
(``dask worker ADDRESS --nworkers N --nthreads 1``), started with the settings of
``daskconf.py`` (Dask's housekeeping otherwise takes CPU from the runs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from testbed.sweep.child import run_in_child
from testbed.sweep.errors import SchedulerError, SweepUsageError
from testbed.sweep.fingerprint import fingerprint
from testbed.sweep.local import DIED
from testbed.sweep.worker import Outcome

if TYPE_CHECKING:
    from testbed.sweep import RunSpec

FIX = "start one with `dask scheduler` (and workers with `dask worker ADDRESS --nthreads 1`)"


def check_address(address: str) -> str:
    """``HOST:PORT`` or ``SCHEME://HOST:PORT`` with a scheme Dask speaks; returns the full form."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    try:
        scheme, loc = parse_address(address)
        host, port = parse_host_port(loc)
    except ValueError as e:
        raise SweepUsageError(
            f"--dask {address!r}: not a scheduler address ({e})", fix="e.g. tcp://head:8786"
        ) from None
    if scheme not in backends or scheme == "inproc" or not host or not port:
        raise SweepUsageError(
            f"--dask {address!r}: not a scheduler address (want {'|'.join(sorted(backends))}"
            "://HOST:PORT)",
            fix="e.g. tcp://head:8786",
        )
    return f"{scheme}://{loc}"


async def _identity(address: str, timeout: float) -> dict[str, Any]:
    """What the server at ``address`` says it is (Dask's own handshake and ``identity``)."""
    import asyncio

    from distributed.comm import core

    connect: Any = core.connect  # untyped
    comm = await connect(address, timeout=timeout)
    try:
        await comm.write({"op": "identity", "reply": True})
        reply = await asyncio.wait_for(comm.read(), timeout)
    finally:
        await comm.close()
    return dict(reply) if isinstance(reply, dict) else {"type": repr(reply)[:40]}


def probe(address: str, timeout: float) -> None:
    """One line if no Dask scheduler answers at ``address`` (before a client is made:
    a client of a server that is not Dask's fails in ways that take a page to print)."""
    import asyncio

    try:
        kind = asyncio.run(_identity(address, timeout)).get("type")
    except (OSError, TimeoutError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SchedulerError(
            f"--dask {address}: no Dask scheduler answered within {timeout:g} s ({why})",
            fix=f"check the address, or {FIX}",
        ) from None
    except Exception as e:  # it answered, but not as Dask speaks
        raise SchedulerError(
            f"--dask {address}: what answers there is not a Dask scheduler ({type(e).__name__})",
            fix="give the address `dask scheduler` prints (tcp://HOST:8786)",
        ) from None
    if kind != "Scheduler":
        raise SchedulerError(
            f"--dask {address}: that is a Dask {kind}, not a scheduler",
            fix="give the scheduler's address (tcp://HOST:8786)",
        )


def _fingerprints(modules: list[str]) -> dict[str, str]:
    """Run on each worker: the fingerprint of each run module there."""
    return {m: fingerprint(m) for m in modules}


class DaskPool:
    def __init__(self, address: str, timeout: float = 10.0, attempts: int = 3) -> None:
        self.address = check_address(address)
        self.timeout = timeout
        self.attempts = attempts
        self.client: Any = None
        self.line = ""  # what open() found: workers, threads, the dashboard

    def open(self, modules: list[str]) -> str:
        """Connect and check the workers; returns what to tell the user (workers, dashboard)."""
        import logging

        import distributed

        Client: Any = distributed.Client  # untyped constructor
        # distributed logs each failed connection attempt; the one line of probe says it all
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        try:
            probe(self.address, self.timeout)
            self.client = Client(self.address, timeout=self.timeout, set_as_default=False)
        except (OSError, TimeoutError) as e:  # it went away between the probe and now
            raise SchedulerError(
                f"--dask {self.address}: the scheduler stopped answering ({e})".splitlines()[0],
                fix=f"check the address, or {FIX}",
            ) from None
        finally:
            logging.getLogger("distributed").setLevel(logging.WARNING)
        try:
            theirs = self.client.run(_fingerprints, sorted(set(modules)))
        except Exception as e:
            self.close()
            raise SchedulerError(
                f"--dask {self.address}: the workers cannot run cosched "
                f"({type(e).__name__}: {e})".splitlines()[0],
                fix="start the workers from this repository's environment (the same commit)",
            ) from None
        ours = _fingerprints(sorted(set(modules)))
        for worker, fps in sorted(theirs.items()):
            if fps != ours:
                self.close()
                raise SchedulerError(
                    f"--dask {self.address}: worker {worker} runs other cosched code "
                    f"(fingerprint {fps} here {ours})",
                    fix="start the workers from the same commit as this checkout",
                )
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        threads = sum(w.get("nthreads", 1) for w in workers.values())
        line = f"Dask scheduler {self.address}: {len(workers)} workers, {threads} threads"
        if not workers:
            line += " (none yet: runs start as workers join)"
        if any(w.get("nthreads", 1) > 1 for w in workers.values()):
            line += "; note: runs are pure Python, one thread per worker process is faster"
        link = self.client.dashboard_link
        line += f"; dashboard {link}" if link else "; no dashboard (no bokeh where it runs)"
        self.line = line
        return line

    def describe(self) -> str:
        return f"the Dask cluster at {self.address}"

    def run(self, todo: Sequence[RunSpec], done: Callable[[RunSpec, Outcome], None]) -> None:
        """Submit every run; take outcomes as they end. The scheduler moves the runs of a
        worker that dies to other workers, but blames every run that worker held (queued
        ones too) once it has died ``allowed-failures`` + 1 times; such runs are run again,
        each alone, after the others, and only one that kills its worker alone fails."""
        suspects = self._wave(todo, done)
        for spec in suspects:
            for left in self._wave([spec], done):
                error = f"{DIED} (on every worker it was given to, also alone)"
                done(left, Outcome(left.key, None, error))

    def _wave(
        self, todo: Sequence[RunSpec], done: Callable[[RunSpec, Outcome], None]
    ) -> list[RunSpec]:
        import distributed

        as_completed: Any = distributed.as_completed  # untyped
        tag = uuid.uuid4().hex[:8]
        # one call for every run: the scheduler takes them in one message, not one each
        submitted = self.client.map(
            run_in_child,
            list(todo),
            attempts=self.attempts,
            key=[f"{spec.study}-{spec.key}-{tag}" for spec in todo],
            pure=False,
        )
        futures = dict(zip(submitted, todo, strict=True))
        killed: list[RunSpec] = []
        try:
            for fut in as_completed(futures, loop=self.client.loop):
                spec = futures[fut]
                try:  # waits if the result was lost with its worker and is computed again
                    outcome = fut.result()
                except Exception as exc:  # not the run's error: execute() returns those
                    if type(exc).__name__ == "KilledWorker":
                        killed.append(spec)
                    else:
                        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                        done(spec, Outcome(spec.key, None, error))
                else:
                    done(spec, outcome)
                fut.release()
        except BaseException:
            self.client.cancel(list(futures))
            raise
        return killed

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
