"""Property: read_swf(write_swf(jobs)) gives back the jobs (fields SWF models)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.sim.job import SimJob
from testbed.sim.workloads.swf import SwfHeader, read_swf, write_swf

times = st.one_of(
    st.integers(min_value=0, max_value=10**9).map(float),
    st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
)


@st.composite
def swf_jobs(draw: st.DrawFn) -> SimJob:
    runtime = draw(times)
    # SWF invariants (module doc): estimate >= runtime, and > 0 unless == runtime.
    extra = draw(st.one_of(st.just(0.0), times))
    estimate = runtime + extra
    return SimJob(
        job_id=draw(st.integers(min_value=-1, max_value=10**9)),
        submit=draw(times),
        size=draw(st.integers(min_value=1, max_value=1 << 20)),
        runtime=runtime,
        estimate=estimate,
        user=draw(st.integers(min_value=-1, max_value=10**6)),
    )


comment = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30
).map(lambda s: ";" + s.rstrip())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(swf_jobs(), max_size=20),
    st.lists(comment, max_size=5),
    st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_round_trip(jobs: list[SimJob], comments: list[str], max_procs: int | None) -> None:
    header = SwfHeader.from_comments(
        [*comments, *([f"; MaxProcs: {max_procs}"] if max_procs else [])]
    )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "rt.swf"
        write_swf(p, jobs, header)
        back = read_swf(p)
    assert back.jobs == jobs
    assert back.header == header
    if max_procs:
        assert back.header.max_procs == max_procs
    assert back.skipped == 0
