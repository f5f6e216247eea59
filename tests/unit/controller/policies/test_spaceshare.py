"""Space sharing with an MPL cap (Yu & Byun 2011 §2.1, §5.2): FIFO, the cap, least-loaded nodes."""

from __future__ import annotations

import pytest

from controller.policies.base import JobRequest, PolicyError, SpaceSharePolicy
from controller.policies.registry import REGISTRY, lookup, make_policy, parse_params
from controller.policies.spaceshare import SCHEMES, SpaceShare


def job(job_id: int, size: int) -> JobRequest:
    return JobRequest(job_id, size, 60.0)


def started(policy: SpaceShare, now: float = 0.0) -> list[int]:
    return [j.job_id for j in policy.schedule(now)]


def test_jobs_start_in_arrival_order_on_distinct_nodes() -> None:
    p = SpaceShare(4, mpl=2)
    for j, size in ((1, 4), (2, 2), (3, 3)):
        p.submit(job(j, size), 0.0)
    assert started(p) == [1, 2]
    assert p.placement(1) == (0, 1, 2, 3)
    assert p.placement(2) == (0, 1)  # all equally loaded: the lower indices
    assert p.placement(3) is None and p.queue_length == 1  # only n2, n3 have a slot


def test_mpl_caps_the_jobs_per_node() -> None:
    p = SpaceShare(2, mpl=3)
    for j in range(1, 6):
        p.submit(job(j, 2), 0.0)
    assert started(p) == [1, 2, 3]
    assert all(len(js) == 3 for js in p.node_jobs())
    assert p.open_nodes == 0 and p.free_nodes == 0 and p.queue_length == 2
    p.finish(2, 1.0)
    assert started(p, 1.0) == [4]
    assert p.node_jobs() == ((1, 3, 4), (1, 3, 4))


def test_the_head_is_never_overtaken() -> None:
    p = SpaceShare(4, mpl=1)
    p.submit(job(1, 3), 0.0)
    p.submit(job(2, 4), 0.0)  # the head after 1: needs every node
    p.submit(job(3, 1), 0.0)  # would fit on the free node, but FIFO
    assert started(p) == [1]
    assert p.free_nodes == 1 and started(p) == []
    p.finish(1, 5.0)
    assert started(p, 5.0) == [2]
    p.finish(2, 9.0)
    assert started(p, 9.0) == [3]


def test_least_loaded_nodes_are_chosen_ties_to_the_lower_index() -> None:
    p = SpaceShare(4, mpl=5)
    p.submit(job(1, 2), 0.0)  # n0, n1
    p.submit(job(2, 1), 0.0)  # n2 (load 0, lowest index)
    p.submit(job(3, 2), 0.0)  # n3 (load 0), then n0 (load 1, lowest index)
    assert started(p) == [1, 2, 3]
    assert p.placement(2) == (2,)
    assert p.placement(3) == (0, 3)
    assert p.node_jobs() == ((1, 3), (1,), (2,), (3,))


def test_finish_of_a_queued_job_withdraws_it_and_unknown_is_refused() -> None:
    p = SpaceShare(2, mpl=1)
    p.submit(job(1, 2), 0.0)
    p.submit(job(2, 2), 0.0)
    assert started(p) == [1]
    p.finish(2, 0.0)
    assert p.queue_length == 0
    with pytest.raises(PolicyError, match="neither queued nor running"):
        p.finish(2, 0.0)
    with pytest.raises(PolicyError, match="already submitted"):
        p.submit(job(1, 1), 0.0)
    with pytest.raises(PolicyError, match="3 nodes but the machine has 2"):
        p.submit(job(9, 3), 0.0)


def test_pin_restores_a_job_where_it_runs_even_over_the_cap() -> None:
    p = SpaceShare(3, mpl=1)
    p.submit(job(1, 2), 0.0)
    p.submit(job(2, 2), 0.0)
    p.pin(1, (2, 0))  # rank order kept
    p.pin(2, (0, 1))  # n0 now holds two jobs although mpl is 1
    assert p.placement(1) == (2, 0) and p.placement(2) == (0, 1)
    assert p.node_jobs() == ((1, 2), (2,), (1,))
    p.submit(job(3, 1), 0.0)
    assert started(p) == []  # no node has a free slot
    with pytest.raises(PolicyError, match="not waiting"):
        p.pin(7, (0,))
    p.submit(job(4, 2), 0.0)
    with pytest.raises(PolicyError, match="2 ranks, not 1"):
        p.pin(4, (1,))
    with pytest.raises(PolicyError, match="distinct nodes"):
        p.pin(4, (1, 1))


def test_batch_is_the_same_with_mpl_one() -> None:
    batch = make_policy("batch", 4)
    assert isinstance(batch, SpaceSharePolicy) and batch.mpl == 1
    assert batch.scheme.name == "batch"
    for j in (1, 2, 3):
        batch.submit(job(j, 2), 0.0)
    assert [r.job_id for r in batch.schedule(0.0)] == [1, 2]
    assert batch.free_nodes == 0 and batch.queue_length == 1
    with pytest.raises(PolicyError, match="its MPL is 1"):
        make_policy("batch", 4, {"mpl": 5})


@pytest.mark.parametrize("name", SCHEMES)
def test_every_scheme_is_registered_in_the_cdc_family(name: str) -> None:
    entry = lookup(name)
    assert entry.family == "cdc"
    assert {p.name for p in entry.params} == {"mpl", "tick_ms", "spin_us", "boost"}
    policy = make_policy(name, 4, parse_params(entry, {"tick_ms": "5"}))
    assert isinstance(policy, SpaceSharePolicy)
    assert policy.scheme.name == name and policy.scheme.tick_ms == 5.0
    assert policy.mpl == (1 if name == "batch" else 5)


def test_cdc_names_are_exactly_the_nine_schemes() -> None:
    cdc = [e.name for e in REGISTRY.values() if e.family == "cdc"]
    assert cdc == ["batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b"]


def test_unknown_policy_is_one_line_listing_the_valid_ones() -> None:
    with pytest.raises(PolicyError) as err:
        lookup("cc-x")
    text = str(err.value)
    assert "\n" not in text and "cc-b" in text and "gang" in text and "batch" in text


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"mpl": 0}, "mpl must be a whole number >= 1"),
        ({"mpl": 65}, "mpl must be at most 64"),
        ({"tick_ms": 0.05}, r"tick_ms \(the decision interval\) must be in 0.1..1000 ms"),
        ({"spin_us": -1.0}, "spin_us must be >= 0"),
        ({"boost": "nice"}, "boost must be one of weight, freeze"),
    ],
)
def test_bad_settings_are_refused(params: dict[str, object], words: str) -> None:
    with pytest.raises(PolicyError, match=words):
        make_policy("cc-b", 4, params)


def test_bad_mpl_text_is_one_line() -> None:
    with pytest.raises(PolicyError) as err:
        parse_params(lookup("dcs"), {"mpl": "many"})
    assert str(err.value) == "policy 'dcs': mpl: expected an integer, got 'many'"
