"""Paired gang (Wiseman & Feitelson 2003 §2.4-2.6): pairing, exclusivity, sharp changes, band,
alternates."""

from __future__ import annotations

import inspect

import pytest

from controller.policies.base import JobRequest, PolicyError
from controller.policies.paired import PairedGang


def job(job_id: int, size: int, *, exclusive: bool = False) -> JobRequest:
    return JobRequest(job_id, size, 100.0, exclusive=exclusive)


def two_full_rows(**kw: object) -> PairedGang:
    pg = PairedGang(2, **kw)  # type: ignore[arg-type]
    pg.submit(job(1, 2), 0.0)  # row 0
    pg.submit(job(2, 2), 0.0)  # row 1
    return pg


def test_new_jobs_run_alone_then_complementary_rows_pair() -> None:
    pg = two_full_rows()
    first = pg.next_quantum(0.0)
    assert (first.slot, first.partner) == (0, None)  # both predicted 100%
    assert first.node_jobs == ((1,), (1,))
    pg.observe({1: 0.9})
    second = pg.next_quantum(1.0)
    assert (second.slot, second.partner) == (1, None)  # job 2 still new
    pg.observe({2: 0.05})
    third = pg.next_quantum(2.0)
    assert (third.slot, third.partner) == (0, 1)
    assert third.node_jobs == ((1, 2), (1, 2))
    assert pg.last_round_matching == {0: 1, 1: 0}
    assert pg.stats.paired_quanta == 1 and pg.stats.quanta == 3


def test_two_cpu_bound_rows_do_not_pair() -> None:
    pg = two_full_rows()
    pg.observe({1: 0.6, 2: 0.5})
    for q in range(4):
        assert pg.next_quantum(float(q)).partner is None


def test_exclusive_job_is_never_paired() -> None:
    pg = PairedGang(2)
    pg.submit(job(1, 2, exclusive=True), 0.0)
    pg.submit(job(2, 2), 0.0)
    pg.observe({1: 0.05, 2: 0.05})
    for q in range(4):
        plan = pg.next_quantum(float(q))
        assert plan.partner is None
        assert all(len(jobs) == 1 for jobs in plan.node_jobs)
    assert 0 not in pg.last_round_matching


def _paired_pair(jump: float) -> list[int | None]:
    """Jobs 1 and 2 at 30% each, paired; then job 1 jumps by ``jump``."""
    pg = two_full_rows()
    pg.observe({1: 0.3, 2: 0.3})
    partners = []
    assert pg.next_quantum(0.0).partner == 1
    assert pg.next_quantum(1.0).partner == 0
    pg.observe({1: 0.3 + jump, 2: 0.3})
    plan = pg.next_quantum(2.0)  # job 1's row
    partners.append(plan.partner)
    pg.observe({job_id: 0.3 + jump if job_id == 1 else 0.3 for job_id in plan.running})
    plan = pg.next_quantum(3.0)  # job 2's row
    partners.append(plan.partner)
    pg.observe({job_id: 0.3 + jump if job_id == 1 else 0.3 for job_id in plan.running})
    partners.append(pg.next_quantum(4.0).partner)  # job 1's row, new round
    return partners


def test_sharp_change_of_21_points_makes_job_run_alone_one_quantum() -> None:
    partners = _paired_pair(0.21)
    # Quantum 2: job 1 flagged -> alone; that round's Fig. 4 matching saw it at
    # 100%, so row 1 stays unpaired in quantum 3 as well. Job 1 reported no new
    # jump, so the next round (quantum 4) pairs the rows again.
    assert partners == [None, None, 1]


def test_change_of_19_points_keeps_the_pair() -> None:
    partners = _paired_pair(0.19)
    assert partners == [1, 0, 1]


def test_fig4_runs_once_per_round_best_fit_never() -> None:
    pg = PairedGang(1)
    for j in (1, 2, 3):
        pg.submit(job(j, 1), 0.0)
    pg.observe({1: 0.2, 2: 0.5, 3: 0.7})
    for q in range(6):
        pg.next_quantum(float(q))
    assert pg.stats.matchings == 2  # rounds starting at quanta 0 and 3

    bf = PairedGang(1, matching="best-fit")
    for j in (1, 2, 3):
        bf.submit(job(j, 1), 0.0)
    bf.observe({1: 0.2, 2: 0.5, 3: 0.7})
    partners = [bf.next_quantum(float(q)).partner for q in range(3)]
    # row 0 (20%): best y with .2+y+.01 < 1 is 70% (row 2); row 1 (50%): 20%;
    # row 2 (70%): 20%.
    assert partners == [2, 0, 0]
    assert bf.stats.matchings == 0
    assert bf.last_round_matching == {}


