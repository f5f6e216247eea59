"""Wiseman & Feitelson 2003 Fig. 4 and the naive best-fit matcher of §2.4, worked by hand."""

from __future__ import annotations

from controller.policies.matching import best_fit_match, fig4_match, fits


def test_fits_is_strict() -> None:
    assert fits(0.5, 0.48, 0.01)
    assert not fits(0.5, 0.5, 0.01)
    assert not fits(0.6, 0.39, 0.01)  # exactly 100%


def test_pairs_from_both_ends() -> None:
    # sorted a .1, b .2, c .7, d .8: a+d = .91 -> pair, b+c = .91 -> pair
    assert fig4_match({"a": 0.1, "b": 0.2, "c": 0.7, "d": 0.8}) == {
        "a": "d",
        "d": "a",
        "b": "c",
        "c": "b",
    }


def test_input_order_is_irrelevant_except_for_ties() -> None:
    utils = {"d": 0.8, "b": 0.2, "a": 0.1, "c": 0.7}
    assert fig4_match(utils) == {"a": "d", "d": "a", "b": "c", "c": "b"}


def test_unmatched_pend_searches_back_to_an_already_matched_job() -> None:
    # sorted A .05, B .4, C .62, D .9
    # A+D = .96 -> A-D.  pstart=B, pend=C: .4+.62+.01 >= 1 -> C unmatched, search
    # back from A: .05+.62+.01 < 1 -> C runs with A (A keeps D).  pend reaches B,
    # the loop ends and B, at the meeting point, is never visited.
    result = fig4_match({"A": 0.05, "B": 0.4, "C": 0.62, "D": 0.9})
    assert result == {"A": "D", "D": "A", "C": "A", "B": None}


def test_several_pends_search_back() -> None:
    # sorted A .05, B .1, C .5, D .6, E .85, F .9
    # A-F (.96), B-E (.96); pstart=C, pend=D: 1.11 -> D searches back from B:
    # .1+.6+.01 < 1 -> D runs with B.  C is left at the meeting point.
    result = fig4_match({"A": 0.05, "B": 0.1, "C": 0.5, "D": 0.6, "E": 0.85, "F": 0.9})
    assert result == {"A": "F", "F": "A", "B": "E", "E": "B", "D": "B", "C": None}


def test_no_partner_found_gives_none() -> None:
    # .6+.8, .6+.7 never fit and there is nothing before pstart to search back to.
    assert fig4_match({"a": 0.6, "b": 0.7, "c": 0.8}) == {"a": None, "b": None, "c": None}


def test_high_pend_dropped_before_any_match_has_no_partner() -> None:
    # sorted a .3, b .5, d .6, c .75: a+c = 1.06 -> c unmatched, nothing to search
    # back to (pstart = 0); a+d = .91 -> a-d; b at the meeting point.
    result = fig4_match({"a": 0.3, "b": 0.5, "c": 0.75, "d": 0.6})
    assert result == {"a": "d", "d": "a", "c": None, "b": None}


def test_odd_count_leaves_middle_unmatched() -> None:
    result = fig4_match({"A": 0.05, "B": 0.3, "C": 0.6, "D": 0.65, "E": 0.9})
    assert result == {"A": "E", "E": "A", "B": "D", "D": "B", "C": None}


def test_ties_keep_input_order() -> None:
    assert fig4_match({"x": 0.3, "y": 0.3, "z": 0.6}) == {"x": "z", "z": "x", "y": None}
    assert fig4_match({"y": 0.3, "x": 0.3, "z": 0.6}) == {"y": "z", "z": "y", "x": None}


def test_margin_is_applied() -> None:
    assert fig4_match({"a": 0.5, "b": 0.495}) == {"a": None, "b": None}
    assert fig4_match({"a": 0.5, "b": 0.495}, margin=0.0) == {"b": "a", "a": "b"}


def test_trivial_inputs() -> None:
    assert fig4_match({}) == {}
    assert fig4_match({1: 0.1}) == {1: None}


def test_best_fit_picks_largest_fitting_and_last_on_ties() -> None:
    utils = {"s": 0.5, "a": 0.3, "b": 0.45, "c": 0.45, "d": 0.6}
    assert best_fit_match(utils, "s") == "c"
    reordered = {"s": 0.5, "c": 0.45, "b": 0.45, "a": 0.3, "d": 0.6}
    assert best_fit_match(reordered, "s") == "b"


def test_best_fit_none_and_never_itself() -> None:
    assert best_fit_match({"s": 0.2, "t": 0.9}, "s") is None
    assert best_fit_match({"s": 0.1}, "s") is None


def test_best_fit_is_unfair_where_fig4_is_not() -> None:
    # §2.4's example: low jobs all pick the 81% job under best fit.
    utils = {"L1": 0.05, "L2": 0.05, "H80": 0.80, "H81": 0.81}
    assert best_fit_match(utils, "L1") == "H81"
    assert best_fit_match(utils, "L2") == "H81"
    result = fig4_match(utils)
    assert result["L1"] == "H81"
    assert result["L2"] == "H80"


def test_fig4_prose_matches_the_job_where_the_pointers_meet() -> None:
    utils = {"io": 0.0, "c1": 0.9, "c2": 0.91, "c3": 0.92}
    assert fig4_match(utils)["c1"] is None  # to the letter: never visited
    prose = fig4_match(utils, meet=True)
    assert prose == {"io": "c3", "c3": "io", "c2": "io", "c1": "io"}
    # an odd count whose middle fits nothing below it stays alone
    assert fig4_match({"a": 0.5, "b": 0.55, "c": 0.6}, meet=True) == dict.fromkeys("abc")
    # with nothing to meet, both readings agree
    even = {"a": 0.1, "b": 0.2, "c": 0.7, "d": 0.8}
    assert fig4_match(even, meet=True) == fig4_match(even)
