"""Wiseman & Feitelson 2003 Figs. 3 and 13 as a study (kind ``paired-trace``, issue 25):
the live Fig. 3 trace (recorded by ``python -m testbed.experiment.pairedscale.trace fig3``,
root and the host lock) replayed through eq. (1), and Fig. 13's four QCRD copies in the
simulator over several seeds, without and with sharp-change detection, so the ledger
counts both. study.py holds the spec, the runs, the report and the claims; the live
recording and the simulation of one Fig. 13 run are in pairedscale/trace.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim, terminal
from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class PairedTraceStudy(Study):
    kind = "paired-trace"
    title = (
        "Wiseman & Feitelson 2003 Figs. 3 and 13: eq. (1)'s prediction against a live trace, "
        "and four QCRD copies with and without sharp-change detection over seeds"
    )
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "quick")
    specs = ("experiments/paired-trace-fig3-13.toml",)
    has_quick = True  # two seeds

    def load(self, doc: Table) -> Any:
        from testbed.experiment.pairedtrace.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_variant()

    def plan(self, spec: Any) -> list[str]:
        return [
            f"Fig. 3: replay the live trace {spec.fig3_live or '(none)'} through eq. (1)",
            f"Fig. 13: {2 * len(spec.seeds)} simulations of four QCRD copies on {spec.nodes} "
            f"nodes (sharp change none and {spec.sharp_change:g}), seeds {list(spec.seeds)}",
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.pairedtrace.study import run_study

        return run_study(spec, ctx.sweep)

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=None, separators=(",", ":")) + "\n"

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.pairedtrace.study import markdown

        return {"report.md": markdown(data)}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.pairedtrace.study import plots

        return plots(data, out)

    def summary(self, data: Any) -> str:
        return terminal(self.claims(data), width=15)

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.pairedtrace.study import claims

        return claims(data)


STUDY = PairedTraceStudy()
