"""The Slurm and PBS recipe (testbed/sweep/jobqueue.py): the job scripts dask-jobqueue makes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from testbed.sweep import daskconf
from testbed.sweep.errors import SweepUsageError
from testbed.sweep.jobqueue import make_cluster

ROOT = Path(__file__).resolve().parents[4]


def script(kind: str, **kw: object) -> str:
    cluster = make_cluster(kind, port=0, dashboard=":0", **kw)  # type: ignore[arg-type]
    try:
        text: str = cluster.job_script()
        assert cluster.scheduler_address.split(":")[-1] in text  # the workers find it
        return text
    finally:
        cluster.close()


def worker_line(text: str) -> str:
    (line,) = [x for x in text.splitlines() if "dask_worker" in x]
    return line


def test_slurm_job_runs_one_thread_workers_per_core_from_this_repository() -> None:
    text = script("slurm", cores=8, memory="32GB", walltime="02:00:00", queue="long",
                  account="proj7")  # fmt: skip
    for directive in ("#SBATCH -J cosched-sweep", "#SBATCH -p long", "#SBATCH -A proj7",
                      "#SBATCH --cpus-per-task=8", "#SBATCH -t 02:00:00"):  # fmt: skip
        assert directive in text, text
    assert f"cd {ROOT}" in text
    line = worker_line(text)
    assert line.startswith(f"{sys.executable} -m distributed.cli.dask_worker tcp://")
    assert "--nthreads 1" in line and "--nworkers 8" in line
    assert text.index(f"cd {ROOT}") < text.index(line)
    for name, value in daskconf.environment().items():  # the sweep settings, before the workers
        assert 0 <= text.find(f"export {name}={value}\n") < text.index(line), name


def test_pbs_job_asks_for_the_cores_memory_and_walltime() -> None:
    text = script("pbs", cores=4, memory="16GB", walltime="00:30:00", queue="workq")
    assert "#PBS -N cosched-sweep" in text and "#PBS -q workq" in text
    assert "#PBS -l select=1:ncpus=4:mem=" in text and "#PBS -l walltime=00:30:00" in text
    line = worker_line(text)
    assert "--nthreads 1" in line and "--nworkers 4" in line and sys.executable in line


def test_bad_recipe_input_is_one_line() -> None:
    with pytest.raises(SweepUsageError, match="batch system 'sge': not known"):
        make_cluster("sge", cores=4, memory="1GB", walltime="01:00:00")
    with pytest.raises(SweepUsageError, match="--cores 0"):
        make_cluster("slurm", cores=0, memory="1GB", walltime="01:00:00")
