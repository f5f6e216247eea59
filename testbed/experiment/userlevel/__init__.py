"""Paired gang under user-level communication (kind ``paired-userlevel``; issue 31 item 2,
Wiseman & Feitelson 2003 §5): how the message library's receive waiting actions (spin,
block, spin-block; apps/mp/wait.py) change the CPU utilization the agents measure for a
communication-bound job, and what paired gang then does beside an I/O-bound or a
compute-bound partner; where along spin-block's spin time pairing stops, measured and
predicted from the job's message waits (model.py). spec.py reads the spec, run.py runs it
on the local cluster, report.py writes the report; docs/userlevel.md has the choices.
"""

from __future__ import annotations

from typing import Any, ClassVar

from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


class UserlevelStudy(Study):
    kind = "paired-userlevel"
    title = (
        "Wiseman & Feitelson 2003 §5: paired gang under user-level communication "
        "(spin, block, spin-block), live"
    )
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = (
        "experiment", "cluster", "controller", "jobs", "partners", "quick",
    )  # fmt: skip
    specs = ("experiments/paired-userlevel.toml", "experiments/paired-userlevel-fine.toml")
    has_quick = True
    report_module = "testbed.experiment.userlevel.report"

    def load(self, doc: Table) -> Any:
        from testbed.experiment.userlevel.spec import load

        return load(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        from testbed.experiment.userlevel.run import configs

        n = spec.runs_per_repeat()
        lines = [
            f"{spec.repeats} repeat(s) of {n} runs of {spec.duration:g} s on {spec.nodes} "
            f"nodes at {spec.cpus_per_node} CPU ({spec.cpu_mechanism}), link {spec.link}, "
            f"quantum {spec.quantum:g} s"
        ]
        return lines + ["  " + c.label for c in configs(spec)]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.userlevel.run import run_study

        return run_study(spec, ctx.out, ctx.say, ctx.save, ctx.reuse_cluster)


STUDY = UserlevelStudy()
