"""controller/window.py: the fixed window of the last N observations."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.window import Window


@given(st.integers(1, 20), st.lists(st.floats(allow_nan=False, width=64), max_size=80))
def test_window_keeps_what_a_bounded_deque_keeps(size: int, values: list[float]) -> None:
    w, d = Window(size), deque(maxlen=size)
    for v in values:
        w.append(v)
        d.append(v)
        assert len(w) == len(d) and list(w) == list(d)
    w.clear()
    assert len(w) == 0 and list(w) == []


def test_window_memory_is_taken_at_start() -> None:
    w = Window(10_000)
    before = w._buf.buffer_info()
    for i in range(25_000):
        w.append(float(i))
    assert w._buf.buffer_info() == before  # same buffer, same length: never grows
    assert next(iter(w)) == 15_000.0 and len(w) == 10_000
    with pytest.raises(ValueError, match="size must be"):
        Window(0)


def test_unscraped_skews_stay_bounded() -> None:
    from controller.telemetry import SKEW_WINDOW, Switches
    from tests.support.controller_fakes import make, step

    s, _pool, clock = make("gang", 2)
    s.submit({"size": 2, "argv": ["true"]}, "root")
    step(s, clock, 30)
    fresh = s.telemetry.drain()
    assert len(fresh.skews) == 30 and s.telemetry.drain().skews == []
    # nobody scrapes: only the last window is kept for the exporter
    for k in range(SKEW_WINDOW + 5):
        s.telemetry.switched(Switches(skew=float(k)), timed=False)
    fresh = s.telemetry.drain()
    assert len(fresh.skews) == SKEW_WINDOW and fresh.skews[0] == 5.0


@given(st.integers(1, 9), st.lists(st.lists(st.floats(allow_nan=False), max_size=25), max_size=6))
def test_extend_is_append_of_each_value(size: int, batches: list[list[float]]) -> None:
    a, b = Window(size), Window(size)
    for batch in batches:
        a.extend(batch)
        for v in batch:
            b.append(v)
        assert list(a) == list(b) and len(a) == len(b)
