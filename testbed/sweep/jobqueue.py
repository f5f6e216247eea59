"""Dask workers for cosched sweeps on a Slurm or PBS cluster, through dask-jobqueue.

Run on a login node of the cluster, from this repository's environment on a file
system the compute nodes share (docs/sweeps.md, "On a Slurm or PBS cluster")::

    python -m testbed.sweep.jobqueue slurm --jobs 4 --cores 32 --memory 64GB \\
        --walltime 04:00:00 --queue normal
    # prints: scheduler tcp://10.1.2.3:8786 ... then, in another shell:
    cosched experiment run experiments/dhc.toml --dask tcp://10.1.2.3:8786

It starts a Dask scheduler here and submits ``--jobs`` batch jobs, each running
``--cores`` worker processes of one thread (simulated runs are pure Python, so a
process per core) with the same Python as this command, started in this
repository. ``--print-script`` prints the job script and submits nothing.
Ctrl-C cancels the jobs and stops the scheduler.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from common.errors import CoschedError
from testbed.sweep import daskconf
from testbed.sweep.errors import SweepUsageError

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("slurm", "pbs")


def make_cluster(
    kind: str,
    *,
    cores: int,
    memory: str,
    walltime: str,
    queue: str | None = None,
    account: str | None = None,
    interface: str | None = None,
    port: int = 8786,
    dashboard: str = ":8787",
    python: str = sys.executable,
) -> Any:
    """A dask-jobqueue cluster whose jobs run ``cores`` one-thread cosched workers each."""
    if kind not in KINDS:
        raise SweepUsageError(f"batch system {kind!r}: not known", fix=f"one of {', '.join(KINDS)}")
    if cores < 1:
        raise SweepUsageError(f"--cores {cores}: a job needs at least one", fix="e.g. --cores 32")
    import dask
    from dask_jobqueue.pbs import PBSCluster
    from dask_jobqueue.slurm import SLURMCluster

    cls = SLURMCluster if kind == "slurm" else PBSCluster
    exports = [f"export {k}={v}" for k, v in sorted(daskconf.environment().items())]
    with dask.config.set(daskconf.SETTINGS):  # the scheduler, started here
        return cls(
            cores=cores,
            processes=cores,  # one process per core, one thread each: the runs hold the GIL
            memory=memory,
            walltime=walltime,
            queue=queue,
            account=account,
            interface=interface,
            python=python,
            job_name="cosched-sweep",
            job_script_prologue=[f"cd {ROOT}", *exports],  # this repository; the settings
            scheduler_options={"port": port, "dashboard_address": dashboard},
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.sweep.jobqueue",
        description="Start a Dask scheduler here and cosched workers as Slurm or PBS jobs.",
    )
    ap.add_argument("kind", choices=KINDS, help="the batch system")
    ap.add_argument("--jobs", type=int, default=1, help="batch jobs to submit (default 1)")
    ap.add_argument("--cores", type=int, required=True, help="cores per job = workers per job")
    ap.add_argument("--memory", required=True, help="memory per job, e.g. 64GB")
    ap.add_argument("--walltime", default="04:00:00", help="per job (default 04:00:00)")
    ap.add_argument("--queue", default=None, help="queue or partition")
    ap.add_argument("--account", default=None, help="account or project to charge")
    ap.add_argument("--interface", default=None, help="network interface the nodes reach")
    ap.add_argument("--port", type=int, default=8786, help="scheduler port (default 8786)")
    ap.add_argument("--dashboard", default=":8787", help="dashboard address (default :8787)")
    ap.add_argument("--print-script", action="store_true", help="print the job script only")
    args = ap.parse_args(argv)
    try:
        cluster = make_cluster(
            args.kind,
            cores=args.cores,
            memory=args.memory,
            walltime=args.walltime,
            queue=args.queue,
            account=args.account,
            interface=args.interface,
            port=args.port,
            dashboard=args.dashboard,
        )
    except CoschedError as e:
        print(f"jobqueue: error: {e}", file=sys.stderr)
        return e.exit_code
    try:
        if args.print_script:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.jobs)
        print(f"scheduler {cluster.scheduler_address}; dashboard {cluster.dashboard_link}")
        print(f"{args.jobs} job(s) of {args.cores} workers submitted; in another shell:")
        print(f"  cosched experiment run SPEC.toml --dask {cluster.scheduler_address}")
        print("Ctrl-C cancels the jobs and stops the scheduler.")
        while True:
            time.sleep(60)
    except KeyboardInterrupt:
        return 130
    finally:
        cluster.close()


if __name__ == "__main__":
    raise SystemExit(main())
