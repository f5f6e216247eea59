"""Properties of the CDC simulator on random small streams (testbed/sim/cdc/engine.py)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.sim.cdc.engine import CdcSim, SimJobSpec
from testbed.sim.cdc.platform import PAPER, TESTBED
from testbed.sim.cdc.program import synthetic

SCHEMES = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")

jobs_st = st.lists(
    st.tuples(
        st.integers(1, 4),  # size
        st.floats(0.0, 0.004),  # compute per iteration, s
        st.sampled_from(["none", "nn", "a2a", "allreduce"]),
        st.integers(0, 70_000),  # bytes
        st.integers(0, 3),  # rounds
        st.integers(1, 25),  # iterations
        st.floats(0.0, 0.05),  # gap
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=jobs_st,
    scheme=st.sampled_from(SCHEMES),
    mpl=st.integers(1, 5),
    speeds=st.lists(st.sampled_from([1.0, 1.8 / 2.8]), min_size=4, max_size=4),
    testbed=st.booleans(),
)
def test_every_job_ends_and_the_counters_make_sense(
    jobs: list[tuple[int, float, str, int, int, int, float]],
    scheme: str,
    mpl: int,
    speeds: list[float],
    testbed: bool,
) -> None:
    specs = []
    t = 0.0
    for i, (size, cpu, comm, nbytes, rounds, its, gap) in enumerate(jobs):
        t += gap
        specs.append(SimJobSpec(i, t, synthetic(size, cpu, comm, nbytes, rounds, its), f"j{i}"))
    platform = TESTBED if testbed else PAPER
    res = CdcSim(scheme, mpl, speeds, platform, seed=len(jobs)).run(specs)
    assert len(res.jobs) == len(specs)
    for j, s in zip(sorted(res.jobs, key=lambda j: j.job_id), specs, strict=True):
        assert not math.isnan(j.end) and j.start >= j.submit - 1e-12
        # no job runs faster than its compute on the fastest node
        assert j.execution >= s.program.ranks[0].cpu_s() / 1.0 - 1e-9
        # ... nor spends more CPU than its ranks' run times allow
        assert j.cpu_s <= j.execution * s.program.size + 1e-9
    assert 0 <= res.conflicts <= res.decisions
    assert res.evaluated <= res.decisions + 1
    if res.md_count:
        assert res.md_sum_s >= 0
    if scheme in ("batch", "local"):
        assert res.boosts == 0
    if scheme == "batch":
        assert res.conflicts == 0  # one job per node: never two pending
