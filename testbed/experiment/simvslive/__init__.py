"""The simulator against the live cluster (kind ``sim-vs-live``; Wiseman & Feitelson 2003 §4.2
scaled down): one seeded Lublin stream live under strict and paired gang, and the same jobs
through the simulator with the calibrated execution model. study.py runs both halves,
report.py compares them. The simulated half can be redone on saved live data
(``--resimulate``), without root.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.fields import SpecError, Table
from testbed.experiment.protocol import RunContext, Study


class SimVsLiveStudy(Study):
    kind = "sim-vs-live"
    title = (
        "the simulator against the live cluster on one Lublin stream "
        "(Wiseman & Feitelson 2003 §4.2 scaled down)"
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
    specs = ("experiments/sim-vs-live.toml",)
    overrides = ("resimulate",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.experiment.simvslive.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def override(self, spec: Any, values: Mapping[str, str]) -> Any:
        # the spec is frozen; the mode rides along as an attribute of a copy
        spec = dataclasses.replace(spec)
        object.__setattr__(spec, "resimulate", "resimulate" in values)
        return spec

    def plan(self, spec: Any) -> list[str]:
        if getattr(spec, "resimulate", False):
            return [f"simulate again the live runs in OUT/results.json: {len(spec.sims)} variants"]
        return [
            f"{spec.jobs} Lublin jobs (seed {spec.seed}) live on {spec.nodes} nodes at "
            f"{spec.cpus_per_node} CPU ({spec.cpu_mechanism}), quantum {spec.quantum} s: "
            f"{', '.join(spec.policies)} at loads {list(spec.loads)}, the dedicated rate "
            f"measured before ({spec.rate_repeats}x) and after every run ({spec.check_repeats}x)",
            "then every run simulated: " + ", ".join(v.label for v in spec.sims),
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.simvslive.study import read_result, run_validation, simulate_all

        if getattr(spec, "resimulate", False):
            path = ctx.out / "results.json"
            if not path.exists():
                raise SpecError(f"--resimulate: no {path}", fix="run the live part first (root)")
            result = read_result(path, self.kind)
            simulate_all(result, spec, ctx.say, ctx.sweep)
            return result.to_dict()
        result = run_validation(
            spec, ctx.out, quick=ctx.quick, reuse_cluster=ctx.reuse_cluster, say=ctx.say,
            save=lambda r: ctx.save(r.to_dict()), sweep=ctx.sweep,
        )  # fmt: skip
        return result.to_dict()

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.simvslive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return {"report.md": report.markdown(ValidationResult.from_dict(data))}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.simvslive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return report.plots(ValidationResult.from_dict(data), out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.simvslive import report
        from testbed.experiment.simvslive.study import ValidationResult, sensitivity_lines

        result = ValidationResult.from_dict(data)
        return "\n".join([*report.verdict_lines(result), *sensitivity_lines(result)])


STUDY = SimVsLiveStudy()
