"""Eq. (1) of Wiseman & Feitelson 2003 and the sharp-change rule of §4.2.3."""

from __future__ import annotations

import pytest

from controller.policies.base import PolicyError
from controller.policies.predictor import WEIGHTS, UtilizationPredictor


def test_weights_are_five_minus_i_over_ten() -> None:
    assert tuple(round(w, 12) for w in WEIGHTS) == (0.4, 0.3, 0.2, 0.1)


def test_new_job_is_predicted_fully_cpu_bound() -> None:
    p = UtilizationPredictor()
    assert p.predict(1) == 1.0
    assert p.is_new(1)


def test_four_quanta_weighted_most_recent_first() -> None:
    p = UtilizationPredictor()
    for u in (0.1, 0.2, 0.3, 0.4):  # oldest first, 10-point steps: no sharp change
        p.observe(1, u)
    assert p.history(1) == (0.4, 0.3, 0.2, 0.1)
    assert p.predict(1) == pytest.approx(0.4 * 0.4 + 0.3 * 0.3 + 0.2 * 0.2 + 0.1 * 0.1)
    p.observe(1, 0.5)  # the oldest (0.1) is forgotten
    assert p.predict(1) == pytest.approx(0.4 * 0.5 + 0.3 * 0.4 + 0.2 * 0.3 + 0.1 * 0.2)


def test_short_history_renormalises_available_weights() -> None:
    p = UtilizationPredictor()
    p.observe(1, 0.3)
    assert p.predict(1) == pytest.approx(0.3)
    p.observe(1, 0.4)
    assert p.predict(1) == pytest.approx((0.4 * 0.4 + 0.3 * 0.3) / 0.7)
    p.observe(1, 0.45)
    assert p.predict(1) == pytest.approx((0.4 * 0.45 + 0.3 * 0.4 + 0.2 * 0.3) / 0.9)


def test_change_of_19_points_has_no_effect() -> None:
    p = UtilizationPredictor()
    p.observe(1, 0.5)
    p.observe(1, 0.69)
    assert not p.is_flagged(1)
    assert p.predict(1) == pytest.approx((0.4 * 0.69 + 0.3 * 0.5) / 0.7)


def test_change_of_21_points_runs_job_alone_for_one_quantum() -> None:
    p = UtilizationPredictor()
    p.observe(1, 0.5)
    p.observe(1, 0.71)
    assert p.is_flagged(1)
    assert p.predict(1) == 1.0
    # The raw eq. (1) value is still available for band tests.
    assert p.estimate(1) == pytest.approx((0.4 * 0.71 + 0.3 * 0.5) / 0.7)
    p.observe(1, 0.72)  # the quantum alone ran, no new jump
    assert not p.is_flagged(1)
    assert p.predict(1) == pytest.approx((0.4 * 0.72 + 0.3 * 0.71 + 0.2 * 0.5) / 0.9)


def test_sharp_drop_is_also_a_sharp_change() -> None:
    p = UtilizationPredictor()
    p.observe(1, 0.8)
    p.observe(1, 0.5)
    assert p.predict(1) == 1.0


def test_exactly_twenty_points_is_not_more_than_twenty() -> None:
    p = UtilizationPredictor()
    p.observe(1, 0.5)
    p.observe(1, 0.7)  # 0.19999999999999996 in floats; 20 points either way
    assert not p.is_flagged(1)


def test_sharp_change_rule_can_be_disabled() -> None:
    p = UtilizationPredictor(sharp_change=None)
    p.observe(1, 0.0)
    p.observe(1, 1.0)
    assert p.predict(1) == pytest.approx(0.4 / 0.7)


def test_inner_sum_averages_processes() -> None:
    p = UtilizationPredictor()
    p.observe_processes(1, [0.2, 0.4, 0.6])
    assert p.predict(1) == pytest.approx(0.4)
    with pytest.raises(PolicyError):
        p.observe_processes(1, [])


def test_measurements_are_clamped_and_nan_rejected() -> None:
    p = UtilizationPredictor()
    p.observe(1, 1.2)
    assert p.history(1) == (1.0,)
    p.observe(2, -0.1)
    assert p.history(2) == (0.0,)
    with pytest.raises(PolicyError):
        p.observe(3, float("nan"))


def test_jobs_are_independent_and_forgotten() -> None:
    p = UtilizationPredictor()
    p.observe_many({1: 0.2, 2: 0.9})
    assert p.predict(1) == pytest.approx(0.2)
    assert p.predict(2) == pytest.approx(0.9)
    p.forget(1)
    assert p.predict(1) == 1.0
    assert p.history(1) == ()


def test_changed_lists_jobs_whose_estimate_or_flag_moved() -> None:
    # paired gang drops its per-row caches for these jobs only (issue 11: most
    # measurements repeat the last ones and leave the estimate as it was)
    p = UtilizationPredictor(sharp_change=0.2)
    p.observe_known({1: 0.5, 2: 0.5}, {1, 2})
    assert p.drain_changed() == {1, 2}  # first measurements
    for _ in range(4):
        p.observe_known({1: 0.5, 2: 0.5}, {1, 2})
    p.drain_changed()
    p.observe_known({1: 0.5, 2: 0.5}, {1, 2})  # same history, same estimates
    assert p.drain_changed() == set()
    p.observe(1, 0.5)
    assert p.drain_changed() == set()
    p.observe_known({1: 0.55, 2: 0.5}, {1, 2})
    assert p.drain_changed() == {1}
    # a sharp change raises the flag; the next measurement lowers it: both count
    for value in (0.9, 0.9):
        p.observe_known({2: value}, {2})
        assert p.drain_changed() == {2}
    # the same values through the plain path and the bulk path give the same state
    q = UtilizationPredictor(sharp_change=0.2)
    for u in (0.5, 0.5, 0.5, 0.5, 0.5, 0.9, 0.9, -0.5, 1.5, 1.0, 0.0):
        p.observe_known({3: u}, {3})
        q.observe(3, u)
        assert (p.estimate(3), p.is_flagged(3), p.history(3)) == (
            q.estimate(3),
            q.is_flagged(3),
            q.history(3),
        )
        assert (3 in p.drain_changed()) == (3 in q.drain_changed())


def test_bulk_path_rejects_nan_and_skips_unknown_jobs() -> None:
    p = UtilizationPredictor()
    p.observe_known({1: 0.3, 9: 0.7}, {1})
    assert p.history(9) == ()
    with pytest.raises(PolicyError, match="NaN"):
        p.observe_known({1: float("nan")}, {1})
