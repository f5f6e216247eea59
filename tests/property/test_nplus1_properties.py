"""Hypothesis properties of N + 1 gangs (controller/policies/nplus1.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.matching import best_fit_match
from controller.policies.nplus1 import dominant, fits_all, nplus1_match

DEMAND = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def rows(width: int) -> st.SearchStrategy[dict[int, tuple[float, ...]]]:
    return st.dictionaries(
        st.integers(min_value=0, max_value=30),
        st.tuples(*[DEMAND] * width),
        min_size=1,
        max_size=8,
    )


@settings(max_examples=300, deadline=None)
@given(rows(2), st.data(), st.sampled_from([0.0, 0.01, 0.05]))
def test_n_equal_one_is_paired_gangs_best_fit(
    demands: dict[int, tuple[float, ...]], data: st.DataObject, margin: float
) -> None:
    key = data.draw(st.sampled_from(sorted(demands)))
    expected = best_fit_match({k: v[0] for k, v in demands.items()}, key, margin)
    got = nplus1_match(demands, key, 1, margin)
    assert got == (() if expected is None else (expected,))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=2, max_value=3), st.data(), st.sampled_from([0.0, 0.01]))
def test_n_plus_one_never_overloads_a_device_nor_doubles_a_dominant(
    n: int, data: st.DataObject, margin: float
) -> None:
    width = data.draw(st.integers(min_value=n + 1, max_value=4))
    demands = data.draw(rows(width))
    key = data.draw(st.sampled_from(sorted(demands)))
    partners = nplus1_match(demands, key, n, margin)
    group = [demands[key], *(demands[p] for p in partners)]
    assert len(partners) <= n and key not in partners and len(set(partners)) == len(partners)
    if partners:
        assert fits_all(group, margin)
    doms = [dominant(v) for v in group]
    assert len(set(doms)) == len(doms)
    # greedy to the end: no row left out could still join (when fewer than n joined)
    if len(partners) < n:
        for other, v in demands.items():
            if other == key or other in partners:
                continue
            assert dominant(v) in doms or not fits_all([*group, v], margin)
