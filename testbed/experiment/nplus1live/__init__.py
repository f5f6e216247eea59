"""N + 1 gangs for N I/O devices on the live cluster (kind ``nplus1-live``; issue 31 item 1,
Wiseman & Feitelson 2003 §5): strict gang, paired gang and N + 1 gangs (N = 2) on a
compute-, a disk- and a network-bound job, 2 nodes with a core each, the disk path and the
shaped link measured by the agents. study.py makes the runs, report.py the report;
docs/nplus1.md says what was chosen where §5 is silent.
"""

from __future__ import annotations

from typing import Any, ClassVar

from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class Nplus1LiveStudy(Study):
    kind = "nplus1-live"
    title = "Wiseman & Feitelson 2003 §5: N + 1 gangs for N I/O devices, live on 2 nodes"
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = ("nplus1", "cluster", "controller", "jobs", "quick")
    specs = ("experiments/nplus1-live.toml",)
    has_quick = True
    report_module = "testbed.experiment.nplus1live.report"

    def load(self, doc: Table) -> Any:
        from testbed.experiment.nplus1live.study import load_spec

        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        return [
            f"calibration (5 jobs alone, {spec.calib_seconds:g} s each), then "
            f"{spec.repeats} x ({', '.join(spec.policies)}), each a compute, a disk and a "
            f"network job of ~{spec.solo_seconds:g} s alone, on {spec.nodes} nodes "
            f"({spec.cpus_per_node:g} CPU, {spec.cpu_mechanism}), link {spec.link}, "
            f"quantum {spec.quantum} s"
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.nplus1live.study import run_study

        return run_study(spec, ctx.out, ctx.say, ctx.save)


STUDY = Nplus1LiveStudy()
