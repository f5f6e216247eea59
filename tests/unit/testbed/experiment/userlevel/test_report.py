"""The paired-userlevel report's reading of runs (testbed/experiment/userlevel/report.py) on
hand-made data: the matching rate of the steady quanta, the crossing along the spin time,
the prediction from the alone run's waits, and the verdict against the repeats' spread."""

from __future__ import annotations

from typing import Any

from testbed.experiment.userlevel import report

STEP = [0.0] * 40 + [2000.0] * 61  # W: 0 for 40 % of the receives, 2 ms for the rest


def _run(rep: int, policy: str, action: str, partner: str | None, paired: int,
         u: float, partner_u: float = 0.03) -> dict[str, Any]:  # fmt: skip
    ranks = [{"rank": k, "seconds": 8.0, "cpu_ratio": 0.1, "md_count": 4000,
              "messages_received": 4000, "md_quantiles_us": STEP, "runq_seconds": 0.08}
             for k in range(2)]  # fmt: skip
    jobs: dict[str, Any] = {"comm": {"barriers_per_second": 200.0, "quanta_utilization": [u],
                                     "ranks": ranks}}  # fmt: skip
    if partner:
        jobs[partner] = {"barriers_per_second": 20.0, "quanta_utilization": [partner_u]}
    return {"repeat": rep, "policy": policy, "action": action, "partner": partner,
            "matching_rate": 0.5, "traced_quanta": 40, "traced_paired": paired,
            "jobs": jobs}  # fmt: skip


def _data(spin_paired: tuple[int, int]) -> dict[str, Any]:
    acts = ["block", "spinblock:200", "spinblock:2000", "spin"]
    runs = []
    for rep, sp in zip((1, 2), spin_paired, strict=True):
        runs.append(_run(rep, "gang", "block", None, 0, 0.1))
        runs.append(_run(rep, "gang", "block", "io", 0, 0.1))
        for a, paired in zip(acts, (38, 36, 4, sp), strict=True):
            runs.append(_run(rep, "paired-gang", a, "io", paired, 0.5))
    return {"spec": {"partners": {"io": acts}, "margin": 0.01}, "runs": runs}


def test_matching_is_the_share_of_steady_quanta_that_ran_a_pair() -> None:
    r = _run(1, "paired-gang", "block", "io", 30, 0.1)
    assert report.matched(r) == 0.75
    assert report.matched(_run(1, "gang", "block", "io", 30, 0.1)) is None
    assert report.matched({**r, "traced_quanta": 0}) == 0.5  # the controller's, untraced


def test_the_crossing_measured_and_predicted() -> None:
    data = _data((0, 1))
    assert report.crossing_measured(data, "io", 1) == (200.0, 2000.0)
    # C 0.1, λ 500/s; limit 1 − 0.03 − 0.01 = 0.96 is above spinning's 0.1 + 500 × 1210 µs
    assert report.crossing_predicted(data, "io", 1) == float("inf")
    assert report.prediction(data, 1, "block") == 0.1
    assert report.runq_share(data["runs"][0]) == 0.01


def test_the_verdict_needs_a_difference_beyond_the_repeats_spread() -> None:
    rows = {what: verdict for what, _d, verdict, _w in report.verdicts(_data((0, 1)))}
    assert rows["beside the io job: matching rate, block − spin (points)"] == "reproduced"
    one = _data((0, 1))
    one["runs"] = [r for r in one["runs"] if r["repeat"] == 1]
    rows = {what: verdict for what, _d, verdict, _w in report.verdicts(one)}
    assert rows["beside the io job: matching rate, block − spin (points)"] == "direction only"
