"""What a study is: the protocol every kind of experiment follows.

A study (one subpackage of testbed/experiment/, registered in registry.py) declares its
``kind`` and turns

    spec (TOML, read with fields.Table) --run--> data --report--> report.md + PNGs
                                                   \\--claims--> paper says / we measured

``run`` returns the study's data; the framework (runner.py) wraps it in results.json with
the kind, the schema, the command and the host (results.py), and writes the report from
that file, so ``cosched experiment report`` rebuilds it byte for byte. Studies made of
independent simulated runs hand them to the sweep executor (testbed.sweep.run_sweep);
live studies run on the local cluster through the shared harness (harness/), one run at
a time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import SpecError, Table
from testbed.sweep import SweepOptions

Say = Callable[[str], None]


@dataclass
class RunContext:
    """What a study's run gets from the framework besides its spec."""

    out: Path  # the report folder; results.json is written there
    command: str  # the command that runs it (recorded in results.json)
    quick: bool = False
    reuse_cluster: bool = False  # live studies: run on a cluster that is already up
    sweep: SweepOptions = field(default_factory=SweepOptions)  # simulated runs' executor
    say: Say = print
    save: Callable[[Any], None] = lambda data: None  # write partial data to results.json


class Study:
    """One kind of study. Subclasses set the class attributes and the methods they need."""

    kind: ClassVar[str]
    title: ClassVar[str]  # what it reproduces, with the paper's name and figures
    live: ClassVar[bool] = False  # needs root and the local cluster
    spec_tables: ClassVar[tuple[str, ...]]  # the top-level tables its specs may hold
    specs: ClassVar[tuple[str, ...]] = ()  # the committed specs of this kind (experiments/)
    # command-line overrides this kind takes (testbed/commands/experiment.py OVERRIDES)
    overrides: ClassVar[tuple[str, ...]] = ()
    has_quick: ClassVar[bool] = False
    schema: ClassVar[int] = 1
    # a module with markdown(data), plots(data, out) and summary(data): the report's
    # three methods below then need no override (imported when first used)
    report_module: ClassVar[str] = ""

    # ---- the spec ---------------------------------------------------------------------
    def load(self, doc: Table) -> Any:
        """The typed spec from the parsed document (fields.Table); SpecError if bad."""
        raise NotImplementedError

    def quick(self, spec: Any) -> Any:
        """The ``--quick`` variant (the spec's [quick] table)."""
        raise SpecError(f"{self.kind} specs have no --quick variant", fix="run it without --quick")

    def override(self, spec: Any, values: Mapping[str, str]) -> Any:
        """The spec with the command line's overrides (only those in ``overrides``)."""
        return spec

    def name(self, spec: Any) -> str:
        return str(spec.name)

    def plan(self, spec: Any) -> list[str]:
        """What ``run`` would do, one line each (``--dry-run``)."""
        raise NotImplementedError

    # ---- running and reporting --------------------------------------------------------
    def run(self, spec: Any, ctx: RunContext) -> Any:
        """Run the study; its data (JSON-able)."""
        raise NotImplementedError

    def dump(self, data: Any) -> str | None:
        """The data's JSON text if the study lays it out itself (None: indented JSON)."""
        return None

    def _report(self) -> Any:
        return importlib.import_module(self.report_module) if self.report_module else None

    def render(self, data: Any) -> dict[str, str]:
        """The report's Markdown files by path relative to the report folder."""
        report = self._report()
        if report is None:
            raise NotImplementedError
        return {"report.md": report.markdown(data)}

    def plots(self, data: Any, out: Path) -> list[Path]:
        report = self._report()
        return list(report.plots(data, out)) if report is not None else []

    def summary(self, data: Any) -> str:
        """What the terminal shows after a run or a report."""
        report = self._report()
        return str(report.summary(data)) if report is not None else ""

    def claims(self, data: Any) -> list[Claim]:
        """Each result of a paper's evaluation this data measures (docs/reproduction.md)."""
        return []


def split_csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def unknown_overrides(study: Study, given: Sequence[str]) -> list[str]:
    return [g for g in given if g not in study.overrides]
