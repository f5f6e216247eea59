"""DHC on the live cluster (kind ``dhc-live``; Feitelson & Rudolph 1996 against strict and
paired gang, Wiseman & Feitelson 2003): one seeded Lublin stream live on the local
power-of-two cluster under each policy, and the same jobs through the simulator.

The runs are the sim-vs-live study's (simvslive/study.py: the stream, the job, the
dedicated times, the live and simulated halves), with ``dhc`` among the policies;
report.py sets each policy's live figures beside the simulator's prediction and says
whether the simulator ranks the policies as the live cluster did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.fields import SpecError, Table
from testbed.experiment.protocol import RunContext, Study

KIND = "dhc-live"
POLICIES = ("gang", "paired-gang", "dhc")


class DhcLiveStudy(Study):
    kind = KIND
    title = (
        "DHC (Feitelson & Rudolph 1996) against strict and paired gang on the live "
        "cluster, the simulator's prediction beside each figure"
    )
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = (
        "experiment",
        "cluster",
        "controller",
        "job",
        "quick",
        "sim",
    )
    specs = ("experiments/dhc-live.toml",)
    overrides = ("resimulate",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.experiment.dhclive.report import check_nodes
        from testbed.experiment.simvslive.study import load_spec

        spec = load_spec(doc, POLICIES)
        check_nodes(spec.nodes, spec.policies, str(doc.path))
        return spec

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def override(self, spec: Any, values: Mapping[str, str]) -> Any:
        spec = dataclasses.replace(spec)
        object.__setattr__(spec, "resimulate", "resimulate" in values)
        return spec

    def plan(self, spec: Any) -> list[str]:
        if getattr(spec, "resimulate", False):
            return [f"simulate again the live runs in OUT/results.json: {len(spec.sims)} variants"]
        return [
            f"{spec.jobs} Lublin jobs (seed {spec.seed}) live on {spec.nodes} nodes at "
            f"{spec.cpus_per_node} CPU ({spec.cpu_mechanism}), quantum {spec.quantum} s: "
            f"{', '.join(spec.policies)} at loads {list(spec.loads)}",
            "then every run simulated: " + ", ".join(v.label for v in spec.sims),
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.simvslive.study import read_result, run_validation, simulate_all

        if getattr(spec, "resimulate", False):
            path = ctx.out / "results.json"
            if not path.exists():
                raise SpecError(f"--resimulate: no {path}", fix="run the live part first (root)")
            result = read_result(path, KIND)
            simulate_all(result, spec, ctx.say, ctx.sweep)
            return result.to_dict()
        result = run_validation(
            spec, ctx.out, quick=ctx.quick, reuse_cluster=ctx.reuse_cluster, say=ctx.say,
            save=lambda r: ctx.save(r.to_dict()), sweep=ctx.sweep,
        )  # fmt: skip
        return result.to_dict()

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.dhclive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return {"report.md": report.markdown(ValidationResult.from_dict(data))}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.simvslive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return report.plots(ValidationResult.from_dict(data), out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.dhclive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return "\n".join(report.summary_lines(ValidationResult.from_dict(data)))


STUDY = DhcLiveStudy()
