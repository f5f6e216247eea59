"""Yu & Byun 2011 in the CDC simulator (kind ``cdc-sim``): Figs. 7-11 at the paper's scale
over seeds (§5.3-5.5), with a verdict per stated claim that respects the seed-to-seed
spread. The runs and the report live in testbed/sim/cdc/study.py and studyreport.py; this
module puts them behind the study protocol. Each run is kept as ``OUT/runs/*.json``, so a
study resumes and a subset (a spec listing fewer parts, schemes or jobs) is reported as
what it is. Its claims enter the reproduction ledger through cdcsim/claims.py.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import SpecError, Table
from testbed.experiment.protocol import RunContext, Study


class CdcSimStudy(Study):
    kind = "cdc-sim"
    title = "Yu & Byun 2011 §5.3-5.5: the CDC schemes at the paper's scale, simulated"
    spec_tables: ClassVar[tuple[str, ...]] = ("cdc", "parts")
    specs = (
        "experiments/cdc-paper-scale.toml",
        "experiments/cdc-paper-scale-subset.toml",
        "experiments/cdc-paper-scale-heavy100.toml",
        "experiments/cdc-paper-scale-subset-approx.toml",
        "experiments/cdc-paper-scale-fig9.toml",
    )
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.sim.cdc.study import StudyError, spec_from_doc

        try:
            return spec_from_doc(doc.data, doc.path)
        except (StudyError, KeyError, TypeError, ValueError) as e:
            raise SpecError(
                f"{doc.path}: {e}", fix="see experiments/cdc-paper-scale.toml"
            ) from None

    def quick(self, spec: Any) -> Any:
        return dataclasses.replace(spec, quick=True)

    def plan(self, spec: Any) -> list[str]:
        from testbed.sim.cdc.study import todo_of

        todo = todo_of(spec)
        return [
            f"{p.name}: {', '.join(p.workloads)} x {', '.join(p.loads)}, MPL "
            f"{', '.join(map(str, p.mpls))}, {len(p.schemes)} schemes, "
            f"{sum(1 for c in todo if c['part'] == p.name)} runs of "
            f"{2 if spec.quick else p.jobs} jobs"
            for p in spec.parts
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.sim.cdc import studyreport
        from testbed.sim.cdc.study import StudyError, run, todo_of

        todo = todo_of(spec)
        try:
            failed = run(spec, todo, ctx.out, progress=True, say=ctx.say, options=ctx.sweep)
        except StudyError as e:
            raise SpecError(str(e), fix="see docs/simulator.md, the paper-scale study") from None
        if failed:
            ctx.say(f"{failed} run(s) failed; the report holds the others")
        doc = studyreport.build(spec, ctx.out, spec.source)
        return doc

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=1)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.sim.cdc.studyreport import markdown

        return {"report.md": markdown(data)}

    def summary(self, data: Any) -> str:
        lines = []
        for c in data["claims"]:
            for o in c["ours"]:
                lines.append(
                    f"{c['text']} ({o['pair']}, {o['jobs']} jobs): paper {c['paper_pct']:+.1f} %, "
                    f"ours {o['mean_pct']:+.1f} % over {o['seeds']} seed(s): {o['verdict']}"
                )
        return "\n".join(lines)

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.cdcsim.claims import claims

        return claims(data)


STUDY = CdcSimStudy()
