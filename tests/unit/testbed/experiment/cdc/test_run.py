"""The cdc-policies experiment (Yu & Byun 2011 §5.2-5.5): job-stream spec, stream generation,
run measurements, and the report rendered from a canned results dict."""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from apps.npb import KERNELS
from testbed.cli import main
from testbed.experiment.cdc.report import PAPER_CLAIMS, claim_ours, markdown, plots, text_summary
from testbed.experiment.cdc.run import StreamResult
from testbed.experiment.cdc.stream import (
    SCHEMES,
    StreamSpec,
    bcr,
    cdc_delta,
    job_stream,
    job_times,
    md_mean_s,
    utilization,
)
from testbed.experiment.fields import SpecError
from testbed.experiment.paired.spec import ExperimentSpec
from testbed.experiment.registry import load
from tests.support.cdc_run import CANNED


def load_any(path: Path) -> Any:
    return load(path)[1]


REPO = Path(__file__).resolve().parents[5]
SPEC = REPO / "experiments/cdc-policies.toml"


def spec() -> StreamSpec:
    s = load_any(SPEC)
    assert isinstance(s, StreamSpec)
    return s


# ---- the spec ----------------------------------------------------------------------------


def test_both_kinds_of_spec_load() -> None:
    s = spec()
    assert s.schemes == SCHEMES and s.loads == ("heavy", "light") and set(s.mpls) == {3, 5}
    assert [a.name for a in s.apps] == ["bt", "sp", "ft", "is", "cg"]
    assert isinstance(load_any(REPO / "experiments/paired-vs-gang.toml"), ExperimentSpec)


def test_sizes_scale_from_16_nodes_to_4_without_1_rank_jobs() -> None:
    s = spec()
    assert {p: s.size_of(p) for p in (4, 8, 9, 16)} == {4: 2, 8: 2, 9: 3, 16: 4}


def test_interarrival_keeps_the_papers_ratio_and_offered_load() -> None:
    s = spec()
    heavy, light = s.mean_interarrival("heavy"), s.mean_interarrival("light")
    assert heavy / light == pytest.approx(40.75 / 70.27)
    # offered load = mean width x length / mean gap: the paper's, with our numbers
    ours = s.mean_size_fraction(False) * s.job_seconds / heavy
    paper = s.mean_size_fraction(True) * s.paper_job_seconds / 40.75
    assert ours == pytest.approx(paper)
    assert s.mean_size_fraction(True) == pytest.approx((2 * 29 / 3 + 3 * 28 / 3) / 5 / 16)


def test_the_stream_is_seeded_exponential_and_the_same_for_every_load() -> None:
    s = replace(spec(), jobs=4000)
    heavy, light = job_stream(s, "heavy"), job_stream(s, "light")
    assert heavy == job_stream(s, "heavy")  # reproducible
    assert [(j.app, j.size, j.message) for j in heavy] == [
        (j.app, j.size, j.message) for j in light
    ]
    assert heavy[0].arrival_s == 0.0
    gaps = [b.arrival_s - a.arrival_s for a, b in itertools.pairwise(heavy)]
    m = statistics.fmean(gaps)
    assert m == pytest.approx(s.mean_interarrival("heavy"), rel=0.05)
    assert statistics.pstdev(gaps) / m == pytest.approx(1.0, abs=0.06)  # exponential: CV 1
    assert light[-1].arrival_s / heavy[-1].arrival_s == pytest.approx(70.27 / 40.75)
    apps = {j.app for j in heavy}
    assert apps == {"bt", "sp", "ft", "is", "cg"}
    assert {j.size for j in heavy if j.app in ("ft", "is", "cg")} == {2, 4}
    assert {j.size for j in heavy if j.app in ("bt", "sp")} == {2, 3, 4}
    cg = [j for j in heavy if j.app == "cg"]
    small = sum(1 for j in cg if j.message.nbytes == 8) / len(cg)
    assert small == pytest.approx(0.565, abs=0.06)  # Table 2's share of 8-byte messages


