"""A Dask distributed cluster as a sweep's executor (``--dask tcp://HOST:8786``; docs/sweeps.md).

The coordinator connects as a client, checks before any run that every worker can
import this code and runs the same version of it (the fingerprint of the run
functions' sources), then submits one task per run and takes the outcomes as they
end. A worker that dies has its tasks moved to other workers by the scheduler;
a run whose workers died ``distributed.scheduler.allowed-failures`` + 1 times is
recorded as failed. Workers need the repository importable (the same commit, e.g.
on a shared file system) and, for pure-Python runs, one thread each
(``dask worker ADDRESS --nworkers N --nthreads 1``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from testbed.sweep.errors import SchedulerError, SweepUsageError
from testbed.sweep.fingerprint import fingerprint
from testbed.sweep.local import DIED
from testbed.sweep.worker import Outcome, execute

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


def _fingerprints(modules: list[str]) -> dict[str, str]:
    """Run on each worker: the fingerprint of each run module there."""
    return {m: fingerprint(m) for m in modules}


class DaskPool:
    def __init__(self, address: str, timeout: float = 10.0) -> None:
        self.address = check_address(address)
        self.timeout = timeout
        self.client: Any = None
        self.line = ""  # what open() found: workers, threads, the dashboard

    def open(self, modules: list[str]) -> str:
        """Connect and check the workers; returns what to tell the user (workers, dashboard)."""
        import logging

        import distributed

        Client: Any = distributed.Client  # untyped constructor
        # distributed logs each failed connection attempt; the one line below says it all
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        try:
            self.client = Client(self.address, timeout=self.timeout, set_as_default=False)
        except (OSError, TimeoutError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise SchedulerError(
                f"--dask {self.address}: no Dask scheduler answered within "
                f"{self.timeout:g} s ({why})",
                fix=f"check the address, or {FIX}",
            ) from None
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
        import distributed

        as_completed: Any = distributed.as_completed  # untyped
        tag = uuid.uuid4().hex[:8]
        futures = {
            self.client.submit(
                execute, spec, key=f"{spec.study}-{spec.key}-{tag}", pure=False
            ): spec
            for spec in todo
        }
        try:
            for fut in as_completed(futures, loop=self.client.loop):
                spec = futures[fut]
                if fut.status == "finished":
                    done(spec, fut.result())
                    fut.release()
                    continue
                exc = fut.exception()
                if type(exc).__name__ == "KilledWorker":
                    error = f"{DIED} (on every worker it was given to)"
                else:
                    error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                done(spec, Outcome(spec.key, None, error))
                fut.release()
        except BaseException:
            self.client.cancel(list(futures))
            raise

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
