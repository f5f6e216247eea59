"""Wiseman & Feitelson 2003 §4.2 in the simulator (kind ``paired-sim``): Fig. 10 (response and
slowdown against load), Fig. 11 (jobs in the system over time) and Fig. 12 (heterogeneous
against homogeneous jobs), with the execution model measured live (study.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class PairedSimStudy(Study):
    kind = "paired-sim"
    title = "Wiseman & Feitelson 2003 §4.2, Figs. 10-12: paired vs strict gang, in the simulator"
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "runs")
    specs = ("experiments/sim-paired-fig10-12.toml", "experiments/sim-paired-capacity.toml")
    has_quick = True  # 120 jobs, the first two loads

    def load(self, doc: Table) -> Any:
        from testbed.experiment.pairedsim.study import load_study

        return load_study(doc)

    def quick(self, spec: Any) -> Any:
        from dataclasses import replace

        return replace(spec, quick=True)

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.pairedsim.study import QUICK_JOBS

        loads = spec.loads[:2] if spec.quick else spec.loads
        jobs = f"{QUICK_JOBS} jobs of " if spec.quick else ""
        return [
            f"{len(loads) * len(spec.runs)} simulations on {spec.nodes} nodes ({spec.mode}): "
            f"{', '.join(r.label for r in spec.runs)} at loads {list(loads)}; "
            f"{jobs}workload {spec.workload}; execution model {spec.calibration}"
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.pairedsim.study import run_study

        results, meta = run_study(spec, quick=spec.quick, sweep=ctx.sweep)
        return {"meta": meta, "runs": results}

    def dump(self, data: Any) -> str:
        from testbed.experiment.pairedsim.study import RunResult, _row, dump

        runs = [r if isinstance(r, RunResult) else _row(r) for r in data["runs"]]
        return dump(runs, data["meta"])

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.pairedsim.study import from_data, markdown

        return {"report.md": markdown(*from_data(data))}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.pairedsim.study import from_data, plots

        return plots(from_data(data)[0], out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.pairedsim.study import from_data, targets

        return "\n".join(
            f"target: {what}: {figure} — "
            + ("not run" if ok is None else ("met" if ok else "MISSED"))
            for what, ok, figure in targets(from_data(data)[0])
        )

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.pairedsim.study import claims, from_data

        return claims(from_data(data)[0])


STUDY = PairedSimStudy()