def test_a_job_runs_the_synthetic_program_with_its_communication_phase() -> None:
    s = spec()
    job = next(j for j in job_stream(s, "heavy") if j.app == "cg")
    argv = job.argv(100.0, python="py")
    assert argv[:3] == ["py", "-m", "apps.synthetic"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--comm"] == "nn" and flags["--comm-rounds"] == "4"
    assert flags["--msg-bytes"] in ("8", "16", "28672")
    assert flags["--gcomp"] == str(round(10.0 * 1e6 / 100.0))  # compute_ms at 100 ns/iter
    # ~job_seconds alone: compute (1 - comm_share) of it on a node of 0.5 CPU
    want = round(s.job_seconds * (1 - 0.46) * 0.5 * 1000 / 10.0)
    assert int(flags["--iterations"]) == want


def test_runs_and_the_quick_version() -> None:
    s = spec()
    runs = s.runs()
    # batch once per load (its MPL is 1); MPL 3 only at the loads of mpl_loads (heavy)
    assert len(runs) == (8 * 2 + 1) + (8 + 1)
    assert ("batch", "heavy", 1) in runs and ("cc-b", "heavy", 3) in runs
    assert ("cc-b", "light", 3) not in runs and ("cc-b", "light", 5) in runs
    q = s.quick_version()
    assert set(q.schemes) == set(SCHEMES) and q.loads == ("heavy",) and q.mpls == (5,)
    assert len(q.runs()) == 9 and q.jobs <= 5 and q.job_seconds <= 2


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('schemes = ["batch", "local",', 'schemes = ["gang", "local",', "unknown 'gang'"),
        (
            "mpls = [5, 3]",
            "mpls = [0]",
            "[experiment].mpls: every value must be >= 1 and <= 64, got 0",
        ),
        ('loads = ["heavy", "light"]', 'loads = ["heavy", "medium"]', "unknown 'medium'"),
        ('{ comm = "nn", bytes = 8, share = 56.5 }', '{ comm = "ring", bytes = 8 }', "ring"),
        ("compute_ms = 10.0", "compute_ms = 0", "[apps.cg].compute_ms: must be > 0, got 0"),
        ('kind = "cdc-live"', 'kind = "stream"', "kind = 'stream' is not a study"),
        ("jobs = 20 ", "jobs = 20\ncolour = 1 ", "colour: unknown key"),
    ],
)
def test_bad_specs_are_one_line(tmp_path: Path, old: str, new: str, words: str) -> None:
    text = SPEC.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError) as err:
        load_any(bad)
    assert words in str(err.value) and "\n" not in str(err.value)


# ---- measurements ------------------------------------------------------------------------


def test_cdc_counters_are_taken_as_deltas_over_the_run() -> None:
    before = {
        "n0": {"scheme": "cc-b", "decisions": 100, "conflicts": 10, "boosts": 5, "md_count": 4,
               "md_sum_s": 0.4, "md_buckets": [1, 3, 0], "md_bounds_s": [1e-4, 1e-3]},
        "n1": {"scheme": "cc-b", "decisions": 50, "conflicts": 0, "boosts": 0, "md_count": 0,
               "md_sum_s": 0.0, "md_buckets": [0, 0, 0]},
    }  # fmt: skip
    after = {
        "n0": {"scheme": "cc-b", "decisions": 300, "conflicts": 60, "boosts": 9, "md_count": 14,
               "md_sum_s": 1.4, "md_buckets": [5, 9, 0], "md_bounds_s": [1e-4, 1e-3]},
        # n1 was reconfigured meanwhile (counters reset): its values count whole
        "n1": {"scheme": "cc-b", "decisions": 20, "conflicts": 5, "boosts": 1, "md_count": 2,
               "md_sum_s": 0.1, "md_buckets": [2, 0, 0]},
    }  # fmt: skip
    d = cdc_delta(before, after)
    assert d is not None
    assert (d["decisions"], d["conflicts"], d["md_count"]) == (220, 55, 12)
    assert d["md_sum_s"] == pytest.approx(1.1)
    assert d["md_buckets"] == [6, 6, 0] and d["md_bounds_s"] == [1e-4, 1e-3]
    assert bcr(d) == pytest.approx(55 / 220) and md_mean_s(d) == pytest.approx(1.1 / 12)
    assert cdc_delta({"n0": None}, {"n0": None}) is None
    assert bcr(None) is None and md_mean_s({"md_count": 0}) is None


