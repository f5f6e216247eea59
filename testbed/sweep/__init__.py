"""Sweeps of independent simulated runs: the one way a study hands its runs out.

A study describes each run as a :class:`RunSpec` (which study, the parameters
that determine the result, the seed, and a top-level function to call) and
hands the list to :func:`run_sweep`, which returns one result per spec in the
order given. What executes the runs (this process, local worker processes, a
Dask cluster) and whether results are kept between invocations (a result
store) is chosen by :class:`SweepOptions`, never by the study (docs/sweeps.md).

Executors: ``local.py`` (this process; local worker processes), ``daskpool.py``
(a Dask cluster; ``child.py`` runs its runs, ``daskconf.py`` holds the settings a
cluster for sweeps should start with); the store: ``store.py``; what a worker does with a run:
``worker.py``; progress: ``progress.py``; the command-line side: ``cli.py``;
workers on Slurm or PBS: ``jobqueue.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from testbed.sweep.errors import RunsFailed, SweepUsageError

if TYPE_CHECKING:
    from testbed.sweep.worker import Outcome

Json = Any  # a value json.dumps accepts: dict, list, str, int, float, bool, None
RunFunc = Callable[[Mapping[str, Json], int], Mapping[str, Json]]


@dataclass(frozen=True)
class RunSpec:
    """One independent run: ``func(params, seed)`` returns a JSON-able mapping.

    ``func`` must be a module-level function (it is pickled by reference to
    reach worker processes); ``params`` must hold everything besides the seed
    that the result depends on, as JSON-able values. ``version`` is the study's
    result-format version: raise it when a change of the code changes what a
    run returns, so that stored results of the old code are not taken for new
    ones (docs/sweeps.md).
    """

    study: str
    params: Mapping[str, Json]
    seed: int
    func: RunFunc
    version: int = 1

    def canonical(self) -> str:
        """The run's identity as one string: study, sorted params, seed."""
        return json.dumps(
            {"study": self.study, "params": self.params, "seed": self.seed},
            sort_keys=True,
            separators=(",", ":"),
        )

    @property
    def key(self) -> str:
        """A short stable key (hex) for the run, independent of the executor."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:20]


@dataclass(frozen=True)
class RunFailure:
    """A run that raised: the spec and the error as text (the traceback's last line first)."""

    spec: RunSpec
    error: str
    detail: str = ""


@dataclass
class SweepOptions:
    """How to execute a sweep; the defaults run every spec here, in order, keeping nothing."""

    workers: int | None = 1  # local worker processes; None = the number of cores
    dask: str | None = None  # address of a Dask scheduler, e.g. tcp://host:8786
    force: bool = False  # rerun runs whose results are stored
    progress: bool = True  # a progress bar on stderr
    desc: str = "runs"
    store: Path | None = None  # the result store (SQLite); None: results are not kept
    connect_timeout: float = 10.0  # seconds to reach the Dask scheduler
    attempts: int = 3  # deaths of a run's worker before the run is recorded as failed


@dataclass
class SweepResult:
    """Results in the order of the specs given; ``None`` where a run failed."""

    results: list[Mapping[str, Json] | None] = field(default_factory=list)
    failed: list[RunFailure] = field(default_factory=list)
    stored: int = 0  # runs whose stored results were used
    ran: int = 0  # runs executed by this invocation
    seconds: float = 0.0  # wall time of this invocation
    run_seconds: float = 0.0  # the runs' own times, stored ones included (timings aside)
    store: Path | None = None

    def ok(self) -> bool:
        return not self.failed

    def check(self, stream: Any = None) -> None:
        """If runs failed: list them (one line each) and raise :class:`RunsFailed` (exit 1)."""
        if not self.failed:
            return
        out = stream or sys.stderr
        for f in self.failed:
            params = json.dumps(f.spec.params, sort_keys=True)
            run = f"{f.spec.study} run {f.spec.key} (seed {f.spec.seed}, {params})"
            print(f"failed: {run}: {f.error}", file=out)
        where = f"; tracebacks in {self.store}" if self.store else ""
        raise RunsFailed(
            f"{len(self.failed)} of {len(self.results)} runs failed (listed above{where})",
            fix="fix the cause and run the same command again: only runs without a result run",
        )


class Executor(Protocol):
    def describe(self) -> str: ...

    def run(self, todo: Sequence[RunSpec], done: Callable[[RunSpec, Outcome], None]) -> None: ...


def call(spec: RunSpec) -> Mapping[str, Json]:
    """Run one spec, here, and return what its function returns."""
    return spec.func(spec.params, spec.seed)


def check_options(options: SweepOptions) -> None:
    """Refuse options no executor can use (one line each)."""
    if options.workers is not None and options.workers < 1:
        raise SweepUsageError(
            f"--workers {options.workers}: a sweep needs at least one worker",
            fix="give --workers 1 or more (default: the number of cores)",
        )
    if options.attempts < 1:
        raise SweepUsageError(f"attempts must be >= 1, got {options.attempts}")


def run_sweep(specs: Sequence[RunSpec], options: SweepOptions | None = None) -> SweepResult:
    """Execute every spec that has no stored result and return all results in order.

    Order of checks, all before any run: the options, the store (its format
    versions), the executor (a Dask scheduler is reached and its workers
    checked). A run that raises is recorded (stored with its error) and the
    sweep goes on; :meth:`SweepResult.check` lists the failures.
    """
    from testbed.sweep.progress import Progress
    from testbed.sweep.store import ResultStore, Stored

    options = options or SweepOptions()
    check_options(options)
    t0 = time.monotonic()
    unique: dict[str, RunSpec] = {}
    versions: dict[str, int] = {}
    for spec in specs:
        unique.setdefault(spec.key, spec)
        if versions.setdefault(spec.study, spec.version) != spec.version:
            raise ValueError(f"study {spec.study!r} has runs of two result versions")
    modules = sorted({s.func.__module__ for s in unique.values()})
    store = ResultStore(options.store) if options.store is not None else None
    try:
        have: dict[str, Stored] = {}
        if store is not None:
            store.claim(versions)
            for study, version in versions.items():
                keys = [k for k, s in unique.items() if s.study == study]
                have.update(store.get(study, version, keys))
        reuse = {} if options.force else {k: v for k, v in have.items() if v.ok}
        todo = [s for k, s in unique.items() if k not in reuse]
        executor = _executor(options, len(todo), modules) if todo else None
        say = (lambda line: print(line, file=sys.stderr, flush=True)) if options.progress else None
        if say is not None:
            _header(say, options, unique, reuse, todo, executor, modules)
        outcomes: dict[str, Outcome] = {}
        bar = Progress(len(unique), len(reuse), options.desc, enabled=options.progress)

        def done(spec: RunSpec, out: Outcome) -> None:
            if store is not None:
                store.put(
                    spec.study,
                    spec.version,
                    spec.key,
                    json.dumps(spec.params, sort_keys=True),
                    spec.seed,
                    result=out.result,
                    error=out.error,
                    detail=out.detail,
                    seconds=out.seconds,
                    code=out.code,
                    host=out.host,
                )
            outcomes[spec.key] = out
            bar.update(out.result is not None)

        try:
            if executor is not None:
                executor.run(todo, done)
        except KeyboardInterrupt:
            bar.close()
            if store is not None:
                n = len(reuse) + sum(o.result is not None for o in outcomes.values())
                print(
                    f"{options.desc}: interrupted; {n} of {len(unique)} results are in "
                    f"{store.path}: the same command goes on from there",
                    file=sys.stderr,
                )
            raise
        finally:
            bar.close()
            if executor is not None and hasattr(executor, "close"):
                executor.close()
    finally:
        if store is not None:
            store.close()
    out = SweepResult(
        stored=len(reuse),
        ran=len(outcomes),
        store=options.store,
        seconds=time.monotonic() - t0,
    )
    out.run_seconds = sum(v.seconds for v in reuse.values()) + sum(
        o.seconds for o in outcomes.values()
    )
    for spec in specs:
        got = outcomes.get(spec.key)
        if got is None:
            out.results.append(reuse[spec.key].result)
        elif got.result is not None:
            out.results.append(json.loads(got.result))
        else:
            out.results.append(None)
            out.failed.append(RunFailure(spec, got.error, got.detail))
    return out


def _executor(options: SweepOptions, runs: int, modules: list[str]) -> Executor:
    from testbed.sweep.local import InProcess, LocalPool

    if options.dask is not None:
        from testbed.sweep.daskpool import DaskPool

        pool = DaskPool(options.dask, options.connect_timeout, options.attempts)
        pool.open(modules)
        return pool
    workers = options.workers or os.cpu_count() or 1
    if workers == 1 or runs == 1:
        return InProcess()
    from testbed.sweep.fingerprint import fingerprint

    known = {m: fingerprint(m) for m in modules}
    return LocalPool(min(workers, runs), options.attempts, known)


def _header(
    say: Callable[[str], None],
    options: SweepOptions,
    unique: Mapping[str, RunSpec],
    reuse: Mapping[str, Any],
    todo: Sequence[RunSpec],
    executor: Executor | None,
    modules: list[str],
) -> None:
    """What is about to happen, before the bar: runs, stored, where they run."""
    from testbed.sweep.fingerprint import fingerprint

    parts = [f"{options.desc}: {len(unique)} runs"]
    if options.store is not None:
        parts.append(f"{len(reuse)} stored in {options.store}")
    if executor is not None:
        parts.append(f"{len(todo)} to run on {executor.describe()}")
    say(", ".join(parts))
    line = getattr(executor, "line", None)
    if line:
        say(line)
    ours = {m: fingerprint(m) for m in modules}
    other = sum(1 for k, v in reuse.items() if v.code and v.code != ours[unique[k].func.__module__])
    if other:
        say(
            f"note: {other} stored results were made by other code than this checkout's "
            "(their result format is the same, so they are used; --force reruns them)"
        )
