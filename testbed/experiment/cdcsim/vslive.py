"""The CDC simulator against the live testbed (kind ``cdc-sim-vs-live``): a committed live
``cdc-live`` result's streams simulated, cell by cell, with issue 24's bounds (mean
response within 20 %, BCR within 0.05, MD within 30 %, the schemes' order). The work is
testbed/sim/cdc/validate.py; this module puts it behind the study protocol.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.fields import Table
from testbed.experiment.protocol import RunContext, Study


def _in_repo(path: str) -> Path:
    """A spec's path, relative to the repository (where the committed results are)."""
    from testbed.experiment.results import REPO

    p = Path(path)
    return p if p.is_absolute() else REPO / p


@dataclass(frozen=True)
class VsLiveSpec:
    name: str
    live: Path  # a committed cdc-live results.json
    stream: Path  # the spec the live run was made from
    platform: str
    probe_field: str | None
    probe_values: tuple[float, ...]
    only: tuple[tuple[str, str, int], ...] | None = None  # --quick: one cell


class CdcSimVsLiveStudy(Study):
    kind = "cdc-sim-vs-live"
    title = "Yu & Byun 2011: the CDC simulator against the live job streams"
    spec_tables: ClassVar[tuple[str, ...]] = ("validate",)
    specs = (
        "experiments/cdc-sim-vs-live.toml",
        "experiments/cdc-timeslice-cfs-vs-sim.toml",
        "experiments/cdc-timeslice-shared-vs-sim.toml",
    )
    has_quick = True

    def load(self, doc: Table) -> Any:
        t = doc.table("validate", required=True)
        t.only({"name", "live", "stream", "platform", "probe_field", "probe_values"})
        field = t.text("probe_field", "") or None
        return VsLiveSpec(
            name=t.text("name", doc.path.stem),
            live=_in_repo(t.text("live")),
            stream=_in_repo(t.text("stream")),
            platform=t.text("platform", "testbed"),
            probe_field=field,
            probe_values=tuple(float(v) for v in t.items("probe_values", (int, float), []))
            if field
            else (),
        )

    def quick(self, spec: Any) -> Any:
        from dataclasses import replace

        return replace(spec, probe_field=None, probe_values=(), only=(("cc-b", "heavy", 5),))

    def plan(self, spec: Any) -> list[str]:
        return [
            f"simulate every run of {spec.live} from {spec.stream} on platform {spec.platform}"
            + (
                f"; probe {spec.probe_field} = {list(spec.probe_values)}"
                if spec.probe_field
                else ""
            )
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        from testbed.sim.cdc.validate import build

        probe = (spec.probe_field, list(spec.probe_values)) if spec.probe_field else None
        only = set(spec.only) if spec.only else None
        return build(spec.live, spec.stream, spec.platform, probe, only)

    def dump(self, data: Any) -> str:
        return json.dumps(data, indent=1)

    def render(self, data: Any) -> dict[str, str]:
        from testbed.sim.cdc.validate import markdown

        return {"report.md": markdown(data)}

    def summary(self, data: Any) -> str:
        t = data["totals"]
        return (
            f"within the bounds: response {t['response_ok']} of {t['cells']}, BCR {t['bcr_ok']}, "
            f"MD {t['md_ok']}; orders the same {t['orders_same']} of {t['orders']}"
        )


STUDY = CdcSimVsLiveStudy()
