"""Ousterhout matrix: placement rules, multiprogramming limit, compaction, alternates."""

from __future__ import annotations

import pytest

from controller.policies.base import PolicyError
from controller.policies.matrix import BEST_FIT, BUDDY, FIRST_FIT, OusterhoutMatrix, Placement


def test_first_fit_takes_lowest_row_and_lowest_nodes() -> None:
    m = OusterhoutMatrix(4)
    assert m.place(1, 2) == Placement(0, (0, 1))
    assert m.place(2, 3) == Placement(1, (0, 1, 2))
    # Row 0 has 2 free cells, row 1 has 1: first fit takes row 0.
    assert m.place(3, 1, FIRST_FIT) == Placement(0, (2,))
    assert m.render() == [[1, 1, 3, None], [2, 2, 2, None]]


def test_best_fit_takes_row_left_with_fewest_free_cells() -> None:
    m = OusterhoutMatrix(4)
    m.place(1, 2)
    m.place(2, 3)
    # Row 0 would keep 1 free cell, row 1 would keep 0: best fit takes row 1.
    assert m.place(3, 1, BEST_FIT) == Placement(1, (3,))
    assert m.render() == [[1, 1, None, None], [2, 2, 2, 3]]


def test_best_fit_tie_goes_to_lowest_row() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(1, 0, (0, 1, 2))
    m.place_at(2, 1, (1, 2, 3))
    assert m.place(3, 1, BEST_FIT) == Placement(0, (3,))


def test_new_row_only_when_no_row_fits() -> None:
    m = OusterhoutMatrix(4)
    m.place(1, 3)
    assert m.find(2) == Placement(1, (0, 1))
    assert m.find(1) == Placement(0, (3,))


def test_within_row_job_gets_lowest_free_nodes_after_a_hole() -> None:
    m = OusterhoutMatrix(5)
    m.place(1, 1)
    m.place(2, 2)
    m.place(3, 1)
    m.remove(2)
    assert m.free_nodes(0) == (1, 2, 4)
    assert m.place(4, 2) == Placement(0, (1, 2))


def test_max_slots_refuses_a_new_row() -> None:
    m = OusterhoutMatrix(4, max_slots=1)
    assert m.place(1, 3) is not None
    assert m.place(2, 2) is None
    assert m.place(3, 1) == Placement(0, (3,))
    assert m.slot_count == 1
    assert 2 not in m
    with pytest.raises(PolicyError):
        m.place_at(4, 1, (0,))


def test_queries() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(7, 0, (2, 3))
    m.place_at(5, 0, (0,))
    m.place_at(9, 1, (1, 2))
    assert m.jobs_in(0) == (5, 7)  # ordered by lowest node
    assert m.free_nodes(0) == (1,)
    assert m.busy_nodes(1) == (1, 2)
    assert m.slot_of(9) == 1
    assert m.nodes_of(7) == (2, 3)
    assert m.placement_of(42) is None
    assert m.cell(1, 2) == 9
    with pytest.raises(PolicyError):
        m.slot_of(42)
    with pytest.raises(PolicyError):
        m.place_at(8, 0, (1, 2))  # node 2 occupied
    with pytest.raises(PolicyError):
        m.place_at(7, 1, (0,))  # already placed
    with pytest.raises(PolicyError):
        m.place(8, 5)  # larger than the machine
    m.check()


def test_compaction_deletes_empty_rows_and_renumbers() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(1, 0, (0, 1, 2, 3))
    m.place_at(2, 1, (0, 1, 2, 3))
    m.place_at(3, 2, (0, 1))
    m.remove(1)
    result = m.compact()
    # Empty row 0 is deleted; job 3's nodes are busy in the only earlier row left,
    # so nothing moves and the rows are just renumbered.
    assert result.slot_map == {1: 0, 2: 1}
    assert result.moved == {}
    assert m.slot_of(2) == 0
    assert m.slot_of(3) == 1
    m.check()


def test_compaction_moves_trailing_row_up_when_nodes_free() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(1, 0, (0, 1))  # A
    m.place_at(2, 1, (0, 1))  # B
    m.place_at(3, 1, (2, 3))  # C
    m.place_at(4, 2, (2, 3))  # D
    m.remove(2)
    result = m.compact()
    # D moves into row 0 (nodes 2, 3 free there), eliminating row 2; C then cannot
    # move because D now holds nodes 2, 3 of row 0.
    assert m.render() == [[1, 1, 4, 4], [None, None, 3, 3]]
    assert result.moved == {4: (2, 0)}
    assert result.slot_map == {0: 0, 1: 1}
    assert m.nodes_of(4) == (2, 3)
    m.check()


