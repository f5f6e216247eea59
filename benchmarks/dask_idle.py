"""What an idle Dask cluster of 2 one-thread workers costs the host, with Dask's default
settings and with the sweep settings (testbed/sweep/daskconf.py; docs/sweeps.md).

Each cluster is started in a fresh Python process (``--serve``) so that the process
tree measured is the cluster's alone: a LocalCluster (scheduler and nannies in that
process, a worker process per nanny) and, without nannies, Dask's SubprocessCluster
(the scheduler and each worker in a process of its own, as ``dask scheduler`` and
``dask worker --no-nanny`` would run them). The settings reach a LocalCluster through
``dask.config`` (its nannies hand them to the workers) and a SubprocessCluster
through the ``DASK_...`` variables of ``daskconf.environment()``, as a cluster
started by hand would get them. After the cluster has been up for ``--settle``
seconds, the CPU time of its whole process tree over ``--seconds`` seconds is
printed as a share of one core; the variants run in turn, ``--repeats`` times.
CPU time is the cluster's own whatever else the host runs.

    python benchmarks/dask_idle.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import psutil  # noqa: E402
from sweep import spread  # noqa: E402

from testbed.sweep import daskconf  # noqa: E402

VARIANTS = {
    "LocalCluster (nannies), Dask's defaults": ("local", False),
    "LocalCluster (nannies), sweep settings": ("local", True),
    "no nannies (SubprocessCluster), Dask's defaults": ("subprocess", False),
    "no nannies (SubprocessCluster), sweep settings": ("subprocess", True),
}


def serve(kind: str, settings: bool) -> None:
    """In the fresh process: start the cluster, say its address, wait for a line."""
    import distributed
    from distributed.deploy.subprocess import SubprocessCluster

    if kind == "local":
        if settings:
            cluster = daskconf.local_cluster(2, dashboard_address=":0")
        else:
            local: Any = distributed.LocalCluster  # untyped constructor
            cluster = local(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
    else:  # the settings, if wanted, are in this process's environment
        cluster = SubprocessCluster(
            n_workers=2,
            threads_per_worker=1,
            worker_class="distributed.Worker",
            dashboard_address=":0",
        )
    print(cluster.scheduler_address, flush=True)
    sys.stdin.readline()
    cluster.close()


def tree_cpu(p: psutil.Process) -> float:
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def measure(kind: str, settings: bool, settle: float, seconds: float) -> tuple[float, int]:
    env = dict(os.environ)
    if settings and kind == "subprocess":
        env.update(daskconf.environment())
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "1" if settings else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if not proc.stdout.readline():
            raise SystemExit(f"the {kind} cluster did not start")
        time.sleep(settle)
        p = psutil.Process(proc.pid)
        n = len(p.children(recursive=True)) + 1
        c0, t0 = tree_cpu(p), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = tree_cpu(p), time.perf_counter()
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return 100 * (c1 - c0) / (t1 - t0), n


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3] == "1")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds up before measuring")
    ap.add_argument("--seconds", type=float, default=8.0, help="seconds measured")
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"sweep settings: {daskconf.SETTINGS}")
    got: dict[str, list[float]] = {name: [] for name in VARIANTS}
    procs: dict[str, int] = {}
    for rep in range(args.repeats):
        names = list(VARIANTS) if rep % 2 == 0 else list(VARIANTS)[::-1]
        for name in names:
            pct, procs[name] = measure(*VARIANTS[name], args.settle, args.seconds)
            got[name].append(pct)
            print(f"  repetition {rep + 1}: {name}: {pct:.1f} % of a core", flush=True)
    print(f"an idle cluster of 2 one-thread workers, CPU over {args.seconds:g} s:")
    for name, xs in got.items():
        print(f"  {name} ({procs[name]} processes): {spread(xs, '{:.1f} %')} of a core")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
