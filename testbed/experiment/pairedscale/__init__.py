"""Wiseman & Feitelson 2003 §4.2 at the paper's own scale, in the simulator (kind
``paired-scale``, issue 25): Figs. 10-12 and Fig. 14's QCRD-like stream over several
workload seeds with the execution model that has what ParPar had (study.py: spec and
runs; report.py: the report, the plots and the paper's claims beside ours). The live
Figs. 3, 7, 8 and 13 beside their simulated counterparts are in figs78.py and trace.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim, Verdict, terminal
from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class PairedScaleStudy(Study):
    kind = "paired-scale"
    title = (
        "Wiseman & Feitelson 2003 §4.2, Figs. 10-12 and 14 at the paper's scale: paired vs "
        "strict gang over workload seeds, with launch, full quanta and the program's barrier"
    )
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "runs", "quick")
    specs = ("experiments/paired-scale-fig10-12.toml", "experiments/paired-placement.toml")
    has_quick = True  # 150 jobs, two loads, two seeds

    def load(self, doc: Table) -> Any:
        from testbed.experiment.pairedscale.study import load_study

        return load_study(doc.path, doc.data)

    def quick(self, spec: Any) -> Any:
        return spec.quick_variant()

    def name(self, spec: Any) -> str:
        return str(spec.name)

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.pairedscale.study import plan

        runs = plan(spec)
        return [
            f"{len(runs)} simulations on {spec.nodes} nodes: {len(spec.runs)} configurations, "
            f"loads {list(spec.loads)}, seeds {list(spec.seeds)}, {spec.jobs} Lublin jobs "
            f"each; terms {', '.join(spec.terms) or 'none'}; model {spec.calibration}"
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.pairedscale.study import run_study

        return run_study(spec, replace(ctx.sweep, desc=f"{spec.name} runs"))

    def dump(self, data: Any) -> str:
        from testbed.experiment.pairedscale.study import runs_json

        return runs_json(data)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.pairedscale.report import markdown

        return {"report.md": markdown(data)}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.pairedscale.report import plots

        return plots(data, out)

    def summary(self, data: Any) -> str:
        return terminal(self.claims(data), width=15)

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.pairedscale.report import claims

        return [
            Claim(c.id, c.where, c.says, c.measured, Verdict(c.verdict), c.why)
            for c in claims(data["runs"])
        ]


STUDY = PairedScaleStudy()
