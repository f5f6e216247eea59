"""The synthetic program of seed 000 Fig. 6 and its barrier through rank 0 (unit level)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from apps.barrier import Barrier, BarrierError
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


def _peers(
    port: int,
    size: int,
    rounds: int,
    out: dict[int, list[bool]],
    errors: list[str],
    ranks: list[int] | None = None,
) -> list[threading.Thread]:
    def rank_main(rank: int) -> None:
        try:
            with Barrier(rank=rank, size=size, port=port, connect_timeout=10) as b:
                out[rank] = [b.wait() for _ in range(rounds)]
        except BarrierError as exc:
            errors.append(str(exc))

    return [threading.Thread(target=rank_main, args=(r,)) for r in (ranks or range(1, size))]


def test_three_ranks_pass_barriers_and_agree_on_stop() -> None:
    root = Barrier(rank=0, size=3, port=0, connect_timeout=10)
    root.listen()
    out: dict[int, list[bool]] = {}
    errors: list[str] = []
    threads = _peers(root.port, 3, 4, out, errors)
    for t in threads:
        t.start()
    with root:
        decided = [root.wait(stop=(k == 3)) for k in range(4)]
    for t in threads:
        t.join(10)
    assert not errors
    assert decided == [False, False, False, True]
    assert out == {1: decided, 2: decided}
    assert root.count == 4


def test_barrier_really_waits_for_the_slowest_rank() -> None:
    root = Barrier(rank=0, size=2, port=0, connect_timeout=10)
    root.listen()
    released = threading.Event()
    arrived = threading.Event()

    def late_peer() -> None:
        with Barrier(rank=1, size=2, port=root.port, connect_timeout=10) as b:
            arrived.wait(10)
            assert not released.is_set()  # rank 0 is still blocked in wait()
            b.wait()

    t = threading.Thread(target=late_peer)
    t.start()
    with root:
        arrived.set()
        root.wait()
        released.set()
    t.join(10)


def test_peer_started_before_rank_0_retries_until_it_listens() -> None:
    with socket.socket() as s:  # a port that is free now, taken later by rank 0
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out: dict[int, list[bool]] = {}
    errors: list[str] = []
    threads = _peers(port, 2, 2, out, errors)
    threads[0].start()
    threading.Event().wait(0.3)
    with Barrier(rank=0, size=2, port=port, connect_timeout=10) as root:
        root.wait()
        root.wait()
    threads[0].join(10)
    assert not errors and out == {1: [False, False]}


def test_missing_rank_is_a_clear_error_after_the_timeout() -> None:
    root = Barrier(rank=0, size=3, port=0, connect_timeout=0.5)
    root.listen()
    out: dict[int, list[bool]] = {}
    errors: list[str] = []
    threads = _peers(root.port, 3, 0, out, errors, ranks=[1])  # rank 2 never shows up
    for t in threads:
        t.start()
    with pytest.raises(BarrierError, match=r"ranks \[2\] did not connect within 0.5 s"):
        root.open()
    root.close()
    for t in threads:
        t.join(10)


def test_unreachable_rank_0_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = Barrier(rank=1, size=2, port=port, connect_timeout=0.3)
    with pytest.raises(
        BarrierError, match=r"cannot reach rank 0 at 127\.0\.0\.1:.*is rank 0 running"
    ):
        b.open()


def test_size_mismatch_is_refused_with_the_reason() -> None:
    root = Barrier(rank=0, size=2, port=0, connect_timeout=1.0)
    root.listen()
    errors: list[str] = []

    def wrong() -> None:
        try:
            Barrier(rank=1, size=3, port=root.port, connect_timeout=5).open()
        except BarrierError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=wrong)
    t.start()
    with pytest.raises(BarrierError, match="did not connect"):
        root.open()
    t.join(10)
    root.close()
    assert errors and "size mismatch: rank 0 has size 2, rank 1 says 3" in errors[0]


def test_peer_dying_inside_a_barrier_names_the_rank() -> None:
    root = Barrier(rank=0, size=2, port=0, connect_timeout=10)
    root.listen()

    def dies() -> None:
        b = Barrier(rank=1, size=2, port=root.port, connect_timeout=10).open()
        b.close()

    t = threading.Thread(target=dies)
    t.start()
    with root, pytest.raises(BarrierError, match="barrier 0: rank 1: connection closed"):
        root.wait()
    t.join(10)


def test_bad_rank_and_size_are_refused() -> None:
    with pytest.raises(BarrierError, match=r"outside 0\.\.1"):
        Barrier(rank=2, size=2, port=1)
    with pytest.raises(BarrierError, match="COSCHED_PORT"):
        Barrier(rank=1, size=2, port=0)


def test_single_rank_barrier_needs_no_network() -> None:
    with Barrier(rank=0, size=1) as b:
        assert b.wait() is False and b.wait(stop=True) is True
    assert b.count == 2


# -- program ----------------------------------------------------------------


def _cfg(argv: list[str], env: dict[str, str]) -> Config:
    return config_from(build_parser().parse_args(argv), env)


def test_defaults_are_the_papers_values_and_a_single_rank() -> None:
    cfg = _cfg([], {})
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
    cfg = _cfg([], env)
    assert (cfg.rank, cfg.size, cfg.rank0_addr, cfg.port) == (2, 4, "10.0.0.1", 7001)
    cfg = _cfg(["--rank", "3", "--port", "7002", "--rank0-addr", "h0", "--no-fsync"], env)
    assert (cfg.rank, cfg.size, cfg.rank0_addr, cfg.port, cfg.fsync) == (3, 4, "h0", 7002, False)


def test_duration_alone_means_no_iteration_bound() -> None:
    cfg = _cfg(["--duration", "5"], {})
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
    ],
)
def test_bad_configuration_is_one_clear_line(
    argv: list[str], env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _cfg(argv, env)
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


def test_calibrate_prints_costs_and_a_suggestion(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (
        main(["--calibrate", "--gcomp", "20000", "--target", "0.1", "--dir", str(tmp_path)], {})
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert res["ns_per_iteration"] > 0 and res["suggested_gcomp"] > 0
    assert res["file_fsync"]["ms_per_file"] > 0


def test_emulated_device_blocks_without_cpu() -> None:
    # 10 files x 5 ms per barrier: the rank waits ~50 ms per barrier, nearly all off-CPU
    res = run(Config(iterations=6, gcomp=0, gio=10, nbytes=100, device_latency=0.005))
    assert res["seconds"] >= 6 * 10 * 0.005
    assert res["cpu_ratio"] < 0.3
    assert res["params"]["device_latency"] == 0.005


def test_negative_device_latency_is_refused() -> None:
    with pytest.raises(ConfigError, match="--device-latency must be >= 0"):
        config_from(build_parser().parse_args(["--device-latency", "-1"]), {})
