"""cosched_agent_job_frozen_seconds: how long each job has been frozen without a break.

The JobFrozenTooLong alert (prometheus/rules/alerts.yml) rests on it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.jobs import Job
from tests.support.agent_metrics import make

NAME = "cosched_agent_job_frozen_seconds"


def test_job_keeps_the_instant_it_was_frozen() -> None:
    job = Job("a", "cg")
    assert job.frozen_since is None and job.frozen_for() == 0.0
    job.frozen = True
    since = job.frozen_since
    assert since is not None
    assert job.frozen_for(since + 5.0) == pytest.approx(5.0)
    job.frozen = True  # frozen again while frozen: the run goes on
    assert job.frozen_since == since
    job.frozen = False
    assert job.frozen_since is None and job.frozen_for() == 0.0
    started = Job("b", "cg", frozen=True)  # created frozen (start_frozen, reattach)
    assert started.frozen_since is not None


def test_exported_per_job_and_reset_by_a_thaw(tmp_path: Path) -> None:
    agent = make(tmp_path)
    reg = agent.metrics.registry
    agent.apply({"a": 100})  # b frozen, a runs
    time.sleep(0.05)
    b = reg.get_sample_value(NAME, {"node": "m0", "job_id": "b"})
    assert reg.get_sample_value(NAME, {"node": "m0", "job_id": "a"}) == 0.0
    assert b is not None and b >= 0.05
    time.sleep(0.02)
    later = reg.get_sample_value(NAME, {"node": "m0", "job_id": "b"})
    assert later is not None and later > b  # grows while it stays frozen
    agent.apply({"b": 100})  # now a is frozen and b runs
    assert reg.get_sample_value(NAME, {"node": "m0", "job_id": "b"}) == 0.0
    a = reg.get_sample_value(NAME, {"node": "m0", "job_id": "a"})
    assert a is not None and 0.0 <= a < b
    agent.jobs["a"].ended = True  # ended jobs are not reported
    assert reg.get_sample_value(NAME, {"node": "m0", "job_id": "a"}) is None
