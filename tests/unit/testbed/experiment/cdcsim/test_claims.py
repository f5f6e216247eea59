"""The cdc-sim study's claims for the ledger (testbed/experiment/cdcsim/claims.py)."""

from __future__ import annotations

from typing import Any

from testbed.experiment.cdcsim.claims import claim_id, claims
from testbed.experiment.claims import Verdict

RESPONSE = "CC-B vs SB, avg. response time, heavy load"


def _data(*values: list[float], paper: float = -36.6, text: str = RESPONSE) -> dict[str, Any]:
    ours = [
        {"wl": "WL6", "load": "heavy", "jobs": 20, "mpl": 5, "pair": "cc-b vs sb",
         "seeds": len(v), "values_pct": v, "mean_pct": sum(v) / len(v), "ci95_pct": 1.0}
        for v in values
    ]  # fmt: skip
    return {"claims": [{"where": "§5.3, Fig. 7(a)", "text": text, "paper_pct": paper,
                        "ours": ours}]}  # fmt: skip


def test_a_reduction_beyond_the_spread_and_half_the_papers_is_reproduced() -> None:
    (c,) = claims(_data([-20.0, -22.0, -19.0]))
    assert c.verdict is Verdict.REPRODUCED, c
    assert c.id == "yb2011/sim/cc-b-vs-sb-avg-response-time-heavy-load"
    assert "CC-B vs SB -20.3" in c.measured and "20-job streams" in c.measured


def test_beyond_the_spread_but_short_of_half_is_direction_only() -> None:
    (c,) = claims(_data([-5.0, -6.0, -5.5]))
    assert c.verdict is Verdict.DIRECTION and "tolerance" in c.why, c


def test_within_the_spread_is_direction_only_and_the_opposite_is_not_reproduced() -> None:
    (c,) = claims(_data([-10.5, -5.4, -3.8, 5.1, 0.4]))
    assert c.verdict is Verdict.DIRECTION and "spread" in c.why
    (c,) = claims(_data([4.0, 5.0, 6.0]))
    assert c.verdict is Verdict.NOT_REPRODUCED


def test_several_configurations_take_the_worst_and_absent_runs_are_left_out() -> None:
    (c,) = claims(_data([-20.0, -22.0, -19.0], [3.0, 4.0, 5.0]))
    assert c.verdict is Verdict.NOT_REPRODUCED and c.measured.count("CC-B vs SB") == 2
    assert claims(_data()) == []


def test_the_metric_is_named_unless_it_is_the_response_time() -> None:
    (c,) = claims(_data([-20.0, -21.0], paper=-22.0, text="CC-B vs SB, BCR, heavy load"))
    assert c.measured.startswith("BCR: CC-B vs SB")
    assert claim_id("CC-B vs SB, MD, heavy load") == "yb2011/sim/cc-b-vs-sb-md-heavy-load"
