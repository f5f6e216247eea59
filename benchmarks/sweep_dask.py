"""Where a Dask sweep's extra time goes, against the local pool (issue 27; docs/sweeps.md).

The same sweep of DHC fluid runs (benchmarks/sweep.py's) on the local pool of 2
worker processes and on a Dask LocalCluster of 2 one-thread workers, interleaved
(ABAB) in one invocation. Each run is wrapped to record, in its worker, its
process id, its start and end (wall clock) and the CPU time of its thread, so the
sweep's wall time splits into:

* the runs' own time: the sum over runs of their wall time in the worker, and
  of their CPU time (a run slowed in its worker, by the GIL or by other threads
  of the worker, shows here);
* idle worker time: 2 x the sweep's wall time minus the runs' wall time, split
  into the start (the sweep begins, a worker's first run has not), the gaps
  between a worker's runs, the tail (a worker's last run has ended, the other
  worker's has not) and, for both workers, the time after the last run ends
  (its result reaches the coordinator, the executor closes);
* where the runs' time in their workers went: on a CPU, waiting for one, and
  blocked (a thread that only computes blocks only on the GIL);
* CPU time of every process of the executor during the sweep (psutil): the
  coordinator's main thread, its other threads (a LocalCluster's scheduler and
  nannies and the Dask client run there, on event-loop threads), the Dask
  workers, the local pool's fork server and workers.

CPU time and context switches are robust to other work on the host, wall time
is not. Variants of the same Dask cluster, changed between its sweeps:
``--saturation X`` sets the scheduler's ``worker-saturation`` (Dask's default,
1.1, sends ceil(1.1 x 1) = 2 runs at a time to a one-thread worker);
``--no-profiler`` stops the workers' sampling profiler (every 10 ms);
``--in-thread`` also runs each run in the Dask worker's own task thread, as before
testbed/sweep/child.py (the coordinator submits ``worker.execute`` instead of
``child.run_in_child``): the run then shares its GIL with the worker's event loop.

    python benchmarks/sweep_dask.py --runs 24 --repeats 3 [--saturation 1.0] [--no-profiler]
        [--in-thread]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import psutil  # noqa: E402
from sweep import dhc_runs, spread  # noqa: E402

from testbed.experiment.dhc import study as dhcstudy  # noqa: E402
from testbed.sweep import RunSpec, SweepOptions, child, daskpool, run_sweep  # noqa: E402
from testbed.sweep.worker import Outcome, execute  # noqa: E402


def in_thread(spec: RunSpec, attempts: int) -> Outcome:
    """The Dask task before child.py: the run in the worker's task thread."""
    return execute(spec)


def switches() -> tuple[int, int]:
    """Voluntary and involuntary context switches of the calling thread so far."""
    path = f"/proc/self/task/{threading.get_native_id()}/status"
    got = dict(ln.split(":", 1) for ln in Path(path).read_text().splitlines() if ":" in ln)
    return int(got["voluntary_ctxt_switches"]), int(got["nonvoluntary_ctxt_switches"])


def schedstat() -> tuple[float, float]:
    """Seconds the calling thread has run on a CPU and waited for one (runnable, not running)."""
    on, wait, _ = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").read_text().split()
    return int(on) / 1e9, int(wait) / 1e9