def test_fig4_spreads_partners_where_best_fit_does_not() -> None:
    def run(matching: str) -> list[int | None]:
        pg = PairedGang(1, matching=matching)
        for j in (1, 2, 3, 4):
            pg.submit(job(j, 1), 0.0)
        pg.observe({1: 0.05, 2: 0.05, 3: 0.80, 4: 0.81})
        return [pg.next_quantum(float(q)).partner for q in range(2)]

    assert run("best-fit") == [3, 3]  # both low rows get the 81% row
    assert run("fig4") == [3, 2]


def test_matching_is_revalidated_within_a_round() -> None:
    pg = PairedGang(1)
    for j in (1, 2, 3):
        pg.submit(job(j, 1), 0.0)
    pg.observe({1: 0.1, 2: 0.5, 3: 0.8})
    assert pg.next_quantum(0.0).partner == 2  # round matching: 1<->3 (rows 0, 2)
    assert pg.last_round_matching[2] == 0
    for _ in range(4):  # job 1 climbs gradually (no sharp change) to 50%
        pg.observe({1: 0.5})
    pg.next_quantum(1.0)
    # Row 2's stored partner is row 0, but 0.5 + 0.8 + 0.01 >= 1 now.
    assert pg.next_quantum(2.0).partner is None


def test_band_moves_outlier_to_a_new_row() -> None:
    pg = PairedGang(4, band_rule="new-row")
    pg.submit(job(1, 2), 0.0)
    pg.submit(job(2, 2), 0.0)
    assert pg.placement(2) == (0, (2, 3))
    pg.next_quantum(0.0)
    pg.observe({1: 0.1, 2: 0.9})
    pg.next_quantum(1.0)
    assert pg.placement(1) == (0, (0, 1))
    assert pg.placement(2) == (1, (2, 3))
    assert pg.stats.homogeneity_moves == 1


def test_band_tolerates_spread_below_twenty_points() -> None:
    pg = PairedGang(4)
    pg.submit(job(1, 2), 0.0)
    pg.submit(job(2, 2), 0.0)
    pg.next_quantum(0.0)
    pg.observe({1: 0.1, 2: 0.29})
    pg.next_quantum(1.0)
    assert pg.placement(2) == (0, (2, 3))


@pytest.mark.parametrize("rule", ["existing", "new-row"])
def test_band_moves_outlier_into_an_existing_compatible_row(rule: str) -> None:
    pg = PairedGang(4, band_rule=rule)
    pg.submit(job(1, 2), 0.0)  # row 0, nodes 0-1
    pg.submit(job(2, 2), 0.0)  # row 0, nodes 2-3
    pg.submit(job(3, 2), 0.0)  # row 1, nodes 0-1
    pg.observe({1: 0.1, 2: 0.8, 3: 0.85})
    pg.next_quantum(0.0)
    assert pg.placement(2) == (1, (2, 3))
    assert pg.slot_count == 2


def test_band_outlier_stays_when_no_row_may_be_added() -> None:
    pg = PairedGang(4, max_slots=1, band_rule="new-row")
    pg.submit(job(1, 2), 0.0)
    pg.submit(job(2, 2), 0.0)
    pg.observe({1: 0.1, 2: 0.9})
    pg.next_quantum(0.0)
    assert pg.placement(2) == (0, (2, 3))


def test_sharp_flag_does_not_reshuffle_rows() -> None:
    pg = PairedGang(4, band_rule="new-row")
    pg.submit(job(1, 2), 0.0)
    pg.submit(job(2, 2), 0.0)
    pg.observe({1: 0.3, 2: 0.3})
    pg.observe({1: 0.3, 2: 0.52})  # 22-point jump: flagged, eq. (1) ~0.43
    assert pg.predictor.predict(2) == 1.0
    pg.next_quantum(0.0)
    assert pg.placement(2) == (0, (2, 3))


def _alternate_setup(b_util: float) -> PairedGang:
    pg = PairedGang(4)
    pg.submit(job(1, 3), 0.0)  # A: row 0, nodes 0-2
    pg.submit(job(2, 3), 0.0)  # B: row 1, nodes 0-2
    pg.submit(job(3, 1), 0.0)  # C: row 0, node 3
    # A .9, C .75 share a band; no two rows fit under 100%.
    pg.observe({1: 0.9, 2: b_util, 3: 0.75})
    assert pg.next_quantum(0.0).slot == 0
    return pg


