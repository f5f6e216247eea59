"""TOML workload specs and the --workload argument (testbed/sim/workloads/spec.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.sim.workloads.load import offered_load
from testbed.sim.workloads.lublin import generate_lublin
from testbed.sim.workloads.spec import (
    WorkloadError,
    build_workload,
    load_workload_spec,
    resolve_workload,
)
from testbed.sim.workloads.swf import write_swf

REPO = Path(__file__).resolve().parents[5]
KTH = REPO.parent / "shared" / "traces" / "KTH-SP2-1996-2.1-filtered.swf"


def spec_file(tmp_path: Path, body: str, name: str = "w.toml") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


def test_lublin_spec_builds_scaled_profiled_workload(tmp_path: Path) -> None:
    p = spec_file(
        tmp_path,
        """
[experiment]
name = "other tables are ignored"

[workload]
source = "lublin"
jobs = 300
seed = 4
load = 0.8
runtime_scale = 0.025
profile = "heterogeneous"
""",
    )
    spec = load_workload_spec(p)
    assert (spec.source, spec.jobs, spec.seed, spec.load) == ("lublin", 300, 4, 0.8)
    jobs = build_workload(spec, 16)
    assert len(jobs) == 300
    assert offered_load(jobs, 16) == pytest.approx(0.8, rel=0.01)
    base = generate_lublin(300, 16, seed=4)
    assert jobs[7].runtime == pytest.approx(base[7].runtime * 0.025)
    assert len({j.phases[0].cpu for j in jobs}) > 250  # heterogeneous utilizations
    assert build_workload(spec, 16) == jobs  # deterministic


def test_swf_spec_path_relative_to_spec_and_overrides(tmp_path: Path) -> None:
    write_swf(tmp_path / "t.swf", generate_lublin(50, 32, seed=1))
    (tmp_path / "sub").mkdir()
    p = spec_file(tmp_path / "sub", '[workload]\nsource = "swf"\npath = "../t.swf"\njobs = 20\n')
    jobs, info = resolve_workload(str(p), nodes=32)
    assert len(jobs) == 20 and info.n_jobs == 20
    assert info.header is not None and info.header.max_procs is not None
    jobs, info = resolve_workload(str(p), nodes=32, jobs=30, load=0.5)
    assert len(jobs) == 30
    assert info.offered_load == pytest.approx(0.5)


def test_swf_oversize_policy(tmp_path: Path) -> None:
    write_swf(tmp_path / "t.swf", generate_lublin(200, 64, seed=2))
    body = '[workload]\nsource = "swf"\npath = "t.swf"\n'
    # default: kept, so that the simulator rejects each one with a reason and goes on
    kept = build_workload(load_workload_spec(spec_file(tmp_path, body)), 8)
    assert len(kept) == 200 and max(j.size for j in kept) > 8
    with pytest.raises(WorkloadError, match=r"\[workload\]\.oversize: .* need up to \d+ proc"):
        build_workload(load_workload_spec(spec_file(tmp_path, body + 'oversize = "error"\n')), 8)
    dropped = build_workload(
        load_workload_spec(spec_file(tmp_path, body + 'oversize = "drop"\n')), 8
    )
    assert dropped and all(j.size <= 8 for j in dropped) and len(dropped) < 200
    clipped = build_workload(
        load_workload_spec(spec_file(tmp_path, body + 'oversize = "clip"\n')), 8
    )
    assert len(clipped) == 200 and max(j.size for j in clipped) == 8


def test_mix_spec(tmp_path: Path) -> None:
    p = spec_file(tmp_path, '[workload]\nsource = "mix"\nio_jobs = 3\nruntime = 60\n')
    jobs = build_workload(load_workload_spec(p), 8)
    assert [j.phases[0].cpu for j in jobs] == [0.95, 0.0, 0.0, 0.0]
    assert all(j.size == 8 and j.runtime == 60 for j in jobs)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('source = "lublin"\njbos = 10', r"\[workload\]\.jbos: unknown key; did you mean 'jobs'\?"),
        ('source = "lublin"\njobs = "100"',
         r"\[workload\]\.jobs: expected an integer, got string '100'; write e\.g\. jobs = 1000"),
        ('source = "lublin"\njobs = true', r"\[workload\]\.jobs: expected an integer, got boolean"),
        ('source = "lublin"\nload = "high"', r"\[workload\]\.load: expected a number"),
        ('source = "lublin"\nload = -1', r"\[workload\]\.load: must be a positive number"),
        ("jobs = 10", r"\[workload\]\.source: missing; add source = \"lublin\""),
        ('source = "pwa"', r"\[workload\]\.source: unknown source 'pwa'; use one of lublin"),
        ('source = "swf"', r"\[workload\]\.path: missing for source = \"swf\""),
        ('source = "lublin"\npath = "x.swf"',
         r"\[workload\]\.path: does not apply to source = 'lublin' \(only to swf\); remove it"),
        ('source = "mix"', r"\[workload\]\.io_jobs: missing"),
        ('source = "mix"\nio_jobs = 7', r"\[workload\]\.io_jobs: must be 0\.\.4"),
        ('source = "lublin"\nprofile = "bursty"', r"\[workload\]\.profile: must be one of compute"),
        ('source = "lublin"\nbarrier = 1\nbarrier_count = 3', r"barrier_count: conflicts"),
    ],
)  # fmt: skip
def test_spec_errors_name_file_key_and_fix(tmp_path: Path, body: str, expected: str) -> None:
    p = spec_file(tmp_path, "[workload]\n" + body + "\n")
    with pytest.raises(WorkloadError, match=expected) as ei:
        load_workload_spec(p)
    assert str(ei.value).startswith(f"{p}: [workload]")


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"w\.toml: \[workload\]: missing table"):
        load_workload_spec(spec_file(tmp_path, '[experiment]\nname = "x"\n'))
    with pytest.raises(WorkloadError, match="invalid TOML"):
        load_workload_spec(spec_file(tmp_path, "[workload\nsource = 1\n"))
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload_spec(tmp_path / "nope.toml")


def test_bad_swf_line_through_spec_suggests_skip(tmp_path: Path) -> None:
    (tmp_path / "bad.swf").write_text("1 0 -1 10 2" + " -1" * 13 + "\nnot a job\n")
    p = spec_file(tmp_path, '[workload]\nsource = "swf"\npath = "bad.swf"\n')
    with pytest.raises(WorkloadError, match=r"bad\.swf:2: expected 18 fields.*skip_bad_lines"):
        build_workload(load_workload_spec(p), 4)
    jobs, info = resolve_workload(str(p), nodes=4, skip_bad_lines=True)
    assert len(jobs) == 1 and info.skipped_lines == 1


def test_resolve_workload_forms(tmp_path: Path) -> None:
    jobs, info = resolve_workload("lublin", nodes=64, seed=5, jobs=100)
    assert jobs == generate_lublin(100, 64, seed=5)
    assert "Lublin" in info.description
    single, _ = resolve_workload("lublin1", nodes=64, seed=5, jobs=100)
    assert single == generate_lublin(100, 64, seed=5, interactive=False)
    _, info = resolve_workload("lublin", nodes=64, jobs=200, load=0.7)
    assert info.offered_load == pytest.approx(0.7)
    write_swf(tmp_path / "t.swf", jobs)
    from_swf, _ = resolve_workload(f"swf:{tmp_path / 't.swf'}", nodes=64)
    assert from_swf == jobs
    mix, _ = resolve_workload("mix:2", nodes=8)
    assert len(mix) == 4
    for bad in ("swf:", "mix:9", "nonsense", "mix:x"):
        with pytest.raises(WorkloadError, match="--workload"):
            resolve_workload(bad, nodes=8)
    with pytest.raises(WorkloadError, match="--load does not apply"):
        resolve_workload("mix:1", nodes=8, load=0.5)


@pytest.mark.skipif(not KTH.exists(), reason=f"shared traces not found at {KTH.parent}")
def test_kth_via_workload_argument() -> None:
    _, info = resolve_workload(f"swf:{KTH}", nodes=100)
    assert info.n_jobs == 28_481
    assert info.header is not None and info.header.max_procs == 100
    assert 0.3 < info.offered_load < 1.0
    with pytest.raises(WorkloadError, match="need up to 100 processors"):
        resolve_workload(f"swf:{KTH}", nodes=64, oversize="error")
    jobs, info = resolve_workload(f"swf:{KTH}", nodes=64, oversize="drop")
    assert info.dropped_jobs > 0 and len(jobs) == 28_481 - info.dropped_jobs
