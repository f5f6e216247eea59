"""Local executors of a sweep: this process, or local worker processes (docs/sweeps.md).

At most ``workers`` runs are in flight, one per process. A worker that dies (a
signal, the out-of-memory killer) breaks the pool: the runs it held are retried
in a new pool, each *alone*, so the run that kills its worker is found and
charged (after ``attempts`` deaths it is recorded as failed) and no other run is
blamed for it. Workers come from a fork server (no fork of a process with
threads), ignore Ctrl-C (the coordinator stops them) and exit when the
coordinator is gone.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from testbed.sweep.worker import Outcome, execute, init_local_worker

if TYPE_CHECKING:
    from testbed.sweep import RunSpec

DIED = "WorkerDied: the worker process running it died"


class InProcess:
    """One worker: this process, the runs in the order given (no pickling, no start-up)."""

    def describe(self) -> str:
        return "this process"

    def run(self, todo: Sequence[RunSpec], done: Callable[[RunSpec, Outcome], None]) -> None:
        for spec in todo:
            done(spec, execute(spec))


class LocalPool:
    def __init__(
        self, workers: int, attempts: int = 3, known: dict[str, str] | None = None
    ) -> None:
        self.workers = workers
        self.attempts = attempts
        self.known = dict(known or {})  # module -> fingerprint, for the workers

    def describe(self) -> str:
        return f"{self.workers} local worker process{'es' if self.workers > 1 else ''}"

    def _pool(self, size: int) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("forkserver")
        # imported once in the fork server, not in every worker (start-up of a sweep)
        ctx.set_forkserver_preload(["__main__", "testbed.sweep.worker", *self.known])
        return ProcessPoolExecutor(
            max_workers=size,
            mp_context=ctx,
            initializer=init_local_worker,
            initargs=(os.getpid(), self.known),
        )

    def run(self, todo: Sequence[RunSpec], done: Callable[[RunSpec, Outcome], None]) -> None:
        queue: deque[RunSpec] = deque(todo)
        suspects: deque[RunSpec] = deque()  # held by a worker that died: retried alone
        deaths: Counter[str] = Counter()
        inflight: dict[Future[Outcome], RunSpec] = {}
        pool: ProcessPoolExecutor | None = None
        try:
            while queue or suspects or inflight:
                if pool is None:
                    pool = self._pool(min(self.workers, max(1, len(queue))))
                try:  # a run is taken off its queue once submitted: a broken pool refuses it
                    if suspects and not inflight:
                        fut = pool.submit(execute, suspects[0])
                        inflight[fut] = suspects.popleft()
                    while queue and not suspects and len(inflight) < self.workers:
                        fut = pool.submit(execute, queue[0])
                        inflight[fut] = queue.popleft()
                    finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                    held = self._collect(finished, inflight, done)
                    if not held:
                        continue
                except BrokenProcessPool:  # a worker died between two runs
                    held = []
                # every run still in flight in a broken pool fails with it (or had ended)
                held += self._collect(wait(inflight).done, inflight, done)
                pool.shutdown(wait=True)
                pool = None
                if not held:
                    continue
                if len(held) > 1:  # which of them killed it is not known: each runs alone
                    suspects.extend(held)
                    continue
                spec = held[0]  # it died running this run only: that run killed it
                deaths[spec.key] += 1
                if deaths[spec.key] < self.attempts:
                    suspects.appendleft(spec)
                    continue
                n = deaths[spec.key]
                done(spec, Outcome(spec.key, None, f"{DIED} ({n} times, running it alone)"))
        except BaseException:
            if pool is not None:
                _stop(pool)
                pool = None
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

    @staticmethod
    def _collect(
        finished: set[Future[Outcome]],
        inflight: dict[Future[Outcome], RunSpec],
        done: Callable[[RunSpec, Outcome], None],
    ) -> list[RunSpec]:
        """Hand over the outcomes of ``finished``; return the runs whose worker died."""
        held = []
        for fut in finished:
            spec = inflight.pop(fut)
            try:
                outcome = fut.result()
            except BrokenProcessPool:
                held.append(spec)
                continue
            done(spec, outcome)
        return held


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now, killing the runs in flight (they are run again on resume).

    ``shutdown`` alone would wait for them; Python 3.11 has no public way to
    terminate a pool's processes, so its process table is used.
    """
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
