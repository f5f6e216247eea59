"""Randomized properties of space sharing with an MPL cap (Yu & Byun 2011 §5.2).

Random arrivals and completions are driven through the policy in the order
the live controller and the simulator use (completions, then arrivals, then
``schedule``). After every decision: no node holds more than ``mpl`` jobs,
every started job has ``size`` distinct nodes, jobs start in arrival order
(the head is never overtaken), and a head that could start did start.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.policies.base import JobRequest
from controller.policies.spaceshare import SpaceShare

NODES = 5

# (size, hold): the job ends after ``hold`` later events
jobs_strategy = st.lists(
    st.tuples(st.integers(1, NODES), st.integers(0, 6)), min_size=1, max_size=40
)


@settings(max_examples=300, deadline=None)
@given(jobs=jobs_strategy, mpl=st.integers(1, 4), arrivals_per_step=st.integers(1, 3))
def test_cap_fifo_and_progress(
    jobs: list[tuple[int, int]], mpl: int, arrivals_per_step: int
) -> None:
    p = SpaceShare(NODES, mpl=mpl)
    pending = list(enumerate(jobs, start=1))
    running: dict[int, int] = {}  # job -> steps left
    order: list[int] = []
    step = 0
    while pending or running or p.queue_length:
        step += 1
        for jid in [j for j, left in running.items() if left <= 0]:
            p.finish(jid, float(step))
            del running[jid]
        for jid in running:
            running[jid] -= 1
        for jid, (size, _hold) in pending[:arrivals_per_step]:
            p.submit(JobRequest(jid, size, 1.0), float(step))
        del pending[:arrivals_per_step]
        for req in p.schedule(float(step)):
            where = p.placement(req.job_id)
            assert where is not None and len(set(where)) == len(where) == req.size
            order.append(req.job_id)
            running[req.job_id] = jobs[req.job_id - 1][1]
        loads = p.node_jobs()
        assert all(len(js) <= mpl for js in loads)
        assert sorted(order) == order  # FIFO: nobody overtakes the head
        # A head that fits would have started: so if one waits, it does not fit.
        if p.queue_length:
            head_size = jobs[len(order)][0]
            assert sum(1 for js in loads if len(js) < mpl) < head_size
        assert step < 10_000
    assert order == list(range(1, len(jobs) + 1))
