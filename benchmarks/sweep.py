"""Sweep executors (issue 27, "Targets"): what running a study's runs in parallel buys.

* Speed-up of 2 local worker processes over 1 (this process) on a sweep of
  ``--runs`` DHC fluid runs (Feitelson & Rudolph 1996's simulation, about a
  second each). Target >= 1.8x on a 2-core machine.
* A Dask LocalCluster of 2 one-thread worker processes, started with the sweep
  settings (testbed/sweep/daskconf.py), against the local pool of
  2 on the same sweep. Target: within 10 %. A second LocalCluster with Dask's
  default settings is timed in the same repetitions, and each executor's
  machinery CPU is printed (the CPU time of its processes but those running the
  runs: coordinator, scheduler, nannies, client, Dask workers, fork server).
  The cluster is up only for Dask's sweeps
  (a pool user runs no Dask cluster; its idle CPU would slow the pool) and for one
  more sweep of the pool, which shows what an idle cluster costs the pool (the way
  this benchmark compared before 2026-11-27). The cluster's start-up is untimed and
  printed apart; after it each worker starts its run child (testbed/sweep/child.py)
  with one short run, as the pool's fork server is warmed by two runs before any
  timing. Each timed sweep is one call of ``run_sweep`` whatever the executor: the
  pool's includes forking its workers, Dask's connecting a client and checking the
  workers' code; what a two-run sweep costs each is printed (``start-up and close``).
* Executor overhead per run: a sweep of ``--trivial`` runs that do nothing,
  wall time per run, for each executor, with and without a result store.
  Target < 50 ms.

The host is shared: every repetition measures the executors side by side in
an interleaved order (1, pool, pool beside an idle cluster, Dask, Dask with
its defaults, then backwards), and each ratio is taken within one repetition;
printed are the median and the range over
``--repeats`` repetitions, with the load average before and after. Each
repetition also measures what two processes get from the host at that moment:
the same pure-Python loop run twice one after the other and twice at once
(``host 2-process capacity``; 2.0 on an idle 2-core machine). Other work on
the host caps the executors' speed-up at that figure, so it is printed beside
it, with the speed-up as a share of it.

    python benchmarks/sweep.py                 # 24 runs, 3 repetitions
    python benchmarks/sweep.py --runs 20 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed.experiment.dhc import study as dhcstudy  # noqa: E402
from testbed.sweep import RunSpec, SweepOptions, daskconf, run_sweep  # noqa: E402

SPEEDUP_TARGET = 1.8
DASK_TARGET = 0.10
OVERHEAD_TARGET = 0.050  # s per run


def nothing(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    return {"i": params["i"]}


def dhc_runs(n: int, gangs: int) -> list[RunSpec]:
    """``n`` DHC runs of similar length: every design, loads 0.4-0.6, any-thread requests."""
    spec = dhcstudy.DhcSpec(gangs=gangs, loads=[0.4, 0.5, 0.6], point_loads=[])
    runs = [r for r in dhcstudy.runs(spec) if r.family != "balancing-pe0"]
    return [dhcstudy.run_spec(r, gangs) for r in runs[:n]]


SPIN = "n = 0\nfor i in range({}):\n    n += i * i\n"


def capacity(loops: int) -> float:
    """Two runs of the same loop one after the other over two at once: what a second
    process gets from the host now (2.0 when two cores are free)."""
    cmd = [sys.executable, "-c", SPIN.format(loops)]
    t0 = time.perf_counter()
    for _ in range(2):
        subprocess.run(cmd, check=True)
    serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    for pr in procs:
        pr.wait()
    return serial / (time.perf_counter() - t0)


RUNNERS = ("multiprocessing.forkserver", "testbed.sweep.child import serve")


def machinery() -> dict[int, float]:
    """CPU seconds of this process and its descendants that run no runs: the coordinator
    (a LocalCluster's scheduler and nannies, the Dask client), the fork server, the Dask
    workers; not the pool's workers (the fork server's children) nor the Dask workers'
    run children (testbed/sweep/child.py)."""
    me = psutil.Process()
    out: dict[int, float] = {}
    skip: set[int] = set()
    for p in [me, *me.children(recursive=True)]:
        try:
            if p.pid in skip or (p.ppid() in skip):
                skip.add(p.pid)
                continue
            cmd = " ".join(p.cmdline())
            if RUNNERS[0] in cmd:  # the fork server's own CPU counts, its workers' do not
                skip.update(c.pid for c in p.children(recursive=True))
            elif RUNNERS[1] in cmd:
                skip.add(p.pid)
                continue
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            continue
    return out


def timed(specs: list[RunSpec], cpu: list[float] | None = None, **kw: Any) -> float:
    """The sweep's wall time; appends to ``cpu`` the CPU of the executor's machinery."""
    c0 = machinery() if cpu is not None else {}
    t0 = time.perf_counter()
    out = run_sweep(specs, SweepOptions(progress=False, **kw))
    assert out.ok(), out.failed
    wall = time.perf_counter() - t0
    if cpu is not None:
        c1 = machinery()
        cpu.append(sum(v - c0.get(pid, 0.0) for pid, v in c1.items()))
    return wall


def spread(xs: list[float], fmt: str) -> str:
    return f"median {fmt.format(statistics.median(xs))} (range {fmt.format(min(xs))}-" + (
        f"{fmt.format(max(xs))}, n={len(xs)})"
    )


def warm(spec: RunSpec) -> None:
    """On a Dask worker: start its run child and import the run modules in it."""
    from testbed.sweep.child import run_in_child

    run_in_child(spec)


class Cluster:
    """A Dask LocalCluster of 2 one-thread workers, up only for the legs that want it:
    with the sweep settings (testbed/sweep/daskconf.py) or Dask's defaults."""

    def __init__(self, warmup: RunSpec, settings: bool = True) -> None:
        self.lc: Any = None
        self.warmup = warmup
        self.settings = settings
        self.started: list[float] = []

    def up(self) -> str:
        import distributed

        if self.lc is None:
            t0 = time.perf_counter()
            if self.settings:
                self.lc = daskconf.local_cluster(2, dashboard_address=":0")
            else:
                self.lc = distributed.LocalCluster(
                    n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
                )
            self.started.append(time.perf_counter() - t0)
            with distributed.Client(self.lc, set_as_default=False) as client:
                client.run(warm, self.warmup)  # each worker's child, as the pool's fork server
        return str(self.lc.scheduler_address)

    def down(self) -> None:
        if self.lc is not None:
            self.lc.close()
            self.lc = None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=24, help="DHC runs per sweep (>= 20)")
    ap.add_argument("--gangs", type=int, default=6000, help="gangs per DHC run")
    ap.add_argument("--spin", type=int, default=20_000_000, help="loop length of the host check")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trivial", type=int, default=200, help="do-nothing runs for overhead")
    args = ap.parse_args()

    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    work = dhc_runs(args.runs, args.gangs)
    print(f"sweep: {len(work)} DHC fluid runs of {args.gangs} gangs (32 PEs)")
    warmup = dhc_runs(1, 100)[0]
    # with the sweep settings (testbed/sweep/daskconf.py) and with Dask's defaults
    clusters = {"settings": Cluster(warmup), "defaults": Cluster(warmup, settings=False)}
    # (name, sweep options, the Dask cluster up during it)
    legs: list[tuple[str, dict[str, Any], str | None]] = [
        ("1", {"workers": 1}, None), ("pool", {"workers": 2}, None),
        ("pool, idle cluster", {"workers": 2}, "settings"), ("dask", {}, "settings"),
        ("dask defaults", {}, "defaults")]  # fmt: skip
    wall: dict[str, list[float]] = {name: [] for name, _, _ in legs}
    mcpu: dict[str, list[float]] = {name: [] for name, _, _ in legs}
    cap: list[float] = []

    def only(key: str | None) -> str:
        for k, c in clusters.items():
            if k != key:
                c.down()
        return clusters[key].up() if key is not None else ""

    try:
        timed(work[:2], workers=2)  # the fork server up, modules read from disk
        once = [RunSpec("bench", {"i": -i}, 0, nothing) for i in (1, 2)]  # one would run here
        ups = {"2 local workers": [timed(once, workers=2) for _ in range(3)]}
        ups["Dask 2 workers"] = [timed(once, dask=only("settings")) for _ in range(3)]
        print("start-up and close (a sweep of two runs that do nothing): "
              + "; ".join(f"{k} {spread([1000 * x for x in v], '{:.0f} ms')}"
                          for k, v in ups.items()))  # fmt: skip
        only(None)
        for rep in range(args.repeats):
            order = legs if rep % 2 == 0 else legs[::-1]  # ABC CBA: load drift falls alike
            cap.append(capacity(args.spin))
            for name, kw, key in order:
                addr = only(key)
                kw = {"dask": addr} if name.startswith("dask") else kw
                wall[name].append(timed(work, mcpu[name], **kw))
            got = {name: v[-1] for name, v in wall.items()}
            print(f"  repetition {rep + 1}: 1 process {got['1']:.1f} s, 2 local workers "
                  f"{got['pool']:.1f} s (with an idle Dask cluster up "
                  f"{got['pool, idle cluster']:.1f} s), Dask 2 workers {got['dask']:.1f} s "
                  f"(with Dask's default settings {got['dask defaults']:.1f} s); "
                  f"host 2-process capacity {cap[-1]:.2f}x, load average "
                  f"{os.getloadavg()[0]:.2f}")  # fmt: skip
        only(None)
        for what, c in clusters.items():
            print(f"Dask LocalCluster (2 workers x 1 thread, {what}, started "
                  f"{len(c.started)} times, untimed): start-up "
                  f"{spread(c.started, '{:.1f} s')}")  # fmt: skip
        one, pool, dask = wall["1"], wall["pool"], wall["dask"]
        speedup = [a / b for a, b in zip(one, pool, strict=True)]
        vs_pool = [c / b - 1 for c, b in zip(dask, pool, strict=True)]
        ok1 = statistics.median(speedup) >= SPEEDUP_TARGET
        ok2 = abs(statistics.median(vs_pool)) <= DASK_TARGET
        print(f"2 local workers vs 1: {spread(speedup, '{:.2f}x')}; target >= "
              f"{SPEEDUP_TARGET}x: {'met' if ok1 else 'NOT met'}")  # fmt: skip
        share = [a / c for a, c in zip(speedup, cap, strict=True)]
        print(f"host 2-process capacity: {spread(cap, '{:.2f}x')}; the speed-up as a share "
              f"of it: {spread([100 * x for x in share], '{:.0f} %')}")  # fmt: skip
        pct = [100 * v for v in vs_pool]
        print(f"Dask (2 workers) vs local pool (2): {spread(pct, '{:+.1f} %')}; target within "
              f"{DASK_TARGET:.0%}: {'met' if ok2 else 'NOT met'}")  # fmt: skip
        plain = wall["dask defaults"]
        vs_plain = [100 * (c / b - 1) for c, b in zip(plain, pool, strict=True)]
        gain = [100 * (c / b - 1) for c, b in zip(dask, plain, strict=True)]
        print(f"  Dask with Dask's default settings vs the pool: {spread(vs_plain, '{:+.1f} %')}"
              f"; Dask vs Dask with its defaults: {spread(gain, '{:+.1f} %')}")  # fmt: skip
        idle = [100 * (c / b - 1) for c, b in zip(wall["pool, idle cluster"], pool, strict=True)]
        print(f"  the pool with an idle Dask cluster (sweep settings) up vs without: "
              f"{spread(idle, '{:+.1f} %')}")  # fmt: skip
        print(
            "executor machinery CPU (every process of the executor but those running the "
            "runs: coordinator, scheduler, nannies, client, Dask workers, fork server):"
        )
        for name in ("pool", "pool, idle cluster", "dask", "dask defaults"):
            per_run = [1000 * c / len(work) for c in mcpu[name]]
            core = [100 * c / w for c, w in zip(mcpu[name], wall[name], strict=True)]
            print(f"  {name}: per run {spread(per_run, '{:.1f} ms')}; "
                  f"{spread(core, '{:.1f} %')} of a core")  # fmt: skip

        trivial = [RunSpec("bench", {"i": i}, 0, nothing) for i in range(args.trivial)]
        print(f"executor overhead: {args.trivial} runs that do nothing, wall time per run")
        with tempfile.TemporaryDirectory() as tmp:
            for name, kw in (("this process", {"workers": 1}), ("2 local workers", {"workers": 2}),
                             ("Dask 2 workers", {"dask": "up"})):  # fmt: skip
                if "dask" in kw:  # the pool's and this process's legs with no cluster up
                    kw = {"dask": only("settings")}
                plain, stored = [], []
                for rep in range(args.repeats):
                    plain.append(timed(trivial, **kw) / len(trivial))
                    store = Path(tmp) / f"{name}-{rep}.sqlite"
                    stored.append(timed(trivial, store=store, **kw) / len(trivial))
                worst = max(max(plain), max(stored))
                print(f"  {name}: {spread([1000 * x for x in plain], '{:.2f} ms')}; with a "
                      f"result store {spread([1000 * x for x in stored], '{:.2f} ms')}; "
                      f"target < {OVERHEAD_TARGET * 1000:.0f} ms: "
                      f"{'met' if worst < OVERHEAD_TARGET else 'NOT met'}")  # fmt: skip
    finally:
        only(None)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
