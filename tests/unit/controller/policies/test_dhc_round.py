"""DHC's round (Feitelson & Rudolph 1996 §3.3) computed fast is the plain recursion, to the bit.

``reference_round`` is the round as first written: the recursion of §3.3 making a
:class:`Slot` per gang slot and sorting them. ``DhcTree.round`` and ``raw_round`` cache
shares, divisions and untouched subtrees (the fluid simulation uses ``raw_round``); these
tests hold them to the reference on random trees after every placement and removal, so
no slot's start, length or place in the order can differ.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.dhc import (
    ALGORITHMS,
    BALANCING,
    MAPPINGS,
    DhcConfig,
    DhcTree,
    reference_round,
)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([4, 8, 16, 32]),
    st.sampled_from(BALANCING),
    st.sampled_from(("any", "pe0")),
    st.sampled_from(MAPPINGS),
    st.sampled_from(sorted(ALGORITHMS)),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 32)), min_size=1, max_size=60),
    st.integers(0, 1000),
)
def test_the_fast_round_is_the_plain_recursion_bit_for_bit(
    pes: int,
    bal: str,
    origin: str,
    mapping: str,
    alg: str,
    sd: bool,
    ops: list[tuple[int, int]],
    seed: int,
) -> None:
    between, within = ALGORITHMS[alg]
    cfg = DhcConfig(pes, bal, origin, mapping, between, within, sd)
    t = DhcTree(cfg, rng=random.Random(seed))
    nxt = 0
    for op, size in ops:
        if op or not t.gangs:  # two placements for each removal: trees fill up
            t.place(nxt, min(size, pes))
            nxt += 1
        else:
            t.remove(sorted(t.gangs)[size % len(t.gangs)])
        want = reference_round(t)
        assert t.round() == want
        raw = t.raw_round()
        flat = [(s, c, g, ln) for s, c, g, _, ln in raw]
        assert flat == [
            (x.start, x.controller[0] * pes + x.controller[1], x.gang_id, x.length) for x in want
        ]


def test_untouched_subtrees_are_recomputed_when_a_subtree_gains_or_loses_gangs() -> None:
    t = DhcTree(DhcConfig(pes=8, balancing="none", origin="pe0"))
    t.pin(1, (0, 1, 2, 3))  # controller (2, 0)
    t.pin(2, (0, 1, 2, 3, 4))  # the root: its untouched subtrees are where gangs are
    assert t.untouched(2) == []
    t.pin(3, (5,))
    assert t.untouched(2) == [(0, 5)]
    t.pin(4, (6,))
    assert t.untouched(2) == [(0, 5), (1, 3)]
    assert t.round() == reference_round(t)
    t.remove(3)
    assert t.untouched(2) == [(1, 3)]
    t.remove(4)
    assert t.untouched(2) == []
    assert t.round() == reference_round(t)
