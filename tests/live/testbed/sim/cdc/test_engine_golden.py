"""The CDC engine's figures, bit for bit, against those recorded before its speed-ups.

tests/support/cdc_exact_golden.py describes the cells (every scheme, exact and
fluid stepping, MPL 5 and 3, two seeds) and holds the recorder.
"""

from __future__ import annotations

import json

import pytest

from tests.support.cdc_exact_golden import GOLDEN, cells, figures

_GOLDEN = json.loads(GOLDEN.read_text())


def test_the_golden_file_covers_every_cell() -> None:
    assert sorted(_GOLDEN["runs"]) == sorted(name for name, _p, _s in cells())


@pytest.mark.parametrize(("name", "params", "seed"), cells(), ids=[c[0] for c in cells()])
def test_engine_figures_identical_to_the_recorded_ones(
    name: str, params: dict[str, object], seed: int
) -> None:
    want = _GOLDEN["runs"][name]
    got = figures(dict(params), seed)
    diff = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
    assert not diff, (
        f"{name}: {diff[:5]} changed, e.g. {diff[0]}: "
        f"{str(want.get(diff[0]))[:200]} -> {str(got.get(diff[0]))[:200]}"
    )
