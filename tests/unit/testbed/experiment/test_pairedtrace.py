"""The paired-trace study (Figs. 3 and 13): the seeded jitter of the QCRD copies, spec
errors; and the decomposition's meter on a hand-computed quantum (the quick study end to
end: tests/live/testbed/experiment/test_pairedtrace.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import registry
from testbed.experiment.fields import SpecError
from testbed.experiment.pairedscale import decompose, trace
from tests.support.pairedtrace import CAL, study_spec


def test_jitter_is_seeded_and_zero_means_exact_copies(tmp_path: Path) -> None:
    from testbed.experiment.pairedscale.mixes import job_types

    cal = tmp_path / "cal.toml"
    cal.write_text(CAL)
    t = job_types(cal, io_files=8, io_latency=0.005)
    base = {"phases": "1,4,8", "io": t["io"], "compute": t["compute"], "nodes": 2,
            "quantum": 1.0, "interference": t["interference"], "sharp_change": "none"}  # fmt: skip
    exact = trace.simulate_qcrd({**base, "start_jitter": 0.0, "phase_jitter": 0.0}, 0)
    ends = exact["responses"].values()
    assert max(ends) - min(ends) <= 1.0 + 1e-9  # identical copies: apart by the round only
    jit = {**base, "start_jitter": 1.0, "phase_jitter": 0.05}
    a, b = trace.simulate_qcrd(jit, 3), trace.simulate_qcrd(jit, 3)
    assert a["responses"] == b["responses"]
    assert a["responses"] != exact["responses"]
    assert trace.simulate_qcrd(jit, 4)["responses"] != a["responses"]


def test_spec_errors_are_one_line(tmp_path: Path) -> None:
    spec = study_spec(tmp_path)
    spec.write_text(spec.read_text().replace('phases = "1,4,8"', 'phases = "1,4"'))
    with pytest.raises(SpecError, match="phases"):
        registry.load(spec)
    spec.write_text(spec.read_text().replace('phases = "1,4"', 'phases = "1,4,8"')
                    .replace("fig3_live = ", "fig3_liv = "))  # fmt: skip
    with pytest.raises(SpecError, match="fig3_liv"):
        registry.load(spec)


def test_meter_counts_idle_nodes_while_a_job_waits() -> None:
    """2 nodes, 1 s quanta, strict gang: job 1 (2 nodes, 2 s) and job 2 (1 node, 2 s) at 0.
    They cannot share a row, so they alternate: each quantum one of them waits, and in
    job 2's quanta one node idles -- 1 node-second per 2 quanta of 2 node-seconds each."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate
    from testbed.sim.job import SimJob
    from testbed.sim.results import FULL, SimConfig

    policy = make_policy("gang", 2, parse_params(lookup("gang"), {}))
    meter = decompose._Meter(policy, 2, 1.0)
    jobs = [SimJob(1, 0.0, 2, 2.0, 2.0), SimJob(2, 0.0, 1, 2.0, 2.0)]
    res = simulate(jobs, policy, SimConfig(nodes=2, quantum=1.0, occupancy=FULL))
    meter.close(max(res.end))
    assert meter.busy_ns == pytest.approx(8.0)  # 4 quanta on 2 nodes
    # quanta 1-3 have a waiting job; job 2's quantum among them idles one node
    assert meter.waiting_s == pytest.approx(3.0)
    assert meter.idle_waiting_ns == pytest.approx(1.0)


def _live_data(*records: dict[str, object]) -> dict[str, object]:
    return {"fig13": [], "fig13_live": [{"source": f"r{k}", "recorded": r}
                                        for k, r in enumerate(records, 1)]}  # fmt: skip


def test_live_fig13_cost_is_judged_over_the_runs_spread() -> None:
    from testbed.experiment.claims import Verdict
    from testbed.experiment.pairedtrace import study
    from tests.support.pairedtrace import fig13_record

    # +1 % and +1.5 % (the second run with detection first): mean 1.25 > spread 0.25
    both = study.claims(
        _live_data(fig13_record(200, 202), fig13_record(200, 203, sharp_first=True))
    )
    cost = {c.id: c for c in both}["wiseman2003/fig13/sharp-change-cost-live"]
    assert cost.verdict == Verdict.REPRODUCED, cost
    assert "200.0 s → 202.5 s" in cost.measured
    # +1 % and -0.5 %: the mean is not beyond the spread
    mixed = study.claims(_live_data(fig13_record(200, 202), fig13_record(200, 199)))
    assert {c.id: c for c in mixed}["wiseman2003/fig13/sharp-change-cost-live"].verdict == (
        Verdict.DIRECTION
    )
    # a run in which a job was killed at the timeout is left out: one run, direction only
    cut = study.claims(_live_data(fig13_record(200, 202), fig13_record(200, 100, ended=3)))
    c = {c.id: c for c in cut}["wiseman2003/fig13/sharp-change-cost-live"]
    assert c.verdict == Verdict.DIRECTION and "live, 1 run:" in c.measured
    # entries(): 3 paired quanta, one of them two jobs at 0.45 + 0.5: a third pair compute
    alone = {c.id: c for c in both}["wiseman2003/fig13/cpu-alone-live"]
    assert alone.verdict == Verdict.NOT_REPRODUCED and "33%, 33%" in alone.measured


def test_live_fig13_traces_are_read_or_refused_in_one_line(tmp_path: Path) -> None:
    from testbed.experiment.pairedtrace import study

    spec = study_spec(tmp_path, fig13_live=True)
    _, read = registry.load(spec)
    assert [Path(p).name for p in read.fig13_live] == ["fig13-live-1.json", "fig13-live-2.json"]
    assert study._recorded("fig13_live", read.fig13_live[0], "fig13")["recorded"]["runs"]
    # a Fig. 3 trace named as a Fig. 13 one, and a missing file
    with pytest.raises(SpecError, match=r"fig13_live .*not a fig13 trace"):
        study._recorded("fig13_live", str(tmp_path / "fig3-live.json"), "fig13")
    with pytest.raises(SpecError, match=r"fig13_live .*cannot read"):
        study._recorded("fig13_live", str(tmp_path / "nope.json"), "fig13")