def test_compaction_leaves_row_alone_if_not_all_its_jobs_fit() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(1, 0, (0,))
    m.place_at(2, 1, (0,))  # cannot move: node 0 busy in row 0
    m.place_at(3, 1, (3,))  # could move alone, but that would not remove row 1
    before = m.render()
    result = m.compact()
    assert m.render() == before
    assert not result.changed


def test_compaction_relocates_whole_row_across_several_rows() -> None:
    m = OusterhoutMatrix(3)
    m.place_at(1, 0, (0, 1))
    m.place_at(2, 1, (1, 2))
    m.place_at(3, 2, (2,))
    m.place_at(4, 2, (0,))
    # Row 2: job 3 (node 2) fits row 0; job 4 (node 0) fits row 1.
    result = m.compact()
    assert m.render() == [[1, 1, 3], [4, 2, 2]]
    assert result.moved == {3: (2, 0), 4: (2, 1)}
    m.check()


def test_move_keeps_nodes_and_may_open_a_row() -> None:
    m = OusterhoutMatrix(4, max_slots=2)
    m.place_at(1, 0, (0, 1))
    m.place_at(2, 0, (2, 3))
    assert m.move(2, 1) == Placement(1, (2, 3))
    with pytest.raises(PolicyError):
        m.move(1, 2)  # max_slots reached
    m.check()


def test_alternates_take_jobs_whose_nodes_are_all_idle() -> None:
    m = OusterhoutMatrix(4)
    m.place_at(1, 0, (0, 1))  # A
    m.place_at(2, 1, (2, 3))  # B
    m.place_at(3, 1, (0, 1))  # C
    m.place_at(4, 2, (2,))  # D
    m.place_at(5, 2, (3,))  # E
    assert m.alternates(0) == (2,)  # B fits; D and E clash with B afterwards
    assert m.alternates(1) == ()
    assert m.alternates(2) == (1,)  # A fits; C clashes with A
    assert m.alternates(0, accept=lambda j: j != 2) == (4, 5)
    assert m.alternates(0, skip_slots=(1,)) == (4, 5)
    assert m.alternates(0, busy_nodes=(3,)) == (4,)


def test_alternates_scan_rows_cyclically_after_the_selected_one() -> None:
    m = OusterhoutMatrix(2)
    m.place_at(10, 0, (1,))  # Z
    m.place_at(11, 1, (0,))  # X
    m.place_at(12, 2, (1,))  # Y
    # From row 1 the scan order is row 2, then row 0: Y wins node 1.
    assert m.alternates(1) == (12,)
    # Row 0 itself uses node 1, so only X (node 0) qualifies.
    assert m.alternates(0) == (11,)


def test_render_text() -> None:
    m = OusterhoutMatrix(3)
    m.place_at(12, 0, (0, 2))
    assert m.render_text() == ["12 .. 12"]


def test_bad_arguments() -> None:
    with pytest.raises(PolicyError):
        OusterhoutMatrix(0)
    with pytest.raises(PolicyError):
        OusterhoutMatrix(2, max_slots=0)
    m = OusterhoutMatrix(2)
    with pytest.raises(PolicyError):
        m.find(1, "worst-fit")
    with pytest.raises(PolicyError):
        m.remove(1)


# ------------------------------------------------------------------------ buddy
def test_buddy_gives_an_aligned_power_of_two_block_and_its_lowest_nodes() -> None:
    m = OusterhoutMatrix(8)
    # 3 nodes -> a 4-block at 0; the gang runs on 0-2 and holds cell 3
    assert m.place(1, 3, BUDDY) == Placement(0, (0, 1, 2), (0, 1, 2, 3))
    # 1 node: cells 4-7 all sit in the free 4-block [4, 8): the lowest, 4
    assert m.place(2, 1, BUDDY) == Placement(0, (4,))
    # 1 node: 5's buddy (4) is taken, so 5 splits nothing; 6 or 7 would split [6, 8)
    assert m.place(3, 1, BUDDY) == Placement(0, (5,))
    assert m.place(4, 2, BUDDY) == Placement(0, (6, 7))
    # row 0 has no free cell (3 is held): a new row
    assert m.free_nodes(0) == ()
    assert m.place(5, 1, BUDDY) == Placement(1, (0,))
    assert m.render()[0] == [1, 1, 1, None, 2, 3, 4, 4]
    m.check()


