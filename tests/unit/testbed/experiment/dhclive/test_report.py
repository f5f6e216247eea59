"""DHC on the live cluster (testbed/experiment/dhclive/): the spec, DHC's runs in the
simulator on hand-made live runs (the real engine), and the report on runs whose figures
are known. The live side runs in tests/integration/test_studies_live.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment import registry
from testbed.experiment.dhclive import report as dr
from testbed.experiment.fields import SpecError
from testbed.experiment.simvslive.study import (
    LiveJob,
    LiveRun,
    Rates,
    SimVariant,
    ValidationResult,
    read_spec,
    run_sim,
    summarize_rates,
)

REPO = Path(__file__).resolve().parents[5]
SPEC = REPO / "experiments" / "dhc-live.toml"
BUILTIN = SimVariant("built-in", "none", None)


def test_the_committed_spec_runs_dhc_on_a_power_of_two() -> None:
    study, spec = registry.load(SPEC)
    assert study.kind == "dhc-live" and study.live
    assert spec.policies == ("gang", "paired-gang", "dhc") and spec.nodes == 4
    assert spec.cpu_mechanism == "shared" and spec.cpus_per_node == 0.5
    q = study.quick(spec)
    assert q.jobs <= 8 and len(q.loads) == 1 and q.policies == spec.policies


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("nodes = 4 ", "nodes = 3 ", "nodes = 3, but DHC's buddy tree needs a power of two"),
        ('"paired-gang", "dhc"]', '"paired-gang", "dhcx"]', "unknown 'dhcx'"),
    ],
)
def test_bad_specs_give_one_line_naming_the_valid(
    tmp_path: Path, old: str, new: str, needle: str
) -> None:
    text = SPEC.read_text()
    assert old in text
    p = tmp_path / "bad.toml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError) as err:
        registry.load(p)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg
    if "unknown" in needle:
        assert "valid: gang, paired-gang, dhc" in msg
    else:
        assert "nodes = 2, 4 or 8" in msg


def test_sim_vs_live_still_refuses_dhc(tmp_path: Path) -> None:
    text = (REPO / "experiments" / "sim-vs-live.toml").read_text()
    p = tmp_path / "s.toml"
    p.write_text(text.replace('["gang", "paired-gang"]', '["gang", "dhc"]', 1))
    with pytest.raises(SpecError, match="unknown 'dhc'"):
        read_spec(p)


def _rates(rate: float = 25.0) -> dict[int, object]:
    # 100 iterations at 25/s and no overhead: every job holds 4 s of work
    samples = {
        s: [{"iterations": 100.0, "rate": rate, "exec_s": 100 / rate, "cpu": 0.45}]
        for s in (1, 2, 3, 4)
    }
    return dict(Rates(100.0, 1000, summarize_rates(samples)).sizes)


def _run(policy: str, sizes: list[int], ends: list[float]) -> LiveRun:
    return LiveRun(
        policy,
        0.7,
        [
            LiveJob(k, size, 100, 4.0, 0.0, job_id=k + 1, state="done", submit_s=0.0,
                    start_s=0.0, end_s=end)
            for k, (size, end) in enumerate(zip(sizes, ends, strict=True))
        ],
    )  # fmt: skip


def test_dhc_in_the_simulator_runs_disjoint_gangs_together_and_shares_the_root() -> None:
    spec = registry.load(SPEC)[1]
    rates = _rates()
    # two 2-wide gangs: DHC maps them to the two halves of the tree, both run all the time
    two = run_sim(_run("dhc", [2, 2], [4.0, 4.0]), spec, BUILTIN, rates)  # type: ignore[arg-type]
    assert [j.end_s for j in two.jobs] == pytest.approx([4.0, 4.0], abs=0.25)
    assert two.matching_success_rate is None
    # two 4-wide gangs: both at the root, each half of the round: about twice their work
    wide = run_sim(_run("dhc", [4, 4], [8.0, 8.0]), spec, BUILTIN, rates)  # type: ignore[arg-type]
    ends = [j.end_s or 0.0 for j in wide.jobs]
    assert all(7.0 <= e <= 8.6 for e in ends), ends
    assert max(n for _, n in wide.rows) == 2


def _result() -> ValidationResult:
    """Three policies on the same two jobs (a 4-wide and a 2-wide), simulated for real,
    with live ends chosen so the live order is known: paired < dhc < gang."""
    spec = registry.load(SPEC)[1]
    rates = _rates()
    samples = {s: [{"iterations": 100.0, "rate": 25.0, "exec_s": 4.0, "cpu": 0.45}] for s in (2, 4)}
    result = ValidationResult(
        meta={"spec": spec.to_dict(), "quick": True},
        stream=[],
        rates=Rates(100.0, 1000, summarize_rates(samples)),
    )
    live_ends = {"gang": [8.0, 8.0], "paired-gang": [5.0, 5.0], "dhc": [6.0, 7.0]}
    for policy, ends in live_ends.items():
        run = _run(policy, [4, 2], ends)
        result.live.append(run)
        result.sim.append(run_sim(run, spec, BUILTIN, rates))  # type: ignore[arg-type]
    return result


def test_the_report_sets_each_live_figure_beside_the_simulated() -> None:
    result = _result()
    [(load, live, sim)] = dr.rankings(result)
    assert load == 0.7 and live == ["paired-gang", "dhc", "gang"]
    lv, sv = dr.ratio(result, "dhc", "gang", 0.7)
    assert lv == pytest.approx(6.5 / 8.0)
    sim_resp = {s.policy: sum(j.end_s or 0 for j in s.jobs) / 2 for s in result.sim}
    assert sv == pytest.approx(sim_resp["dhc"] / sim_resp["gang"])
    md = dr.markdown(result)
    assert "| dhc | 0.7 | 2 | 6.50 / " in md
    assert "live paired-gang < dhc < gang" in md
    assert ("simulator predicts the live order" in md) == (live == sim)
    assert "**Target** (issue 11)" not in md and "### " in md
    lines = dr.summary_lines(result)
    assert lines[-1].startswith("load 0.7: live order paired-gang < dhc < gang")


def test_order_puts_missing_figures_last() -> None:
    assert dr.order({"a": 2.0, "b": float("nan"), "c": 1.0}) == ["c", "a", "b"]
