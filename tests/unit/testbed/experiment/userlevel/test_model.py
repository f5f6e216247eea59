"""The spin-block utilization model (testbed/experiment/userlevel/model.py) on hand-made
wait distributions: E[min(W, s)], u(s) and where pairing stops."""

from __future__ import annotations

import math

import pytest

from testbed.experiment.userlevel.model import (
    RankWaits,
    WaitAction,
    measured_crossing,
    parse_action,
    predicted_crossing_us,
    predicted_utilization,
    threshold,
    truncated_mean_us,
)

# W = 0 for 40 % of the receives (the message was there), 2,000 µs for the rest
STEP = [0.0] * 40 + [2000.0] * 61


def test_parse_action_and_its_flags() -> None:
    assert parse_action("block") == WaitAction("block")
    assert parse_action("spin").spin_time_us == math.inf
    sb = parse_action("spinblock:200")
    assert sb.spin_time_us == 200 and sb.label == "spinblock:200"
    assert sb.argv() == ["--wait", "spinblock", "--spin-us", "200"]
    assert WaitAction("block").argv() == ["--wait", "block"]
    for bad in ("nap", "spinblock", "spinblock:", "spinblock:-1", "spinblock:fast", "spin:5"):
        with pytest.raises(ValueError, match="block, spin or spinblock"):
            parse_action(bad)


def test_truncated_mean_is_the_mean_capped_at_s() -> None:
    assert truncated_mean_us(STEP, 0.0) == 0.0
    # past the largest wait: the mean itself (the step's edge costs half an interval)
    assert truncated_mean_us(STEP, math.inf) == pytest.approx(2000 * 60.5 / 100)
    assert truncated_mean_us(STEP, 1000) == pytest.approx(1000 * 60.5 / 100)
    uniform = [float(k) for k in range(101)]  # W uniform on 0..100 µs: E[min(W, 50)] = 37.5
    assert truncated_mean_us(uniform, 50) == pytest.approx(37.5)
    assert truncated_mean_us([], 10) == 0.0


def test_utilization_grows_from_block_to_spin_and_stays_below_one() -> None:
    r = RankWaits(cpu_ratio=0.1, receives_per_s=400.0, quantiles_us=tuple(STEP))
    us = [predicted_utilization([r], s) for s in (0, 50, 200, 1000, 2000, math.inf)]
    assert us[0] == pytest.approx(0.1) and us == sorted(us)
    assert us[-1] == pytest.approx(min(1.0, 0.1 + 400 * 1210e-6))
    assert predicted_utilization([r, RankWaits(0.3, 0.0, ())], 0) == pytest.approx(0.2)
    assert RankWaits(0.9, 1000.0, tuple(STEP)).utilization(math.inf) == 1.0


def test_the_predicted_crossing_solves_u_of_s_equal_to_the_limit() -> None:
    r = RankWaits(cpu_ratio=0.1, receives_per_s=400.0, quantiles_us=tuple(STEP))
    limit = threshold(0.5, 0.01)  # a partner at 50 %: 0.49 (spinning reads 0.584)
    s = predicted_crossing_us([r], limit)
    assert s is not None and 0 < s < 2000
    assert predicted_utilization([r], s) == pytest.approx(limit, abs=1e-6)
    assert predicted_crossing_us([r], 0.05) is None  # even blocking reads above it
    assert predicted_crossing_us([r], 0.99) == math.inf  # even spinning pairs
    assert predicted_crossing_us([], 0.5) is None


def test_measured_crossing_brackets_where_the_matching_rate_falls() -> None:
    pts = [(0.0, 0.5), (50.0, 0.48), (200.0, 0.45), (1000.0, 0.3), (2000.0, 0.02),
           (math.inf, 0.0)]  # fmt: skip
    assert measured_crossing(pts, 0.5) == (1000.0, 2000.0)
    assert measured_crossing(pts, 0.5, share=0.95) == (50.0, 200.0)
    assert measured_crossing([(0.0, 0.5), (math.inf, 0.5)], 0.5) is None  # always pairs
    assert measured_crossing([(0.0, 0.0), (math.inf, 0.0)], 0.0) is None
    assert measured_crossing(pts, 0.5)[1] == 2000.0  # type: ignore[index]