def test_buddy_splits_the_smallest_free_block_not_the_lowest() -> None:
    m = OusterhoutMatrix(8)
    m.place_at(1, 0, (4, 5))
    # free 2-blocks: [0,2) and [2,4) inside the free 4-block [0,4); [6,8) alone
    assert m.find(2, BUDDY) == Placement(0, (6, 7))
    m.place_at(2, 0, (6,))
    assert m.find(2, BUDDY) == Placement(0, (0, 1))


def test_buddy_internal_fragmentation_opens_a_row_first_fit_would_not() -> None:
    m = OusterhoutMatrix(8)
    assert m.place(1, 5, BUDDY) == Placement(0, (0, 1, 2, 3, 4), tuple(range(8)))
    assert m.row_mask(0) == 0b00011111 and m.claimed_mask(0) == 0xFF
    assert m.free_nodes(0) == ()
    assert m.find(3, FIRST_FIT) == Placement(1, (0, 1, 2))  # held cells are not free
    assert m.place(2, 3, BUDDY) == Placement(1, (0, 1, 2), (0, 1, 2, 3))
    assert m.held_mask(2) == 0b1111 and m.job_mask(2) == 0b0111
    with pytest.raises(PolicyError, match="held"):
        m.place_at(3, 0, (6,))  # idle but held by job 1's block
    m.check()


def test_buddy_on_a_machine_that_is_not_a_power_of_two() -> None:
    m = OusterhoutMatrix(12)
    # [8, 12) is a 4-block cut short by the missing nodes 12-15: it splits nothing
    assert m.find(3, BUDDY) == Placement(0, (8, 9, 10), (8, 9, 10, 11))
    # a 5-gang needs an 8-block; [8, 16) has only 4 real nodes
    assert m.place(1, 5, BUDDY) == Placement(0, (0, 1, 2, 3, 4), tuple(range(8)))
    # a 9-gang would need 16 nodes: it gets the whole row
    assert m.place(2, 9, BUDDY) == Placement(1, tuple(range(9)), tuple(range(12)))
    m.check()


def test_alternates_run_on_cells_a_block_holds_but_does_not_use() -> None:
    m = OusterhoutMatrix(8)
    m.place(1, 5, BUDDY)  # runs on 0-4, holds 5-7
    m.place_at(2, 1, (6, 7))
    m.place_at(3, 1, (0,))
    assert m.alternates(0) == (2,)
    assert m.alternates(1) == ()  # job 1's nodes 1-4 are idle in row 1, node 0 is not


def test_compaction_moves_a_buddy_job_with_its_whole_block() -> None:
    m = OusterhoutMatrix(8)
    m.place(1, 4, BUDDY)
    m.place(2, 4, BUDDY)
    assert m.place(3, 3, BUDDY) == Placement(1, (0, 1, 2), (0, 1, 2, 3))
    m.remove(1)
    c = m.compact()
    assert c.moved == {3: (1, 0)} and c.slot_map == {0: 0}
    assert m.placement_of(3) == Placement(0, (0, 1, 2), (0, 1, 2, 3))
    assert m.claimed_mask(0) == 0xFF
    m.check()


def test_compaction_keeps_a_job_whose_nodes_are_free_only_in_a_held_cell() -> None:
    m = OusterhoutMatrix(8)
    m.place(1, 3, BUDDY)  # row 0: runs on 0-2, holds 3
    m.place_at(2, 1, (3,))  # node 3 is idle in row 0, but held
    c = m.compact()
    assert not c.changed and m.slot_of(2) == 1
    # and a buddy job whose nodes are free above but whose block is not stays too
    m2 = OusterhoutMatrix(8)
    m2.place_at(1, 0, (3,))
    m2.place_at(2, 1, (0, 1, 2), (0, 1, 2, 3))
    assert not m2.compact().changed and m2.slot_of(2) == 1
    with pytest.raises(PolicyError, match="not free"):
        m2.move(2, 0)
    m2.check()


def test_place_at_checks_the_block() -> None:
    m = OusterhoutMatrix(8)
    with pytest.raises(PolicyError, match="without"):
        m.place_at(1, 0, (0, 1), (1, 2))
    with pytest.raises(PolicyError, match="out of range"):
        m.place_at(1, 0, (7,), (7, 8))
    # a block equal to the nodes is no block
    assert m.place_at(1, 0, (0, 1), (0, 1)) == Placement(0, (0, 1))
    with pytest.raises(PolicyError, match="occupied"):
        m.place_at(2, 0, (1, 2))