def test_alternate_within_band_runs_on_idle_node() -> None:
    plan = _alternate_setup(0.7).next_quantum(1.0)
    assert (plan.slot, plan.partner) == (1, None)
    assert plan.node_jobs == ((2,), (2,), (2,), (3,))
    assert plan.alternates == frozenset({3})


def test_unpaired_quantum_takes_alternates_as_strict_gang_does() -> None:
    # Row 1 (B) has no partner, so C runs on the idle node whatever its band:
    # the band protects pairings only (docs/policies.md, "Alternates").
    plan = _alternate_setup(0.5).next_quantum(1.0)
    assert (plan.slot, plan.partner) == (1, None)
    assert plan.node_jobs == ((2,), (2,), (2,), (3,))
    assert plan.alternates == frozenset({3})


def _alternate_beside_partner(g_util: float) -> tuple[tuple[int, ...], ...]:
    pg = PairedGang(4, placement="best-fit", band_rule="new-row")
    pg.submit(job(1, 2), 0.0)  # A: row 0, nodes 0-1
    pg.submit(job(2, 3), 0.0)  # B: row 1, nodes 0-2
    pg.submit(job(3, 3), 0.0)  # D: row 2, nodes 0-2
    pg.submit(job(5, 1), 0.0)  # F: row 1, node 3 (leaves no free cell)
    pg.submit(job(6, 1), 0.0)  # G: row 2, node 3
    pg.submit(job(4, 1), 0.0)  # E: row 0, node 2
    assert [pg.placement(j) for j in (5, 6, 4)] == [(1, (3,)), (2, (3,)), (0, (2,))]
    pg.observe({1: 0.1, 4: 0.1, 2: 0.8, 5: 0.8, 3: 0.9, 6: g_util})
    plan = pg.next_quantum(0.0)
    assert pg.placement(3) == (3, (0, 1, 2))  # D left G's row (band)
    assert (plan.slot, plan.partner) == (0, 1)
    return plan.node_jobs


def test_alternate_joins_the_selected_row_beside_the_partner_when_it_fits() -> None:
    # Node 3 is idle in row 0; G (10 %, within row 0's band, 10 + 80 + 1 < 100)
    # joins row 0 there, beside F of the partner row: two processes.
    assert _alternate_beside_partner(0.1) == ((1, 2), (1, 2), (4, 2), (6, 5))


def test_alternate_that_would_not_fit_with_the_partner_is_not_used() -> None:
    # G at 25 % is within row 0's band but 25 + 80 + 1 >= 100 beside F.
    assert _alternate_beside_partner(0.25) == ((1, 2), (1, 2), (4, 2), (5,))


def test_observe_ignores_unknown_jobs_and_finish_forgets() -> None:
    pg = two_full_rows()
    pg.observe({99: 0.5, 1: 0.2})
    assert pg.predictor.history(99) == ()
    pg.finish(1, 1.0)
    assert pg.predictor.history(1) == ()
    assert pg.slot_count == 1


def test_bad_parameters() -> None:
    with pytest.raises(PolicyError):
        PairedGang(2, matching="worst-fit")
    with pytest.raises(PolicyError):
        PairedGang(2, margin=1.5)
    with pytest.raises(PolicyError):
        PairedGang(2, band=0.0)


