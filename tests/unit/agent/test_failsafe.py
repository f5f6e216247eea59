"""Fail-safe state machine with an injected clock."""

from __future__ import annotations

import pytest

from agent.failsafe import FailSafe, Mode, Transition


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_activates_after_timeout_once() -> None:
    clk = Clock()
    fs = FailSafe(2.0, clk)
    assert fs.poll() is Transition.NONE
    clk.t += 1.9
    assert fs.poll() is Transition.NONE
    assert fs.time_left() == pytest.approx(0.1)
    clk.t += 0.2
    assert fs.poll() is Transition.ACTIVATE
    assert fs.active and fs.mode is Mode.FAILSAFE
    clk.t += 10
    assert fs.poll() is Transition.NONE  # only once
    assert fs.activations == 1


def test_heartbeats_keep_it_controlled() -> None:
    clk = Clock()
    fs = FailSafe(2.0, clk)
    for _ in range(10):
        clk.t += 1.5
        assert fs.heard() is Transition.NONE
        assert fs.poll() is Transition.NONE
    assert fs.activations == 0
    assert fs.age() == 0.0


def test_resume_and_reactivate() -> None:
    clk = Clock()
    fs = FailSafe(1.0, clk)
    clk.t += 1.5
    assert fs.poll() is Transition.ACTIVATE
    clk.t += 5
    assert fs.age() == pytest.approx(6.5)
    assert fs.heard() is Transition.RESUME
    assert not fs.active
    clk.t += 0.5
    assert fs.poll() is Transition.NONE
    clk.t += 0.6
    assert fs.poll() is Transition.ACTIVATE
    assert fs.activations == 2


def test_bad_timeout() -> None:
    with pytest.raises(ValueError):
        FailSafe(0, Clock())
