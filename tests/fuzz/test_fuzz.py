"""The fuzz targets with a CI budget (FUZZ_EXAMPLES, default 150 each); the
10,000-input run is benchmarks/fuzz.py."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.fuzz_targets import TARGETS, Target

BUDGET = int(os.environ.get("FUZZ_EXAMPLES", "150"))


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_fuzz(target: Target) -> None:
    seen: dict[str, int] = {}

    @settings(max_examples=BUDGET, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(target.strategy)
    def run(value: Any) -> None:
        outcome = target.run(value)
        assert outcome in ("accepted", "rejected"), outcome
        seen[outcome] = seen.get(outcome, 0) + 1

    run()
    assert seen.get("rejected", 0) > 0, f"{target.name}: nothing was rejected: {seen}"