def test_params_match_constructor() -> None:
    sig = inspect.signature(PairedGang.__init__)
    kwonly = {n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert {p.name: p.default for p in PairedGang.PARAMS} == kwonly


# ------------------------------------------------- band rule "stay" (default)
def _outlier_rows(b_util: float | None) -> PairedGang:
    """Row 0: A (nodes 0-1) at 10 %, B (nodes 2-3) at ``b_util`` (None: never measured).
    Row 1: C (0-1) and D (2-3) at 80 %."""
    pg = PairedGang(4)
    for j in (1, 2, 3, 4):
        pg.submit(job(j, 2), 0.0)
    assert [pg.placement(j) for j in (1, 2, 3, 4)] == [
        (0, (0, 1)),
        (0, (2, 3)),
        (1, (0, 1)),
        (1, (2, 3)),
    ]
    util = {1: 0.1, 3: 0.8, 4: 0.8}
    if b_util is not None:
        util[2] = b_util
    pg.observe(util)
    return pg


def test_outlier_stays_in_its_row_and_runs_alone() -> None:
    pg = _outlier_rows(0.9)
    plan = pg.next_quantum(0.0)
    assert pg.placement(2) == (0, (2, 3))  # never moved
    assert pg.slot_count == 2
    # Row 0 pairs through its core (A at 10 %) with row 1; D would share B's
    # nodes, so it sits this quantum out, and B runs alone.
    assert (plan.slot, plan.partner) == (0, 1)
    assert plan.node_jobs == ((1, 3), (1, 3), (2,), (2,))
    plan = pg.next_quantum(1.0)
    assert (plan.slot, plan.partner) == (1, 0)
    assert plan.node_jobs == ((3, 1), (3, 1), (4,), (4,))  # B never runs as a partner
    assert pg.stats.homogeneity_moves == 0


def test_new_job_runs_alone_while_the_rest_of_its_row_pairs() -> None:
    plan = _outlier_rows(None).next_quantum(0.0)
    assert (plan.slot, plan.partner) == (0, 1)
    assert plan.node_jobs == ((1, 3), (1, 3), (2,), (2,))


def test_a_row_with_no_measured_job_does_not_pair() -> None:
    pg = PairedGang(2)
    pg.submit(job(1, 2), 0.0)
    pg.submit(job(2, 2), 0.0)
    pg.observe({2: 0.05})
    plan = pg.next_quantum(0.0)
    assert (plan.slot, plan.partner) == (0, None)
    assert plan.node_jobs == ((1,), (1,))


def test_partner_that_can_run_nowhere_counts_as_unpaired() -> None:
    pg = PairedGang(2)
    pg.submit(job(1, 1), 0.0)  # row 0, node 0
    pg.submit(job(2, 1), 0.0)  # row 0, node 1
    pg.submit(job(3, 2), 0.0)  # row 1, both nodes
    pg.observe({1: 0.1, 2: 0.9, 3: 0.5})
    plan = pg.next_quantum(0.0)
    assert plan.slot == 0 and plan.partner is None  # job 3 would share job 2's node
    assert plan.node_jobs == ((1,), (2,))
    assert pg.stats.paired_quanta == 0


# ---------------------------------------------- the matching is refreshed
def test_matching_refreshed_when_row_zero_cannot_pair() -> None:
    pg = PairedGang(2)
    pg.submit(job(1, 2, exclusive=True), 0.0)  # row 0: never paired
    pg.submit(job(2, 2), 0.0)  # row 1
    pg.submit(job(3, 2), 0.0)  # row 2
    partners = []
    for q in range(6):
        plan = pg.next_quantum(float(q))
        partners.append((plan.slot, plan.partner))
        pg.observe({1: 0.9, 2: 0.1, 3: 0.5})
    # The second round starts on row 0 (exclusive): the matching is still
    # recomputed there, so rows 1 and 2 pair from quantum 4 on.
    assert partners == [(0, None), (1, None), (2, None), (0, None), (1, 2), (2, 1)]


# ------------------------------------------------ Fig. 4 as the prose says
def _mix1(matching: str) -> list[tuple[int, ...]]:
    pg = PairedGang(1, matching=matching)
    for j in (1, 2, 3, 4):  # one row each on a single node
        pg.submit(job(j, 1), 0.0)
    util = {1: 0.92, 2: 0.9, 3: 0.91, 4: 0.0}  # three compute jobs, one I/O job
    pg.observe(util)
    plans = [pg.next_quantum(float(q)) for q in range(8)]
    return [p.node_jobs[0] for p in plans[4:]]  # a whole round after the first


def test_fig4_to_the_letter_leaves_the_meeting_job_alone() -> None:
    cells = _mix1("fig4")
    assert sum(4 in c for c in cells) == 3
    assert (2,) in cells  # the 90 % job where the pointers meet runs alone


def test_fig4_prose_pairs_the_io_job_with_every_compute_job() -> None:
    cells = _mix1("fig4-prose")
    assert all(4 in c for c in cells)
    assert sorted(c[0] for c in cells) == [1, 2, 3, 4]


def test_sharp_change_can_be_switched_off_by_name() -> None:
    from controller.policies.registry import lookup, make_policy, parse_params

    entry = lookup("paired-gang")
    for text in ("none", "off", "None"):
        assert parse_params(entry, {"sharp_change": text}) == {"sharp_change": None}
    pol = make_policy("paired-gang", 4, parse_params(entry, {"sharp_change": "none"}))
    assert pol.predictor.sharp_change is None  # type: ignore[attr-defined]
    assert parse_params(entry, {"sharp_change": "0.3"}) == {"sharp_change": 0.3}
