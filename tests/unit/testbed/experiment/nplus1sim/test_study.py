"""The N + 1 study (testbed/experiment/nplus1sim): the stream it draws and the device-use
binning (its --quick variant: tests/live/testbed/experiment/nplus1sim/test_study_live.py)."""

from __future__ import annotations

import pytest

from testbed.experiment.nplus1sim.study import KINDS, _binned, stream


def test_the_stream_has_the_offered_load() -> None:
    spec = {"jobs": 200, "sizes": [2, 4, 8, 16], "runtime": 300.0, "nodes": 16, "load": 0.8}
    rows = stream(spec, 3)
    work = sum(size * rt for _, _, size, rt, _ in rows)
    assert work / (16 * rows[-1][1]) == pytest.approx(0.8)
    assert {k for *_, k in rows} == set(KINDS)
    assert stream(spec, 3) == rows and stream(spec, 4) != rows


def test_binning_is_time_weighted() -> None:
    # quanta ending at 1, 3 and 4 with use 1.0, 0.5, 0.0, over two bins of 2 s
    assert _binned([1.0, 3.0, 4.0], [1.0, 0.5, 0.0], 2, 4.0) == [0.75, 0.25]