def test_job_times_and_utilization() -> None:
    recs = [
        {"submit_time": 100.0, "start_time": 101.0, "end_time": 105.0, "cpu_s": 4.0},
        {"submit_time": 102.0, "start_time": 105.0, "end_time": 110.0, "cpu_s": 6.0},
    ]
    assert job_times(recs[1]) == (3.0, 5.0, 8.0)
    assert job_times({"submit_time": 1.0, "start_time": None}) is None
    assert utilization(recs, cpus=2.0) == pytest.approx(10.0 / (10.0 * 2.0))


# ---- the report --------------------------------------------------------------------------


def test_report_renders_the_numbers_of_its_input(tmp_path: Path) -> None:
    result = StreamResult.from_dict(json.loads(json.dumps(CANNED)))
    md = markdown(result)
    # cc-b, heavy: MPL 5 jobs 1+6 and 3+8, MPL 3 1+7 and 3+9 (the killed one is left out)
    assert "| CC-B | 9.00 (2.00 + 7.00) | 10.00 (2.00 + 8.00) |" in md
    assert "| SB | 0.200 / 2.00 | 0.100 / 1.00 |" in md  # BCR / MD ms
    assert "| BATCH | 12.00 (2.00 + 10.00) | 12.00 (2.00 + 10.00) |" in md  # MPL 1 in both
    assert "heavy 5.55 s (paper 40.75 s)" in md
    ours = {c.text: claim_ours(result.runs, c)[0] for c in PAPER_CLAIMS}
    # response cc-b (9.0) vs sb (13.0); BCR 0.1 vs 0.2; CG exec 6 vs 10
    assert ours["CC-B vs SB, avg. response time, heavy load"] == pytest.approx((9 / 13 - 1) * 100)
    assert ours["CC-B vs SB, BCR, heavy load"] == pytest.approx(-50.0)
    assert ours["CC-B vs SB, avg. execution time of CG"] == pytest.approx(-40.0)
    assert ours["CC vs other CDC schemes, avg. response time"] == pytest.approx((10 / 13 - 1) * 100)
    assert "| -36.6 % | -30.8 % |" in md and "| -22.0 % | -50.0 % |" in md
    assert "heights are not in its text" in md
    assert (
        "| CC-B | heavy | 5 | 2/3 | 1 | 50% | 1000 | 100 | 1 | 100 | – | – | all on cc-b | 30 |"
        in md
    )
    summary = text_summary(result)
    assert "paper -36.6 %, ours -30.8 %" in summary
    written = plots(result, tmp_path)
    assert written == ["fig7_response.png", "fig8_bcr_md.png", "fig10_mpl_response.png",
                       "fig11_mpl_bcr_md.png", "claims.png"]  # fmt: skip
    for name in written:
        assert (tmp_path / name).stat().st_size > 1000
        assert f"![{name}]({name})" in md


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["experiment", "run", str(SPEC), "--configs", "gang"], "--configs: not for a cdc-live"),
        (["experiment", "run", str(SPEC), "--schemes", "sb,nope"], "--schemes: unknown 'nope'"),
        (["experiment", "run", str(SPEC), "--mpls", "3,x"], "--mpls: whole numbers"),
        (["experiment", "run", str(SPEC), "--loads", "medium"], "--loads: unknown 'medium'"),
        (["experiment", "run", str(REPO / "experiments/paired-vs-gang.toml"), "--quick"],
         "paired-live specs have no --quick variant"),
        (["experiment", "report", "/nonexistent/results.json"], "no such file"),
    ],
)  # fmt: skip
def test_experiment_cli_errors_are_one_line(argv: list[str], words: str, capsys: Any) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cosched: error: ") and words in err and "\n" not in err


