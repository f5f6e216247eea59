"""Rule 2 of the job classes (controller/classes.py ``filter_plan``), for any plan."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from common.names import BENCHMARK, CLASSES, STANDBY
from controller.classes import filter_plan

NODES = 6


@st.composite
def plans(
    draw: st.DrawFn,
) -> tuple[tuple[tuple[int, ...], ...], dict[int, str], dict[int, tuple[int, ...]]]:
    """A placement of up to 5 gangs on 6 nodes, one row's per-node job lists, and classes."""
    jobs = draw(st.lists(st.sampled_from(sorted(CLASSES)), min_size=1, max_size=5))
    where = {
        j: tuple(sorted(draw(st.sets(st.integers(0, NODES - 1), min_size=1))))
        for j in range(len(jobs))
    }
    running = draw(st.sets(st.sampled_from(sorted(where))))
    node_jobs = tuple(tuple(j for j in sorted(running) if n in where[j]) for n in range(NODES))
    return node_jobs, dict(enumerate(jobs)), where


@given(plans())
def test_gangs_stay_whole_and_only_the_special_classes_are_removed(p: tuple) -> None:
    node_jobs, classes, where = p
    out, removed = filter_plan(node_jobs, classes, where)
    assert len(out) == len(node_jobs)
    for n, jobs in enumerate(out):
        assert set(jobs) == set(node_jobs[n]) - removed  # nothing added, nothing reordered away
    for j in removed:  # a gang runs on all its nodes or none
        assert all(j not in jobs for jobs in out)
    if STANDBY not in classes.values() and BENCHMARK not in classes.values():
        assert out == node_jobs and not removed
    for j in removed:
        # a removed job is a standby job on a busy node or shares a node with a benchmark
        bench_here = any(
            classes[k] == BENCHMARK and j != k and set(where[j]) & set(where[k])
            for jobs in node_jobs
            for k in jobs
        )
        assert classes[j] == STANDBY or bench_here
