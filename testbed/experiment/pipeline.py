"""The one pipeline every study goes through: spec -> run -> results.json -> report.

:func:`run` loads a spec (registry.py), applies ``--quick`` and the command line's
overrides, runs the study, and writes ``results.json`` (results.py: kind, schema, command,
commit, host) -- also after every step a long study reports through ``ctx.save``, so a run
that fails keeps what it measured. :func:`write_report` writes the report from that file's
contents alone: ``cosched experiment report`` and the end of a run call the same code, so a
committed report is rebuilt byte for byte from its data.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.experiment import registry
from testbed.experiment import results as results_mod
from testbed.experiment.fields import SpecError
from testbed.experiment.protocol import RunContext, Say, Study
from testbed.experiment.results import Made, Results
from testbed.sweep import SweepOptions

REPORT = "report.md"
RESULTS = "results.json"


def prepare(
    path: Path, *, quick: bool = False, overrides: Mapping[str, str] | None = None
) -> tuple[Study, Any]:
    """The study and its spec, with ``--quick`` and the overrides applied."""
    study, spec = registry.load(path)
    given = dict(overrides or {})
    wrong = [k for k in given if k not in study.overrides]
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        allowed = ", ".join("--" + k.replace("_", "-") for k in study.overrides) or "none"
        raise SpecError(
            f"{flags}: not for a {study.kind} spec ({path})", fix=f"its overrides: {allowed}"
        )
    if quick:
        spec = study.quick(spec)
    if given:
        spec = study.override(spec, given)
    return study, spec


def default_out(study: Study, spec: Any, quick: bool) -> Path:
    name = study.name(spec)
    if quick and not name.endswith("-quick"):
        name += "-quick"
    return Path("results") / name


def footer(results: Results) -> str:
    return (
        "\n---\n\n"
        + results.made.line()
        + f" Data: `{RESULTS}` (kind `{results.kind}`, schema {results.schema}); "
        f"`cosched experiment report {RESULTS}` writes this report again from it.\n"
    )


def write_report(study: Study, results: Results, out: Path) -> list[Path]:
    """The report's Markdown (the top file with the footer saying what made the data)
    and its plots, from ``results`` alone."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rel, text in study.render(results.data).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel == REPORT:
            text = text.rstrip("\n") + "\n" + footer(results)
        path.write_text(text)
        written.append(path)
    return written + study.plots(results.data, out)


def run(
    path: Path,
    *,
    command: str,
    out: Path | None = None,
    quick: bool = False,
    overrides: Mapping[str, str] | None = None,
    reuse_cluster: bool = False,
    sweep: SweepOptions | None = None,
    say: Say = print,
) -> tuple[Study, Results, Path]:
    """Run the spec at ``path``; its study, results and report folder."""
    study, spec = prepare(path, quick=quick, overrides=overrides)
    out = out or default_out(study, spec, quick)
    out.mkdir(parents=True, exist_ok=True)
    made: list[Made] = []

    def save(data: Any) -> None:
        if not made:
            made.append(results_mod.made_now(command))
        results_mod.write(out / RESULTS, Results(study.kind, data, made[0]), study.dump)

    ctx = RunContext(
        out=out, command=command, quick=quick, reuse_cluster=reuse_cluster,
        sweep=sweep or SweepOptions(), say=say, save=save,
    )  # fmt: skip
    made.append(results_mod.made_now(command))  # the code and host as the run starts
    data = study.run(spec, ctx)
    res = Results(study.kind, data, made[0])
    results_mod.write(out / RESULTS, res, study.dump)
    # the report is written from the file, as `cosched experiment report` does
    res = read(out / RESULTS)
    write_report(study, res, out)
    return study, res, out


def read(path: Path) -> Results:
    return results_mod.read(path, list(registry.KINDS))


def report(path: Path, out: Path | None = None) -> tuple[Study, Results, list[Path]]:
    """Write the report of a results.json again (beside it, or in ``out``)."""
    res = read(path)
    study = registry.study(res.kind)
    return study, res, write_report(study, res, out or path.parent)
