"""gangster's ``slice`` (Gorda & Brooks 1991 §3): first-fit decreasing packing and runs free in
every row."""

from __future__ import annotations

import pytest

from controller.slice import SliceResult, free_runs, pack, slice_matrix

_: None = None  # an empty cell, to keep the rows readable


def test_no_jobs_leaves_the_whole_machine_free() -> None:
    res = slice_matrix(8, {}, size=8)
    assert res == SliceResult(packed=[], free_runs=[(0, 7)], fits=True, size=8)


def test_largest_first_into_the_first_row_with_room() -> None:
    # sizes 5, 3, 4, 2 on 8 nodes: FFD takes 5, 4, 3, 2.
    rows = pack(8, {1: 5, 2: 3, 3: 4, 4: 2})
    assert rows == [
        [1, 1, 1, 1, 1, 2, 2, 2],  # 5 then 3 fills row 0
        [3, 3, 3, 3, 4, 4, _, _],  # 4 does not fit row 0; 2 follows it
    ]


def test_ties_are_broken_by_job_id() -> None:
    assert pack(4, {9: 2, 3: 2, 5: 2}) == [[3, 3, 5, 5], [9, 9, _, _]]


def test_free_runs_are_the_nodes_free_in_every_row() -> None:
    # Row 0 fills 6 nodes, row 1 fills 4: only nodes 6..7 are free in both.
    res = slice_matrix(8, {1: 6, 2: 4}, size=2)
    assert res.packed == [[1, 1, 1, 1, 1, 1, _, _], [2, 2, 2, 2, _, _, _, _]]
    assert res.free_runs == [(6, 7)]
    assert res.fits
    assert not slice_matrix(8, {1: 6, 2: 4}, size=3).fits


def test_a_full_row_leaves_no_hole() -> None:
    res = slice_matrix(4, {1: 2, 2: 2, 3: 1})
    assert res.packed == [[1, 1, 2, 2], [3, _, _, _]]
    assert res.free_runs == [] and not res.fits


def test_several_runs_are_reported_separately() -> None:
    rows: list[list[int | None]] = [[1, _, _, 2, _, 3], [_, _, 4, 4, _, _]]
    assert free_runs(6, rows) == [(1, 1), (4, 4)]
    assert free_runs(3, []) == [(0, 2)]


def test_size_none_asks_whether_any_node_is_free() -> None:
    assert slice_matrix(4, {1: 3}).fits
    assert not slice_matrix(4, {1: 4}).fits


def test_result_dict_has_the_api_shape() -> None:
    assert slice_matrix(4, {7: 3}, size=1).to_dict() == {
        "packed": [[7, 7, 7, None]],
        "free_runs": [[3, 3]],
        "size": 1,
        "fits": True,
    }


@pytest.mark.parametrize(
    ("nodes", "jobs", "size", "message"),
    [
        (0, {}, None, "at least one node"),
        (4, {1: 5}, None, "job 1 has size 5, outside 1..4"),
        (4, {1: 0}, None, "job 1 has size 0"),
        (4, {}, 0, "size must be at least 1"),
    ],
)
def test_impossible_inputs_are_refused(
    nodes: int, jobs: dict[int, int], size: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        slice_matrix(nodes, jobs, size)


def test_every_job_is_placed_once_and_contiguously() -> None:
    jobs = {i: 1 + (i * 7) % 13 for i in range(1, 40)}
    rows = pack(16, jobs)
    for job_id, size in jobs.items():
        where = [(r, n) for r, row in enumerate(rows) for n, j in enumerate(row) if j == job_id]
        assert len(where) == size
        assert len({r for r, _ in where}) == 1
        cols = [n for _, n in where]
        assert cols == list(range(cols[0], cols[0] + size))
