"""The synthetic program of Wiseman & Feitelson 2003 Fig. 6 as real processes on 127.0.0.1.

No root needed: ranks are ordinary subprocesses talking TCP on the loopback.
The CPU-ratio checks are loose on purpose (no test fails because the machine
is busy): I/O-bound means CPU well below wall, compute-bound means close to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from common.ports import free_port

ROOT = Path(__file__).resolve().parents[3]


def _launch(rank: int, size: int, port: int, args: list[str], tmp: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.update(
        COSCHED_RANK=str(rank),
        COSCHED_SIZE=str(size),
        COSCHED_RANK0_ADDR="127.0.0.1",
        COSCHED_PORT=str(port),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "apps.synthetic", *args, "--dir", str(tmp)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_job(size: int, args: list[str], tmp: Path) -> list[dict[str, Any]]:
    port = free_port()
    # Start the last rank first: the barrier must cope with rank 0 arriving late.
    procs = [_launch(r, size, port, args, tmp) for r in reversed(range(size))]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return sorted(results, key=lambda r: r["rank"])


def test_two_ranks_agree_on_the_barrier_count(tmp_path: Path) -> None:
    res = _run_job(2, ["--iterations", "20", "--gcomp", "20000", "--gio", "1"], tmp_path)
    assert [r["rank"] for r in res] == [0, 1]
    assert res[0]["barriers"] == res[1]["barriers"] == 20
    assert all(r["barriers_per_second"] > 0 for r in res)
    assert list(tmp_path.iterdir()) == []  # per-rank directories removed


def test_duration_stops_every_rank_at_the_same_barrier(tmp_path: Path) -> None:
    res = _run_job(2, ["--duration", "0.5", "--gcomp", "20000"], tmp_path)
    assert res[0]["barriers"] == res[1]["barriers"] > 1
    assert res[0]["seconds"] >= 0.5  # rank 0's clock decides
    assert res[1]["seconds"] >= 0.4  # rank 1 started timing a moment later


@pytest.mark.slow
def test_io_bound_uses_little_cpu_and_compute_bound_uses_it_all(tmp_path: Path) -> None:
    # cpu_ratio_alone takes the rank's run-queue waits out of its wall time, so a busy
    # host (CI flaked when the two runs saw different loads) does not move either ratio
    io = _run_job(1, ["--duration", "1.5", "--gcomp", "0", "--gio", "20"], tmp_path)[0]
    cpu = _run_job(1, ["--duration", "1.5", "--gcomp", "200000", "--gio", "0"], tmp_path)[0]
    assert io["cpu_ratio_alone"] < 0.75, io
    assert cpu["cpu_ratio_alone"] > 0.85, cpu
    assert cpu["cpu_ratio_alone"] - io["cpu_ratio_alone"] > 0.25, (io, cpu)


def test_a_rank_that_dies_makes_the_others_fail_clearly(tmp_path: Path) -> None:
    port = free_port()
    args = ["--iterations", "100000", "--gcomp", "10000", "--connect-timeout", "20"]
    root = _launch(0, 2, port, args, tmp_path)
    peer = _launch(1, 2, port, args, tmp_path)
    try:
        time.sleep(2.0)  # let the job connect and pass some barriers
        peer.kill()
        peer.wait(30)
        _, err = root.communicate(timeout=60)
    finally:
        root.kill()
    assert root.returncode == 1
    assert err.startswith("synthetic: rank 0: barrier") and "rank 1: connection" in err, err


def test_presets_have_the_cpu_share_they_claim(tmp_path: Path) -> None:
    """compute near all of a CPU, io far below it, fine in between: each as the rank would
    use an idle host (``cpu_ratio_alone`` takes its run-queue waits out of the wall time, so a
    busy host does not change it)."""
    comp = _run_job(1, ["--preset", "compute", "--duration", "1.5"], tmp_path)[0]
    io = _run_job(1, ["--preset", "io", "--duration", "1.5"], tmp_path)[0]
    fine = _run_job(2, ["--preset", "fine", "--duration", "1.5"], tmp_path)
    assert comp["params"]["gio"] == 0 and comp["cpu_ratio_alone"] > 0.85, comp
    # 75 ms of compute per barrier on this machine, whatever G_comp that takes
    assert abs(comp["params"]["gcomp"] * comp["ns_per_iteration"] * 1e-9 - 0.075) < 0.001
    assert io["params"]["gio"] == 20 and io["params"]["device_latency"] == pytest.approx(0.00375)
    assert io["cpu_ratio_alone"] < 0.3, io
    # fine: one G_comp for the job, sized from the barrier it measured
    assert fine[0]["fine"] == fine[1]["fine"]
    f = fine[0]["fine"]
    assert f["barrier_ms"] > 0 and f["gcomp"] >= 0
    mean = (fine[0]["cpu_ratio_alone"] + fine[1]["cpu_ratio_alone"]) / 2
    if f["compute_ms"] > 0:  # 45 % reachable here: the barrier alone uses less
        assert 0.2 < mean < 0.7, fine
    assert mean < comp["cpu_ratio_alone"], (fine, comp)


def test_qcrd_phases_show_in_its_cpu_use(tmp_path: Path) -> None:
    (r,) = _run_job(1, ["--preset", "qcrd", "--qcrd-phases", "0.15,0.3,0.4"], tmp_path)
    kinds = [p["kind"] for p in r["phases"]]
    assert kinds == ["io", "cpu"] * 12 + ["io"]
    cpu = [p["cpu_ratio"] for p in r["phases"] if p["kind"] == "cpu"]
    io = [p["cpu_ratio"] for p in r["phases"] if p["kind"] == "io"]
    # every CPU phase uses more of the CPU than every I/O phase
    assert min(cpu) > max(io), r["phases"]
    assert r["phases"][-1]["seconds"] > max(p["seconds"] for p in r["phases"][:-1:2])
    assert r["barriers"] == sum(p["barriers"] for p in r["phases"])
