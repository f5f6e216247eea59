"""Yu & Byun 2011 on real processes (kind ``cdc-live``): communication-driven coscheduling
(BATCH, LOCAL, DCS, PB, IB, SB, HYBRID, CC-S, CC-B) on one seeded job stream of the NAS
applications, at two loads and two MPLs (§5.3, §5.5; Figs. 7, 8, 10, 11). stream.py reads
the spec and makes the stream, run.py runs it, report.py writes the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim
from testbed.experiment.fields import SpecError, Table
from testbed.experiment.protocol import RunContext, Study, split_csv


def _result(data: Any) -> Any:
    from testbed.experiment.cdc.run import StreamResult

    return StreamResult.from_dict(data)


class CdcLiveStudy(Study):
    kind = "cdc-live"
    title = "Yu & Byun 2011 §5.3, §5.5: communication-driven coscheduling on a job stream, live"
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = (
        "experiment", "loads", "mapping", "quick", "cluster", "controller", "apps",
    )  # fmt: skip
    specs = (
        "experiments/cdc-policies.toml",
        "experiments/cdc-npb.toml",
        "experiments/cdc-timeslice-cfs.toml",
        "experiments/cdc-timeslice-shared.toml",
    )
    overrides = ("schemes", "loads", "mpls", "jobs")
    has_quick = True

    def load(self, doc: Table) -> Any:
        from testbed.experiment.cdc.stream import load_stream_spec

        return load_stream_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def override(self, spec: Any, values: Mapping[str, str]) -> Any:
        from testbed.experiment.cdc.stream import SCHEMES

        changes: dict[str, Any] = {}
        if "schemes" in values:
            changes["schemes"] = tuple(split_csv(values["schemes"]))
            for s in changes["schemes"]:
                if s not in SCHEMES:
                    raise SpecError(f"--schemes: unknown {s!r}", fix="valid: " + ", ".join(SCHEMES))
        if "loads" in values:
            changes["loads"] = tuple(split_csv(values["loads"]))
            for ld in changes["loads"]:
                if ld not in spec.load_means:
                    raise SpecError(
                        f"--loads: unknown {ld!r}",
                        fix="the spec defines " + ", ".join(spec.load_means),
                    )
        if "mpls" in values:
            try:
                changes["mpls"] = tuple(int(m) for m in split_csv(values["mpls"]))
            except ValueError:
                raise SpecError(
                    f"--mpls: whole numbers, e.g. 3,5; got {values['mpls']!r}"
                ) from None
            if not changes["mpls"] or any(not 1 <= m <= 64 for m in changes["mpls"]):
                raise SpecError(f"--mpls: MPLs in 1..64, e.g. 3,5; got {values['mpls']!r}")
        if "jobs" in values:
            try:
                changes["jobs"] = int(values["jobs"])
            except ValueError:
                changes["jobs"] = 0
            if changes["jobs"] < 1:
                raise SpecError(f"--jobs must be a whole number >= 1, got {values['jobs']!r}")
        return dataclasses.replace(spec, **changes)

    def plan(self, spec: Any) -> list[str]:
        runs = spec.runs()
        return [
            f"{len(runs)} runs of {spec.jobs} jobs ({spec.workload or 'every [apps] table'}, "
            f"{spec.program}) on {spec.nodes} nodes at {spec.cpus_per_node} CPU "
            f"({spec.cpu_mechanism}), link {spec.link}:",
            *(f"  {s} at {ld} load, MPL {m}" for s, ld, m in runs),
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.experiment.cdc.run import run_streams

        result = run_streams(
            spec, ctx.out, reuse_cluster=ctx.reuse_cluster, say=ctx.say,
            save=lambda r: ctx.save(asdict(r)),
        )  # fmt: skip
        return asdict(result)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.cdc.report import markdown

        return {"report.md": markdown(_result(data))}

    def plots(self, data: Any, out: Path) -> list[Path]:
        from testbed.experiment.cdc.report import plots

        return [out / name for name in plots(_result(data), out)]

    def summary(self, data: Any) -> str:
        from testbed.experiment.cdc.report import text_summary

        return str(text_summary(_result(data)))

    def claims(self, data: Any) -> list[Claim]:
        from testbed.experiment.cdc.report import claims

        return claims(_result(data))


STUDY = CdcLiveStudy()
