"""apps/mpilaunch.py's pure parts and ``cosched submit --mpi`` (the live run is
tests/integration/test_mpi_job.py)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from apps import mpilaunch
from testbed.commands import jobs


def test_the_data_network_holds_every_rank() -> None:
    assert mpilaunch.data_network(["10.211.0.1", "10.211.0.2"]) == "10.211.0.0/30"
    assert mpilaunch.data_network(["10.211.0.1", "10.211.0.9"]) == "10.211.0.0/28"
    assert mpilaunch.data_network(["10.211.0.5"]) == "10.211.0.5/32"


def test_mpirun_runs_one_process_per_node_through_us() -> None:
    argv = mpilaunch.mpirun_argv("/usr/bin/mpirun", ["10.0.0.1", "10.0.0.2"], ["./prog", "-x"])
    assert argv[:5] == ["/usr/bin/mpirun", "-n", "2", "--host", "10.0.0.1:1,10.0.0.2:1"]
    agent = argv[argv.index("plm_rsh_agent") + 1]
    assert agent.endswith("-m apps.mpilaunch --rsh")
    assert "--leave-session-attached" in argv  # the daemons stay in the job's cgroups
    assert argv[argv.index("oob_tcp_if_include") + 1] == "10.0.0.0/30"
    assert argv[-2:] == ["./prog", "-x"]


def test_rsh_refuses_a_host_outside_the_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k, v in {"COSCHED_RANK": "0", "COSCHED_SIZE": "2", "COSCHED_PORT": "20001",
                 "COSCHED_PEERS": "10.0.0.1,10.0.0.2"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    assert mpilaunch.main(["--rsh", "10.9.9.9", "orted"]) == 255
    assert "10.9.9.9 is not a node of this job" in capsys.readouterr().err


def test_outside_a_job_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COSCHED_RANK", raising=False)
    assert mpilaunch.main(["--", "true"]) == 2
    assert "use `cosched submit --mpi`" in capsys.readouterr().err


def _args(**kw: Any) -> Any:
    base = {"spec": None, "argv": ["--", "python3", "p.py"], "size": 2, "job_class": None,
            "name": None, "estimate": None, "cwd": None, "exclusive": False, "env": [],
            "run_as": None, "tcp": None, "mpi": True}  # fmt: skip
    base.update(kw)
    return type("A", (), base)()


def test_submit_mpi_wraps_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs.shutil, "which", lambda name: "/usr/bin/mpirun")
    spec = jobs.build_spec(_args())
    assert spec["argv"] == [sys.executable, "-m", "apps.mpilaunch", "--", "python3", "p.py"]
    assert jobs.build_spec(_args(mpi=False))["argv"] == ["python3", "p.py"]


def test_submit_mpi_without_open_mpi_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs.shutil, "which", lambda name: None)
    with pytest.raises(jobs.CliError, match="--mpi: mpirun is not installed"):
        jobs.build_spec(_args())
