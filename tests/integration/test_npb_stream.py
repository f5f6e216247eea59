"""A Yu & Byun 2011 workload (Table 3's WL5: CG) as a live job stream of the real kernels
(experiments/cdc-npb.toml, programs = "npb"): every job finishes and verifies."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from testbed.experiment.cdc.stream import StreamSpec
from testbed.experiment.registry import load

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the local cluster")


@pytest.mark.root
@pytest.mark.timeout(600)
def test_wl5_of_real_cg_jobs_verifies_under_cc_b(tmp_path: Path, free_host: None) -> None:
    text = (
        (REPO / "experiments/cdc-npb.toml")
        .read_text()
        .replace('workload = "WL6"', 'workload = "WL5"')
    )
    spec_path = tmp_path / "wl5.toml"
    spec_path.write_text(text)
    spec = load(spec_path)[1]
    assert isinstance(spec, StreamSpec)
    # a third of the quick variant's repetitions (CG's 15 took 110 s for three jobs on a
    # loaded host): the kernels still verify, every job still has to end done
    spec = replace(spec.quick_version(), schemes=("cc-b",), jobs=3, job_seconds=0.5)
    from testbed.experiment.cdc.run import run_streams

    result = run_streams(spec, tmp_path / "out", say=lambda s: None)
    (run,) = result.runs
    assert {j.app for j in run.jobs} == {"cg"}
    assert [j.state for j in run.jobs] == ["done"] * 3, run.jobs
    assert all(j.verified for j in run.jobs), run.jobs
    assert run.killed == 0
