"""Rajaei et al. 2008 (kinds ``rajaei-sim`` and ``rajaei-live``): gang scheduling with greedy and
with backfilling admission against lookahead backfilling, as the number of jobs and of time
slots grows (Figs. 5-9). study.py runs it in the simulator, report.py judges each finding
over the measured range of the switch cost; live.py runs it on the local cluster (the
``rajaei-live`` kind).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


def _points(data: Any) -> list[Any]:
    from testbed.experiment.rajaei.study import Point

    return [Point(**p) for p in data["points"]]


class RajaeiStudy(Study):
    kind = "rajaei-sim"
    title = "Rajaei et al. 2008 §6, Figs. 5-9: gang vs lookahead backfilling, in the simulator"
    spec_tables: ClassVar[tuple[str, ...]] = ("rajaei", "quick")
    specs = ("experiments/rajaei-gang-vs-backfill.toml",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.experiment.rajaei.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.rajaei.study import plan, switch_costs

        runs = plan(spec)
        return [
            f"{len(runs)} simulations on {spec.nodes} nodes: {', '.join(spec.policies)}; "
            f"jobs {spec.job_counts}; slots {spec.slots} at {spec.slot_jobs} jobs; "
            f"{spec.seeds} seeds; switch costs " + ", ".join(c.label for c in switch_costs(spec))
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.rajaei.study import run_study

        points, meta = run_study(spec, ctx.sweep, ctx.say)
        return {"meta": meta, "points": [asdict(p) for p in points]}

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=1)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.rajaei import report

        return {"report.md": report.markdown(_points(data), data["meta"])}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.rajaei import report

        return report.plots(_points(data), data["meta"], out)

    def summary(self, data: Any) -> str:
        from testbed.experiment.rajaei import report

        return report.summary(_points(data), data["meta"])

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.rajaei import report

        return report.claims(_points(data), data["meta"])


STUDY = RajaeiStudy()
