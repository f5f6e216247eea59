"""Sweeps of independent simulated runs: the one way a study hands its runs out.

A study describes each run as a :class:`RunSpec` (which study, the parameters
that determine the result, the seed, and a top-level function to call) and
hands the list to :func:`run_sweep`, which returns one result per spec in the
order given. What executes the runs (this process, local worker processes, a
Dask cluster) and whether results are kept between invocations is chosen by
:class:`SweepOptions`, never by the study (docs/sweeps.md).

This module holds the interface and the in-process executor; the parallel
executors and the result store build on it.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Json = Any  # a value json.dumps accepts: dict, list, str, int, float, bool, None
RunFunc = Callable[[Mapping[str, Json], int], Mapping[str, Json]]


@dataclass(frozen=True)
class RunSpec:
    """One independent run: ``func(params, seed)`` returns a JSON-able mapping.

    ``func`` must be a module-level function (it is pickled by reference to
    reach worker processes); ``params`` must hold everything besides the seed
    that the result depends on, as JSON-able values.
    """

    study: str
    params: Mapping[str, Json]
    seed: int
    func: RunFunc

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
    """How to execute a sweep; the defaults run every spec here, in order."""

    workers: int | None = 1  # local worker processes; None = the number of cores
    dask: str | None = None  # address of a Dask scheduler, e.g. tcp://host:8786
    force: bool = False  # rerun runs whose results are stored
    progress: bool = True  # a progress bar on stderr
    desc: str = "runs"


@dataclass
class SweepResult:
    """Results in the order of the specs given; ``None`` where a run failed."""

    results: list[Mapping[str, Json] | None] = field(default_factory=list)
    failed: list[RunFailure] = field(default_factory=list)

    def ok(self) -> bool:
        return not self.failed


def call(spec: RunSpec) -> Mapping[str, Json]:
    """Run one spec (what every executor calls, here or in a worker)."""
    return spec.func(spec.params, spec.seed)


def run_serial(specs: Sequence[RunSpec], options: SweepOptions) -> SweepResult:
    """Execute ``specs`` one after another in this process; record failures, go on."""
    from tqdm import tqdm

    out = SweepResult()
    bar = tqdm(total=len(specs), desc=options.desc, disable=not options.progress or None)
    try:
        for spec in specs:
            try:
                out.results.append(call(spec))
            except Exception as e:  # a failed run is recorded, the sweep goes on
                out.results.append(None)
                out.failed.append(
                    RunFailure(spec, f"{type(e).__name__}: {e}", traceback.format_exc())
                )
            bar.update(1)
    finally:
        bar.close()
    return out


def run_sweep(specs: Sequence[RunSpec], options: SweepOptions | None = None) -> SweepResult:
    """Execute every spec and return their results in order (see SweepOptions)."""
    return run_serial(specs, options or SweepOptions())
