"""The live studies through the framework on a real cluster (root): `make run`'s paired study
(one run and a sweep, shortened), and every live spec's --quick variant, as committed or
with a copy's edits that shorten only what no assertion reads (a drain timeout, the length
of a rate measurement, the jobs' lengths: the study's steps, jobs and results.json's
structure stay the same).

Each brings its cluster up itself and down after it; the fixture checks nothing is left.
Nothing here checks an absolute timing: the runs end, every job is done, results.json has
its kind and its command, and the report is what results.json gives.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.experiment import pipeline

REPO = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    """A copy of a committed spec with ``edits`` (old, new) applied."""
    text = (REPO / "experiments" / name).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path


def _rebuilt(out: Path) -> None:
    report = (out / "report.md").read_text()
    (out / "report.md").unlink()
    pipeline.report(out / "results.json")
    assert (out / "report.md").read_text() == report


# never wait for a quiet host: a test must not hang on a busy one
NO_QUIET = ('name = "', 'quiet_limit = 0.0\nname = "')

# The Lublin studies' quick jobs at half their run times: the quick mean_runtime and
# min_runtime (the floor most of the 8 quick jobs are clipped to), so the stream's
# arrivals, which are stretched to the offered load, come twice as fast too.
HALF_RUNTIMES = {
    "sim-vs-live.toml": [
        ("mean_runtime = 1.5", "mean_runtime = 0.75"),
        ("min_runtime = 0.5", "min_runtime = 0.25"),
    ],
    "dhc-live.toml": [
        ("mean_runtime = 1.2", "mean_runtime = 0.6"),
        ("min_runtime = 0.5", "min_runtime = 0.25"),
    ],
}


@pytest.mark.root
@pytest.mark.slow
def test_make_run_paired_study_short(root_cluster_env: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "paired-vs-gang-2node.toml", NO_QUIET)
    out = tmp_path / "out"
    argv = [
        "experiment",
        "run",
        str(spec),
        "--out",
        str(out),
        "--duration",
        "3",
        "--mixes",
        "1",
        "--configs",
        "gang,paired-fig4-prose",
    ]
    assert main(argv) == 0
    res = pipeline.read(out / "results.json")
    runs = res.data["result"]["runs"]
    assert [(r["config"], r["mix"]) for r in runs] == [("gang", 1), ("paired-fig4-prose", 1)]
    for r in runs:
        assert [j["state"] for j in r["jobs"]] == ["done"] * 4 and r["quanta"] > 0
        assert all(j["barriers_per_second"] for j in r["jobs"])
    assert res.made.host["cores"] >= 1 and res.made.command.startswith("cosched experiment run")
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
def test_paired_sweep_brings_up_each_size(root_cluster_env: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "fig8-cluster-size.toml", NO_QUIET)
    out = tmp_path / "fig8"
    argv = [
        "experiment",
        "run",
        str(spec),
        "--out",
        str(out),
        "--duration",
        "3",
        "--mixes",
        "1",
        "--configs",
        "gang",
    ]
    assert main(argv) == 0
    points = pipeline.read(out / "results.json").data["sweep"]["points"]
    assert [p["label"] for p in points] == ["nodes2", "nodes4"]
    for p in points:
        (run,) = p["result"]["runs"]
        assert [j["state"] for j in run["jobs"]] == ["done"] * 4
        assert len(p["result"]["cluster"]["nodes"]) == int(p["value"])
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["cdc-policies.toml", "cdc-npb.toml"])
def test_cdc_quick_variants(root_cluster_env: Path, tmp_path: Path, name: str) -> None:
    # Shorter jobs (the quick job_seconds / 2 for the synthetic program, / 6 for the
    # kernels' repetitions: FT 2, IS 6, CG 2 of them, BT and SP 1), and cdc-npb's quick
    # drain 60 s, not 120 s: under `local` its CG job (a communicating kernel on shared
    # nodes) outlasted 120 s (122 s of the test's 166 s, killed), while its FT jobs ended
    # within 45 s on a loaded host. cdc-npb's arrivals scale with job_seconds: the same 4
    # jobs, schemes and steps; 75 s -> 28 s of a busy host at / 3 -> / 6 (2026-11-27).
    # cdc-policies' runs are mostly the jobs' start-up: / 4 saved 2 s of its 54 s.
    edits = {
        "cdc-policies.toml": [("job_seconds = 1.5", "job_seconds = 0.75")],
        "cdc-npb.toml": [
            ("job_seconds = 1.5", "job_seconds = 0.25"),
            ("drain_timeout = 120.0", "drain_timeout = 60.0"),
        ],
    }
    spec = _spec(tmp_path, name, *edits[name])
    out = tmp_path / "out"
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    res = pipeline.read(out / "results.json")
    assert res.kind == "cdc-live" and res.made.command.endswith("--quick --out " + str(out))
    for run in res.data["runs"]:
        states = [j["state"] for j in run["jobs"]]
        # a busy host can stretch a spinning scheme past the quick drain timeout: a job
        # killed there is counted, never lost; every other job ended normally
        assert states.count("done") + run["killed"] == len(states), (run["scheme"], states)
        assert states.count("done") > 0 and set(run["local_policy"].values()) == {run["scheme"]}
        if name == "cdc-npb.toml":
            assert all(j["verified"] for j in run["jobs"] if j["state"] == "done"), run["jobs"]
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sim_vs_live_quick_variant(root_cluster_env: Path, tmp_path: Path) -> None:
    # Each rate measurement runs rate_seconds / (compute_ms + device_wait_ms) iterations,
    # sized before G_comp is tuned up (about 30x here): 1 s asked took 12-28 s, and the
    # five of them (two sizes before, and after each run) were 120 s of this test's 234 s.
    # 0.1 s gives 22 iterations (1-3 s each): the same steps, rates and results.json.
    # The jobs' run times halved (the quick mean and the clip's floor, where most of the
    # 8 quick jobs sit): each live run's arrivals and work take about half as long.
    spec = _spec(
        tmp_path,
        "sim-vs-live.toml",
        ("quiet_limit = 0.15", "quiet_limit = 0.0"),
        ("rate_seconds = 1.0", "rate_seconds = 0.1"),
        *HALF_RUNTIMES["sim-vs-live.toml"],
    )
    out = tmp_path / "out"
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    data = pipeline.read(out / "results.json").data
    assert data["meta"]["quick"] is True and len(data["live"]) == 2
    for run in data["live"]:
        assert [j["state"] for j in run["jobs"]] == ["done"] * len(run["jobs"])
        assert run["killed"] == 0
    # every [[sim]] variant of the spec simulates both policies' live runs
    variants = len(tomllib.loads(spec.read_text())["sim"])
    assert len(data["sim"]) == variants * 2 and len(data["sensitivity"]) == 2
    assert {r["variant"] for r in data["sim"]} >= {"full-quanta", "calibrated"}
    assert set(data["rates"]["sizes"]) == {"1", "2"}
    assert "**Target**" in (out / "report.md").read_text()
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dhc_live_quick_variant(root_cluster_env: Path, tmp_path: Path) -> None:
    """DHC beside strict and paired gang on the 4-node cluster, each run simulated."""
    # its quiet_limit is 0 already; rate measurements of 0.1 s (22 iterations) and the
    # jobs' run times halved, as above
    spec = _spec(
        tmp_path,
        "dhc-live.toml",
        ("rate_seconds = 1.0", "rate_seconds = 0.1"),
        *HALF_RUNTIMES["dhc-live.toml"],
    )
    out = tmp_path / "out"
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    data = pipeline.read(out / "results.json").data
    assert [r["policy"] for r in data["live"]] == ["gang", "paired-gang", "dhc"]
    for run in data["live"]:
        assert [j["state"] for j in run["jobs"]] == ["done"] * len(run["jobs"])
        assert run["killed"] == 0
    assert {s["policy"] for s in data["sim"]} == {"gang", "paired-gang", "dhc"}
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rajaei_live_quick_variant(root_cluster_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # rate probes of 100 barriers, not 400 (about 0.75 s of the compute preset's loop, not
    # 3 s, each of the four): the rate is rank 0's own over its loop, start-up apart
    spec = _spec(
        tmp_path,
        "rajaei-live.toml",
        ("drain_timeout = 60.0", "drain_timeout = 60.0\nprobe_barriers = 100"),
    )
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    res = pipeline.read(out / "results.json")
    assert res.kind == "rajaei-live" and res.made.command.endswith("--quick --out " + str(out))
    data = res.data
    assert data["spec"]["name"] == "rajaei-live-quick" and "quick" not in data["spec"]
    runs = data["runs"]
    assert [(r["config"], r["switch"]) for r in runs] == [
        ("gang-greedy:3", "freezer"),
        ("lookahead", "freezer"),
    ]
    for r in runs:
        assert r["failed"] == 0 and r["makespan"] > 0 and len(r["waits"]) == data["spec"]["jobs"]
    assert set(data["sim"]) == {"gang-greedy:3", "lookahead"}
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_nplus1_live_quick_variant(root_cluster_env: Path, tmp_path: Path) -> None:
    """Strict gang, paired gang and N + 1 gangs on the compute, disk and network job."""
    out = tmp_path / "out"
    # each job's work half the quick 2 s alone (5 quanta of 0.2 s, not 10): the same
    # calibration, jobs and runs, every kind still in every run's trace
    spec = _spec(tmp_path, "nplus1-live.toml", ("solo_seconds = 2.0", "solo_seconds = 1.0"))
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    res = pipeline.read(out / "results.json")
    assert res.kind == "nplus1-live" and res.made.command.endswith("--quick --out " + str(out))
    data = res.data
    cal = data["calibration"]
    # the capacities were measured, not left at the controller's defaults
    assert cal["bps"]["disk"] > 0 and cal["bps"]["disk"] != cal["default_bps"]["disk"]
    assert 0 < cal["bps"]["net"] != cal["default_bps"]["net"]
    assert [r["policy"] for r in data["runs"]] == ["gang", "paired-gang", "nplus1"]
    for run in data["runs"]:
        assert [j["state"] for j in run["jobs"]] == ["done"] * 3, run["jobs"]
        assert all(j["units"] == cal["units"][j["kind"]] for j in run["jobs"])
        ran = {k for t in run["trace"] for k in t["ran"]}
        assert ran == {"compute", "disk", "net"}
    # strict gang never runs two rows at once; the N + 1 trace carries the rows' vectors
    assert all(len(t["ran"]) <= 1 for t in data["runs"][0]["trace"])
    assert any("predicted" in t for t in data["runs"][2]["trace"])
    assert list(Path("/var/tmp").glob("cosched-nplus1live-*")) == []  # the disk files
    assert (out / "device-use.png").exists()
    _rebuilt(out)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_paired_userlevel_quick_variant(root_cluster_env: Path, tmp_path: Path) -> None:
    """The comm job alone and beside the I/O job under block and spin (issue 31 item 2):
    every job ends, every rank reports its wait distribution, the agents' utilization was
    traced, and spinning reads more CPU than blocking in the same run."""
    spec = REPO / "experiments" / "paired-userlevel.toml"  # its runs never wait for quiet
    out = tmp_path / "out"
    assert main(["experiment", "run", str(spec), "--quick", "--out", str(out)]) == 0
    res = pipeline.read(out / "results.json")
    assert res.kind == "paired-userlevel"
    runs = res.data["runs"]
    assert [(r["policy"], r["action"], r["partner"]) for r in runs] == [
        ("gang", "block", None),
        ("paired-gang", "block", "io"),
        ("paired-gang", "spin", "io"),
        ("gang", "block", "io"),
    ]
    for r in runs:
        assert all(j["state"] == "done" for j in r["jobs"].values()), r
        ranks = r["jobs"]["comm"]["ranks"]
        assert len(ranks) == 2 and all(len(k["md_quantiles_us"]) == 101 for k in ranks)
        assert r["traced_quanta"] > 0 and r["jobs"]["comm"]["quanta_utilization"]
    by = {(r["policy"], r["action"], r["partner"]): r for r in runs}
    blocked = by[("paired-gang", "block", "io")]["jobs"]["comm"]["ranks"]
    spun = by[("paired-gang", "spin", "io")]["jobs"]["comm"]["ranks"]
    # the waiting action reached the ranks through the job's command line
    assert {k["wait"]["recv"] for k in blocked} == {"block"}
    assert {k["wait"]["recv"] for k in spun} == {"spin"}
    assert all(k["spin_polls"] > 0 for k in spun) and all(k["spin_polls"] == 0 for k in blocked)
    # CPU time, not wall time: a spinning rank uses more CPU per second than a blocking one
    assert min(k["cpu_ratio"] for k in spun) > max(k["cpu_ratio"] for k in blocked)
    _rebuilt(out)
