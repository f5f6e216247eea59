"""Wiseman & Feitelson 2003 §4.1 on real processes (kind ``paired-live``): the five job mixes
of Fig. 7 under strict gang and paired gang on the local cluster, and with a ``[sweep]``
Fig. 8 (cluster size) or Fig. 9 (granularity). spec.py reads the spec, run.py runs it,
report.py writes the report. What ``make run`` runs.

The data in results.json are ``{"result": ...}`` for one experiment or ``{"sweep": ...}``
for a sweep (run.py's ExperimentResult and SweepResult).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import SpecError, Table
from testbed.experiment.protocol import RunContext, Study, split_csv


def _result(data: Mapping[str, Any]) -> Any:
    from testbed.experiment.paired.run import ExperimentResult, SweepResult

    if "sweep" in data:
        return SweepResult.from_dict(data["sweep"])
    return ExperimentResult.from_dict(data["result"])


class PairedLiveStudy(Study):
    kind = "paired-live"
    title = "Wiseman & Feitelson 2003 §4.1, Figs. 7-9: paired vs strict gang, live"
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = (
        "experiment",
        "sweep",
        "cluster",
        "controller",
        "jobs",
    )
    specs = (
        "experiments/paired-vs-gang.toml",
        "experiments/paired-vs-gang-2node.toml",
        "experiments/paired-vs-gang-2node-io-lowcpu.toml",
        "experiments/fig8-cluster-size.toml",
        "experiments/fig9-granularity.toml",
        "experiments/paired-fig7-q1.toml",
        "experiments/paired-fig8-q1.toml",
    )
    overrides = ("duration", "mixes", "configs")

    def load(self, doc: Table) -> Any:
        from testbed.experiment.paired.spec import load_experiment

        return load_experiment(doc)

    def override(self, spec: Any, values: Mapping[str, str]) -> Any:
        from testbed.experiment.paired.spec import CONFIGS

        changes: dict[str, Any] = {}
        if "duration" in values:
            try:
                changes["duration"] = float(values["duration"])
            except ValueError:
                changes["duration"] = -1.0
            if not changes["duration"] > 0:
                raise SpecError(f"--duration: seconds > 0, got {values['duration']!r}")
        if "mixes" in values:
            try:
                mixes = tuple(int(m) for m in split_csv(values["mixes"]))
            except ValueError:
                mixes = (-1,)
            if not mixes or any(not 0 <= m <= 4 for m in mixes):
                raise SpecError("--mixes: I/O job counts in 0..4, e.g. 0,1,4")
            changes["mixes"] = mixes
        if "configs" in values:
            configs = tuple(split_csv(values["configs"]))
            for c in configs:
                if c not in CONFIGS:
                    raise SpecError(f"--configs: unknown {c!r}", fix="valid: " + ", ".join(CONFIGS))
            changes["configs"] = configs
        return dataclasses.replace(spec, **changes)

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.harness.cluster import host_cores

        runs = len(spec.configs) * len(spec.mixes)
        lines = []
        for label, _value, point in spec.points(host_cores()):
            lines.append(
                (f"{label}: " if label else "")
                + f"{runs} runs of {point.duration:g} s ({', '.join(spec.configs)} × mixes "
                f"{list(spec.mixes)}) on {point.nodes} nodes at {point.cpus_per_node} CPU "
                f"({point.cpu_mechanism}), link {point.link}, quantum {point.quantum} s"
            )
        return lines

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.paired.run import run_experiment, run_sweep

        if spec.sweep is not None:
            sweep = run_sweep(
                spec, ctx.out, reuse_cluster=ctx.reuse_cluster, say=ctx.say,
                save=lambda s: ctx.save({"sweep": asdict(s)}),
            )  # fmt: skip
            return {"sweep": asdict(sweep)}
        result = run_experiment(
            spec, ctx.out, reuse_cluster=ctx.reuse_cluster, say=ctx.say,
            save=lambda r: ctx.save({"result": asdict(r)}),
        )  # fmt: skip
        return {"result": asdict(result)}

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.paired import report

        res = _result(data)
        if "sweep" in data:
            files = {f"{p.label}/report.md": report.markdown(p.result) for p in res.points}
            return {"report.md": report.sweep_markdown(res), **files}
        return {"report.md": report.markdown(res)}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.paired import report

        res = _result(data)
        if "sweep" in data:
            written = []
            for p in res.points:
                (out / p.label).mkdir(parents=True, exist_ok=True)
                written += report.plots(p.result, out / p.label)
            return [*written, out / report.sweep_plots(res, out)]
        return report.plots(res, out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.paired import report

        res = _result(data)
        return report.sweep_text(res) if "sweep" in data else report.text_summary(res)

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.paired import report

        res = _result(data)
        if "sweep" in data:
            return report.sweep_claims(res)
        return report.claims(res)


STUDY = PairedLiveStudy()
