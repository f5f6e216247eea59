"""The resident-cost study's pure parts (testbed/experiment/pairedscale/resident.py): which
costs run, responses of jobs left unfinished at the stop, and the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import registry
from testbed.experiment.fields import SpecError
from testbed.experiment.pairedscale import resident


def test_resident_costs_run_are_zero_measured_multiples_and_absolute() -> None:
    got = resident.costs_to_run(0.002, [3, 10], [0.01, 0.02])
    assert [c for c, _ in got] == pytest.approx([0.0, 0.002, 0.006, 0.01, 0.02])
    labels = dict(got)
    assert labels[0.002] == "measured" and labels[0.01] == "what-if"
    assert labels[0.02] == "10 × measured (what-if)"  # asked twice, run once
    # a measured cost of 0: its multiples are 0 too, run once
    assert [c for c, _ in resident.costs_to_run(0.0, [3], [])] == [0.0]


def test_unfinished_jobs_respond_at_the_stop() -> None:
    mean, left = resident.mean_response_until([0.0, 10.0], [5.0, float("nan")], 30.0)
    assert mean == pytest.approx((5.0 + 20.0) / 2) and left == 1


def test_the_resident_spec_and_its_quick_variant(tmp_path: Path) -> None:
    p = tmp_path / "res.toml"
    p.write_text('kind = "paired-resident"\n[study]\nseeds = [1, 2]\ncosts = [1.5]\n')
    with pytest.raises(SpecError, match="costs"):
        registry.load(p)
    p.write_text('kind = "paired-resident"\n[study]\nseeds = [1, 2]\ncosts = [0.05]\n')
    st, spec = registry.load(p)
    assert spec["loads"] == [0.5, 0.95] and spec["horizon_h"] == 12.0
    q = st.quick(spec)
    assert q["seeds"] == [1] and q["loads"] == [0.95] and q["costs"] == [0.05]