def test_mpl_loads_limits_the_mpl_sweep_to_some_loads() -> None:
    path = Path(__file__).resolve().parents[5] / "experiments" / "cdc-policies.toml"
    spec = load_any(path)
    runs = spec.runs()
    assert {m for s, ld, m in runs if ld == "light" and s != "batch"} == {5}
    assert {m for s, ld, m in runs if ld == "heavy" and s != "batch"} == {3, 5}
    assert sum(1 for s, _ld, _m in runs if s == "batch") == 2


NPB_SPEC = REPO / "experiments/cdc-npb.toml"


@pytest.mark.parametrize(("wl", "apps"), [("WL1", {"bt"}), ("WL3", {"ft"}), ("WL5", {"cg"}),
                                          ("WL6", {"bt", "sp", "ft", "is", "cg"})])  # fmt: skip
def test_table3_workloads_pick_their_applications(tmp_path: Path, wl: str, apps: set[str]) -> None:
    p = tmp_path / "wl.toml"
    p.write_text(
        SPEC.read_text().replace(
            'name = "cdc-policies"', f'name = "cdc-policies"\nworkload = "{wl}"'
        )
    )
    s = load_any(p)
    assert isinstance(s, StreamSpec) and {a.name for a in s.apps} == apps
    assert {j.app for j in job_stream(s, "heavy")} <= apps


def test_npb_programs_run_the_real_kernels_on_allowed_rank_counts() -> None:
    s = load_any(NPB_SPEC)
    assert isinstance(s, StreamSpec) and s.program == "npb" and s.workload == "WL6"
    jobs = job_stream(s, "heavy")
    for j in jobs:
        argv = j.argv(50.0)
        assert argv[1:3] == ["-m", f"apps.npb.{'is_' if j.app == 'is' else j.app}"]
        assert "--reps" in argv and "--duration" not in argv  # time-sharing must stretch it
        assert KERNELS[j.app].allows(j.size) and 2 <= j.size <= s.nodes
    # squares for BT and SP (4 of 4 nodes), powers of two for the others
    assert {j.size for j in jobs if j.app in ("bt", "sp")} <= {4}


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('workload = "WL6"', 'workload = "WL7"', "unknown 'WL7'; Yu & Byun 2011 Table 3 has WL1"),
        ('programs = "npb"', 'programs = "mpi"', "programs: one of synthetic, npb"),
        ('npb_class = "S"', 'npb_class = "Q"', "has no class 'Q'"),
        ("npb_reps = 5", "npb_reps = 0", "[apps.bt].npb_reps: must be >= 1, got 0"),
        (
            "mpls = [5]",
            "mpls = 0",
            "[quick].mpls: expected a list of whole numbers, got 0",
        ),  # found by fuzzing
        ("jobs = 4", "jobs = -1", "[quick].jobs: must be >= 1, got -1"),
    ],
)
def test_bad_npb_stream_specs_are_one_line(tmp_path: Path, old: str, new: str, words: str) -> None:
    text = NPB_SPEC.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError) as err:
        load_any(bad)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_workload_needs_its_applications(tmp_path: Path) -> None:
    text = SPEC.read_text().replace(
        'name = "cdc-policies"', 'name = "cdc-policies"\nworkload = "WL5"'
    )
    cut = text[: text.index("[apps.cg]")]
    bad = tmp_path / "bad.toml"
    bad.write_text(cut)
    with pytest.raises(SpecError, match=r"WL5 mixes cg — add \[apps\.cg\]"):
        load_any(bad)
