"""DHC on the live cluster (kind ``dhc-live``; Feitelson & Rudolph 1996 against strict and
paired gang, Wiseman & Feitelson 2003): one seeded Lublin stream live on the local
power-of-two cluster under each policy, and the same jobs through the simulator.

The runs are the sim-vs-live study's (simvslive/study.py: the stream, the job, the
dedicated times, the live and simulated halves), with ``dhc`` among the policies, so the
study is sim-vs-live's with its own spec check and report; report.py sets each policy's
live figures beside the simulator's prediction and says whether the simulator ranks the
policies as the live cluster did.
"""

from __future__ import annotations

from typing import Any

from testbed.experiment.fields import Table
from testbed.experiment.simvslive import SimVsLiveStudy

KIND = "dhc-live"
POLICIES = ("gang", "paired-gang", "dhc")


class DhcLiveStudy(SimVsLiveStudy):
    kind = KIND
    title = (
        "DHC (Feitelson & Rudolph 1996) against strict and paired gang on the live "
        "cluster, the simulator's prediction beside each figure"
    )
    specs = ("experiments/dhc-live.toml",)

    def load(self, doc: Table) -> Any:
        from testbed.experiment.dhclive.report import check_nodes
        from testbed.experiment.simvslive.study import load_spec

        spec = load_spec(doc, POLICIES)
        check_nodes(spec.nodes, spec.policies, str(doc.path))
        return spec

    def render(self, data: Any) -> dict[str, str]:
        from testbed.experiment.dhclive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return {"report.md": report.markdown(ValidationResult.from_dict(data))}

    def summary(self, data: Any) -> str:
        from testbed.experiment.dhclive import report
        from testbed.experiment.simvslive.study import ValidationResult

        return "\n".join(report.summary_lines(ValidationResult.from_dict(data)))


STUDY = DhcLiveStudy()
