"""The cdc-sim study's "up to" claims of Yu & Byun 2011 (§5.3-5.5) as ledger claims.

The report (testbed/sim/cdc/studyreport.py) holds, per claim, our paired per-seed
changes (scheme against scheme, in %). Here each becomes a :class:`Claim` by the
ledger's one rule (testbed/experiment/claims.py): the paper's "up to X %" reduction is
reproduced when ours goes the same way beyond the seed-to-seed spread and reaches at
least half of X (the tolerance the live CDC study holds the same claims to,
testbed/experiment/cdc/report.py). Claims with no run present are left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from testbed.experiment.claims import Claim, Difference, judge, worst


def claim_id(text: str) -> str:
    """``yb2011/sim/<slug of the claim's text>``: stable while the report's text is."""
    return "yb2011/sim/" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _one(metric: str, paper_pct: float, o: Mapping[str, Any]) -> tuple[str, Any, str]:
    # a reduction the paper reports: per seed, how much lower the first scheme was
    diff = Difference(tuple(-v for v in o["values_pct"]))
    verdict, why = judge(diff, 1, o["mean_pct"] <= paper_pct / 2)
    per = ", ".join(f"{v:+.1f}" for v in o["values_pct"])
    pair = " vs ".join(s.upper() for s in o["pair"].split(" vs "))
    ci = f" ± {o['ci95_pct']:.1f}" if o.get("ci95_pct") is not None else ""
    measured = (
        f"{metric}{pair} {o['mean_pct']:+.1f}{ci} % (95 % CI over {o['seeds']} seeds; "
        f"per seed {per}); {o['wl']} {o['load']}, MPL {o['mpl']}, {o['jobs']}-job streams"
    )
    return measured, verdict, why


def claims(data: Mapping[str, Any]) -> list[Claim]:
    out: list[Claim] = []
    for c in data.get("claims", []):
        if not c["ours"]:
            continue
        # "CC-B vs SB, BCR, heavy load": name the metric where it is not the response time
        parts = c["text"].split(", ")
        metric = f"{parts[1]}: " if len(parts) > 2 and "response" not in parts[1] else ""
        got = [_one(metric, c["paper_pct"], o) for o in c["ours"]]
        out.append(
            Claim(
                id=claim_id(c["text"]),
                where=c["where"],
                says=f"{c['text']}: {c['paper_pct']:+.1f} % ('up to')",
                measured="; ".join(m for m, _, _ in got),
                verdict=worst([v for _, v, _ in got]),
                why="; ".join(dict.fromkeys(w for _, _, w in got if w)),
            )
        )
    return out
