"""The synthetic program of Wiseman & Feitelson 2003 Fig. 6 on the message library (unit level)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.synthetic import (
    PAPER_BYTES,
    PAPER_GCOMP,
    PAPER_ITERATIONS,
    Config,
    ConfigError,
    build_parser,
    compute,
    config_from,
    io_phase,
    main,
    run,
)
from tests.support.apps import synthetic_cfg

# -- program ----------------------------------------------------------------


def test_defaults_are_the_papers_values_and_a_single_rank() -> None:
    cfg = synthetic_cfg([], {})
    assert (cfg.rank, cfg.size, cfg.gcomp, cfg.gio, cfg.nbytes) == (
        0,
        1,
        PAPER_GCOMP,
        0,
        PAPER_BYTES,
    )
    assert cfg.iterations == PAPER_ITERATIONS and cfg.fsync


def test_environment_gives_rank_and_flags_override_it() -> None:
    env = {
        "COSCHED_RANK": "2",
        "COSCHED_SIZE": "4",
        "COSCHED_RANK0_ADDR": "10.0.0.1",
        "COSCHED_PORT": "7001",
    }
    cfg = synthetic_cfg([], env)
    assert (cfg.rank, cfg.size, cfg.rank0_addr, cfg.port) == (2, 4, "10.0.0.1", 7001)
    cfg = synthetic_cfg(["--rank", "3", "--port", "7002", "--rank0-addr", "h0", "--no-fsync"], env)
    assert (cfg.rank, cfg.size, cfg.rank0_addr, cfg.port, cfg.fsync) == (3, 4, "h0", 7002, False)


def test_duration_alone_means_no_iteration_bound() -> None:
    cfg = synthetic_cfg(["--duration", "5"], {})
    assert cfg.iterations is None and cfg.duration == 5


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            [],
            {"COSCHED_RANK": "x", "COSCHED_SIZE": "2"},
            "environment COSCHED_RANK='x' is not an integer",
        ),
        (
            [],
            {"COSCHED_RANK": "2", "COSCHED_SIZE": "2", "COSCHED_PORT": "1"},
            "rank 2 is outside 0..1",
        ),
        ([], {"COSCHED_SIZE": "2"}, "needs rank 0's barrier port: set COSCHED_PORT"),
        ([], {"COSCHED_SIZE": "0"}, "job size must be at least 1"),
        ([], {"COSCHED_SIZE": "2", "COSCHED_PORT": "70000"}, "port 70000 is outside"),
        (["--gio", "-1"], {}, "--gio must be >= 0"),
        (["--duration", "0"], {}, "--duration must be > 0"),
        (["--qcrd-work"], {}, "--qcrd-work needs --preset qcrd"),
        (["--fine-target", "0.5"], {}, "--fine-target needs --preset fine"),
        (["--device", "node"], {}, "--device node needs the node's I/O device"),
    ],
)
def test_bad_configuration_is_one_clear_line(
    argv: list[str], env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        synthetic_cfg(argv, env)
    assert main(argv, env) == 2
    err = capsys.readouterr().err
    assert err.startswith("synthetic: ") and len(err.strip().splitlines()) == 1


def test_compute_is_a_fixed_loop() -> None:
    assert compute(0) == 1
    assert compute(1000) == compute(1000)
    assert compute(3) == (((1 * 75 + 74) * 75 + 74) * 75 + 74) & 0xFFFF


def test_io_phase_writes_and_removes_its_files(tmp_path: Path) -> None:
    io_phase(tmp_path, "t", 5, b"x" * 100, fsync=True)
    assert list(tmp_path.iterdir()) == []


def test_single_rank_run_reports_and_cleans_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    argv = ["--iterations", "3", "--gcomp", "1000", "--gio", "2", "--bytes", "10"]
    assert main([*argv, "--dir", str(tmp_path), "--report", str(report)], {}) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == json.loads(report.read_text())
    assert line["rank"] == 0 and line["barriers"] == 3 and line["barriers_per_second"] > 0
    assert {"seconds", "cpu_seconds"} <= line.keys()
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # work dir removed


def test_duration_stops_at_a_barrier() -> None:
    res = run(Config(iterations=None, duration=0.05, gcomp=1000))
    assert res["barriers"] >= 1 and res["seconds"] >= 0.05


@pytest.mark.parametrize("flag", ["--loop-cost", "--calibrate"])
def test_loop_cost_prints_costs_and_a_suggestion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str
) -> None:
    assert main([flag, "--gcomp", "20000", "--target", "0.1", "--dir", str(tmp_path)], {}) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["ns_per_iteration"] > 0 and res["suggested_gcomp"] > 0
    assert res["file_fsync"]["ms_per_file"] > 0


def test_emulated_device_blocks_without_cpu() -> None:
    # 10 files x 5 ms per barrier: the rank waits ~50 ms per barrier, nearly all off-CPU
    res = run(Config(iterations=6, gcomp=0, gio=10, nbytes=100, device_latency=0.005))
    assert res["seconds"] >= 6 * 10 * 0.005
    assert res["cpu_ratio"] < 0.3
    assert res["params"]["device_latency"] == 0.005


def test_comm_flags_are_checked() -> None:
    with pytest.raises(ConfigError, match="--msg-bytes and --comm-rounds must be >= 0"):
        synthetic_cfg(["--msg-bytes", "-1"], {})
    with pytest.raises(ConfigError, match="COSCHED_PEERS names 1 addresses for 2 ranks"):
        synthetic_cfg(
            [], {"COSCHED_SIZE": "2", "COSCHED_PORT": "7000", "COSCHED_PEERS": "10.0.0.1"}
        )
    with pytest.raises(ConfigError, match="COSCHED_WAIT"):
        synthetic_cfg([], {"COSCHED_WAIT": "nap"})


def test_spin_us_sets_spin_blocks_spin_time_over_the_environment() -> None:
    # gang policies' agents set no COSCHED_WAIT/COSCHED_SPIN_US and a job's spec may not:
    # the flags are how a job under paired gang chooses spin-block (issue 31 item 2)
    cfg = synthetic_cfg(["--wait", "spinblock", "--spin-us", "2000"], {"COSCHED_SPIN_US": "7"})
    assert (cfg.wait.recv, cfg.wait.spin_us) == ("spinblock", 2000.0)
    assert synthetic_cfg([], {"COSCHED_SPIN_US": "7"}).wait.spin_us == 7.0
    for bad in ("-1", "nan", "2e7"):
        with pytest.raises(ConfigError, match=r"--spin-us .*: a spin time in 0\.\.10000000 us"):
            synthetic_cfg(["--wait", "spinblock", "--spin-us", bad], {})


def test_negative_device_latency_is_refused() -> None:
    with pytest.raises(ConfigError, match="--device-latency must be >= 0"):
        config_from(build_parser().parse_args(["--device-latency", "-1"]), {})


def test_qcrd_work_runs_each_phase_as_a_fixed_number_of_barriers() -> None:
    # 0.15 s of I/O and 0.3 s of compute per phase: 0.15 / (20 x 3.75 ms) = 2 barriers and
    # 0.3 / 75 ms = 4, whatever the wall time they take
    cfg = synthetic_cfg(["--preset", "qcrd", "--qcrd-work", "--qcrd-phases", "0.15,0.3,0.3"], {})
    assert cfg.qcrd_work and len(cfg.qcrd) == 25
    res = run(cfg)
    counts = [(ph["kind"], ph["barriers"]) for ph in res["phases"]]
    assert counts[:2] == [("io", 2), ("cpu", 4)] and counts[-1] == ("io", 4)


def test_fine_target_sizes_the_compute_for_the_share() -> None:
    cfg = synthetic_cfg(["--preset", "fine", "--fine-target", "0.8"], {"COSCHED_SIZE": "2",
               "COSCHED_PORT": "7000"})  # fmt: skip
    assert cfg.fine_target == 0.8 and cfg.fine_probe
    with pytest.raises(ConfigError, match="in \\(0, 1\\)"):
        synthetic_cfg(["--preset", "fine", "--fine-target", "1.5"], {"COSCHED_SIZE": "2",
             "COSCHED_PORT": "7000"})  # fmt: skip
