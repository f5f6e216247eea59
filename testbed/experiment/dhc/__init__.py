"""Feitelson & Rudolph 1996 in the simulator (kind ``dhc-sim``): DHC's design choices
(load balancing, mapping, selective disabling, time division; Table 1, Figs. 2-4, 6-7,
9-12, 19) and the waste analysis of Section 4 (Fig. 18). study.py makes the runs,
report.py the report and the verdicts; docs/dhc.md says what was chosen where the paper
is silent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class DhcStudy(Study):
    kind = "dhc-sim"
    title = "Feitelson & Rudolph 1996: DHC's design choices and waste, in the simulator"
    spec_tables: ClassVar[tuple[str, ...]] = ("dhc", "quick")
    specs = ("experiments/dhc.toml", "experiments/dhc-table1.toml")
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.experiment.dhc.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.dhc.study import runs

        todo = runs(spec)
        families = sorted({r.family for r in todo})
        lines = [
            f"{len(todo)} fluid runs of {spec.gangs} gangs on {spec.pes} PEs: "
            f"{', '.join(families)}; loads {sorted(set(spec.loads) | set(spec.point_loads))}, "
            f"{spec.seeds} seed(s)"
        ]
        if spec.waste:
            lines.append(
                f"Section 4: bounds on {spec.waste_table_pes} PEs, Fig. 18 at {spec.waste_pes} PEs"
            )
        return lines

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.dhc.study import run_study

        points, meta = run_study(spec, ctx.sweep)
        return {"meta": meta, "points": points}

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=1)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.dhc import report

        return {"report.md": report.markdown(data["points"], data["meta"])}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.dhc import report

        return report.plots(data["points"], data["meta"], out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.dhc import report

        return report.summary(data["points"], data["meta"])

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.dhc import report

        return report.claims(data["points"], data["meta"])


STUDY = DhcStudy()
