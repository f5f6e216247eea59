"""N + 1 gangs for N I/O devices in the simulator (kind ``nplus1-sim``; issue 31 item 1,
Wiseman & Feitelson 2003 §5): strict gang, paired gang and N + 1 gangs on one stream of
compute-, disk- and network-bound jobs. study.py makes the runs, report.py the report;
docs/nplus1.md says what was chosen where §5 is silent.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class Nplus1SimStudy(Study):
    kind = "nplus1-sim"
    title = "Wiseman & Feitelson 2003 §5: N + 1 gangs for N I/O devices, in the simulator"
    spec_tables: ClassVar[tuple[str, ...]] = ("nplus1", "quick")
    specs = (
        "experiments/nplus1-sim.toml",
        "experiments/nplus1-sim-wide.toml",
        "experiments/nplus1-sim-heavy.toml",
    )
    has_quick = True
    report_module = "testbed.experiment.nplus1sim.report"

    def load(self, doc: Table) -> Any:
        from testbed.experiment.nplus1sim.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        return [
            f"{spec.seeds * len(spec.policies)} exact runs: {', '.join(spec.policies)} on "
            f"{spec.seeds} seed(s) of {spec.jobs} jobs, {spec.nodes} nodes, load {spec.load}"
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.nplus1sim.study import run_study

        return run_study(spec, ctx.sweep)

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=None, separators=(",", ":")) + "\n"


STUDY = Nplus1SimStudy()