def traced(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A DHC run, with where and when it ran, its CPU time, its thread's context
    switches (a thread that hands the GIL to another thread of its process switches
    voluntarily; one the kernel preempts, involuntarily) and its time on a CPU and
    waiting for one (the kernel's schedstat)."""
    v0, i0 = switches()
    on0, wait0 = schedstat()
    t0, c0 = time.time(), time.thread_time()
    out = dhcstudy.run_one(params, seed)
    c1, t1 = time.thread_time(), time.time()
    on1, wait1 = schedstat()
    v1, i1 = switches()
    return {"pid": os.getpid(), "t0": t0, "t1": t1, "cpu": c1 - c0, "vol": v1 - v0,
            "on": on1 - on0, "runq": wait1 - wait0,
            "invol": i1 - i0, "proc_cpu": time.process_time(),
            "size": len(json.dumps(out))}  # fmt: skip


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def tree(p: psutil.Process) -> dict[int, psutil.Process]:
    return {c.pid: c for c in p.children(recursive=True)}


def threads_cpu(me: psutil.Process) -> tuple[float, float]:
    """CPU time of this process's main thread and of its other threads."""
    main = threading.main_thread().native_id
    ts = me.threads()
    ours = sum(t.user_time + t.system_time for t in ts if t.id == main)
    return ours, sum(t.user_time + t.system_time for t in ts) - ours


def roles(kids: Mapping[int, psutil.Process]) -> dict[int, str]:
    """This process's children (:func:`tree`) by role. A LocalCluster's scheduler and nannies
    run in this process (on its event-loop thread); its workers are processes the nannies
    spawn."""
    out = {}
    for pid, p in kids.items():
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "forkserver" in cmd:
            out[pid] = "fork server"
        elif "testbed.sweep.child" in cmd:
            out[pid] = "dask run child"
        elif "spawn_main" in cmd:
            out[pid] = "dask worker"
        else:
            out[pid] = "other"
    return out


def sweep(work: list[RunSpec], kw: dict[str, Any], me: psutil.Process) -> dict[str, Any]:
    kids = tree(me)
    role = roles(kids)
    before = {pid: (role.get(pid, "other"), cpu(p)) for pid, p in kids.items()}
    main0, other0 = threads_cpu(me)
    t0 = time.time()
    out = run_sweep(work, SweepOptions(progress=False, **kw))
    t1 = time.time()
    assert out.ok(), out.failed
    main1, other1 = threads_cpu(me)
    procs: dict[str, float] = defaultdict(float)
    for pid, p in tree(me).items():
        if pid in before:
            with contextlib.suppress(psutil.Error):
                procs[before[pid][0]] += cpu(p) - before[pid][1]
    runs = [r for r in out.results if r is not None]
    if "workers" in kw:  # the pool's workers exited: their CPU from inside, at their last run
        last: dict[int, float] = {}
        for r in runs:
            last[r["pid"]] = max(last.get(r["pid"], 0.0), r["proc_cpu"])
        procs["pool worker"] = sum(last.values())
    procs["coordinator main thread"] = main1 - main0
    procs["coordinator other threads"] = other1 - other0
    by_pid: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r in runs:
        by_pid[r["pid"]].append((r["t0"], r["t1"]))
    start = gaps = tail = 0.0
    last = max(r["t1"] for r in runs)
    for spans in by_pid.values():
        spans.sort()
        start += spans[0][0] - t0
        gaps += sum(b[0] - a[1] for a, b in itertools.pairwise(spans))
        tail += last - spans[-1][1]
    return {
        "wall": t1 - t0,
        "run_wall": sum(r["t1"] - r["t0"] for r in runs),
        "run_cpu": sum(r["cpu"] for r in runs),
        "vol": sum(r["vol"] for r in runs),
        "on": sum(r["on"] for r in runs),
        "runq": sum(r["runq"] for r in runs),
        "invol": sum(r["invol"] for r in runs),
        "workers": len(by_pid),
        "runs_per_worker": sorted(len(v) for v in by_pid.values()),
        "start": start,
        "gaps": gaps,
        "tail": tail,
        "after": t1 - last,
        "procs": dict(procs),
        "size": statistics.mean(r["size"] for r in runs),
    }


def line(name: str, m: dict[str, Any]) -> str:
    procs = ", ".join(f"{k} {v:.2f}" for k, v in sorted(m["procs"].items()) if abs(v) >= 0.005)
    return (
        f"    {name}: wall {m['wall']:.2f} s; runs {m['run_wall']:.2f} s wall, "
        f"{m['run_cpu']:.2f} s CPU on {m['workers']} workers {m['runs_per_worker']}, "
        f"{m['vol']} voluntary and {m['invol']} involuntary switches; idle "
        f"start {m['start']:.2f} s, gaps {m['gaps']:.2f} s, "
        f"tail {m['tail']:.2f} s; after the last run {m['after']:.2f} s; "
        f"CPU s: {procs}"
    )


def profiler(dask_worker: Any, on: bool) -> None:
    """Start or stop a Dask worker's sampling profiler (every 10 ms, on its event loop)."""
    for name in ("profile", "profile-cycle"):
        pc = dask_worker.periodic_callbacks.get(name)
        if pc is not None:
            pc.start() if on else pc.stop()


def share(m: dict[str, Any], *procs: str, runs: bool = True) -> float:
    """CPU time of ``procs`` during a sweep, less the runs' own (``runs``), in % of a core."""
    used = sum(m["procs"].get(p, 0.0) for p in procs) - (m["run_cpu"] if runs else 0.0)
    return 100 * used / m["wall"]


def import_cost(module: str) -> float:
    """CPU seconds to import ``module`` here (a fresh Dask worker's first task pays it)."""
    c0 = time.process_time()
    importlib.import_module(module)
    return time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--gangs", type=int, default=6000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--saturation",
        type=float,
        default=None,
        help="also Dask with the scheduler's worker-saturation at this value",
    )
    ap.add_argument("--no-profiler", action="store_true",
                    help="also Dask with its workers' sampling profiler stopped")  # fmt: skip
    ap.add_argument("--in-thread", action="store_true",
                    help="also Dask with each run in the worker's thread")  # fmt: skip
    args = ap.parse_args()
    import distributed

    me = psutil.Process()
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    admin = distributed.Client(cluster, set_as_default=False)
    sched = cluster.scheduler
    sat0 = sched.WORKER_SATURATION
    base = dhc_runs(args.runs, args.gangs)
    work = [RunSpec(s.study, s.params, s.seed, traced, s.version) for s in base]
    print(f"sweep: {len(work)} DHC fluid runs of {args.gangs} gangs (32 PEs), each traced")
    dask = {"dask": cluster.scheduler_address}
    # (name, sweep options, the scheduler's worker-saturation, the workers' profiler on,
    # the run in a child process of the worker)
    execs: list[tuple[str, dict[str, Any], float, bool, bool]] = [
        ("pool", {"workers": 2}, sat0, True, True),
        (f"dask (saturation {sat0:g}, run in a child)", dask, sat0, True, True),
    ]
    if args.in_thread:
        execs.append((f"dask (saturation {sat0:g}, run in the worker's thread)", dask, sat0, True,
                      False))  # fmt: skip
    if args.saturation is not None:
        execs.append((f"dask (saturation {args.saturation:g})", dask, args.saturation, True, True))
    if args.no_profiler:
        execs.append((f"dask (saturation {sat0:g}, no profiler)", dask, sat0, False, True))
    got: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def measure(kw: dict[str, Any], sat: float, prof: bool, kid: bool, todo: list[RunSpec]) -> Any:
        sched.WORKER_SATURATION = sat
        admin.run(profiler, on=prof)
        daskpool.run_in_child = child.run_in_child if kid else in_thread  # type: ignore[attr-defined]
        return sweep(todo, kw, me)

    first = admin.run(import_cost, dhcstudy.__name__)
    print(f"first-task imports ({dhcstudy.__name__}) in each fresh Dask worker: "
          + ", ".join(f"{v:.3f} s CPU" for v in first.values()))  # fmt: skip
    try:
        for _, kw, sat, prof, kid in execs:  # warm: the fork server, the workers' children
            measure(kw, sat, prof, kid, work[:2])
        for rep in range(args.repeats):
            print(f"  repetition {rep + 1}:")
            for name, kw, sat, prof, kid in execs if rep % 2 == 0 else execs[::-1]:
                m = measure(kw, sat, prof, kid, work)
                got[name].append(m)
                print(line(name, m), flush=True)
    finally:
        admin.close()
        cluster.close()
    pool = got["pool"]
    print("summary (median, range over repetitions; ratios within a repetition):")
    for name, *_ in execs[1:]:
        ms = got[name]
        wall = [100 * (m["wall"] / p["wall"] - 1) for m, p in zip(ms, pool, strict=True)]
        rcpu = [100 * (m["run_cpu"] / p["run_cpu"] - 1) for m, p in zip(ms, pool, strict=True)]
        rwall = [100 * (m["run_wall"] / p["run_wall"] - 1) for m, p in zip(ms, pool, strict=True)]
        print(f"  {name} vs pool: wall {spread(wall, '{:+.1f} %')}; runs' CPU "
              f"{spread(rcpu, '{:+.1f} %')}; runs' wall in their workers "
              f"{spread(rwall, '{:+.1f} %')}")  # fmt: skip
    for name, *_ in execs:
        ms = got[name]
        if name == "pool":
            own = [share(m, "pool worker", "fork server", "coordinator main thread") for m in ms]
            idle_cluster = [share(m, "dask worker", "dask run child", "coordinator other threads",
                                  runs=False) for m in ms]  # fmt: skip
            extra = (f"; the idle Dask cluster meanwhile (workers, scheduler, nannies) "
                     f"{spread(idle_cluster, '{:.1f} %')} of a core")  # fmt: skip
        else:
            own = [share(m, "dask worker", "dask run child", "coordinator main thread",
                         "coordinator other threads") for m in ms]  # fmt: skip
            extra = " (the workers' event loops, the scheduler, the nannies, the client)"
        print(
            f"  {name}: the executor's CPU beyond the runs' own "
            f"{spread(own, '{:.1f} %')} of a core{extra}"
        )
    for name, *_ in execs:
        ms = got[name]
        idle = [2 * m["wall"] - m["run_wall"] for m in ms]
        per_s = [m["vol"] / m["run_wall"] for m in ms]
        print(f"  {name}: voluntary switches per second of run {spread(per_s, '{:.0f}')}; "
              f"idle worker time {spread(idle, '{:.2f} s')}; start "
              f"{spread([m['start'] for m in ms], '{:.2f} s')}; gaps "
              f"{spread([m['gaps'] for m in ms], '{:.2f} s')}; tail "
              f"{spread([m['tail'] for m in ms], '{:.2f} s')}; after the last run "
              f"{spread([m['after'] for m in ms], '{:.2f} s')}")  # fmt: skip
    print("  where the runs' wall time in their workers went (% of it): on a CPU, waiting for "
          "a CPU, blocked (asleep: a thread that only computes waits for the GIL)")  # fmt: skip
    for name, *_ in execs:
        ms = got[name]
        on = [100 * m["on"] / m["run_wall"] for m in ms]
        runq = [100 * m["runq"] / m["run_wall"] for m in ms]
        blocked = [100 - a - b for a, b in zip(on, runq, strict=True)]
        print(f"    {name}: on a CPU {spread(on, '{:.1f} %')}; waiting for a CPU "
              f"{spread(runq, '{:.1f} %')}; blocked {spread(blocked, '{:.1f} %')}")  # fmt: skip
    sizes = [m["size"] for ms in got.values() for m in ms]
    print(f"a run's result: {statistics.mean(sizes):.0f} bytes of JSON on average")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
