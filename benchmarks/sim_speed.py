"""Simulator speed: jobs simulated per second (issues 2 and 11, "Benchmark", "Speed").

* FCFS, EASY, conservative and lookahead on the KTH SP2 trace (100
  processors, users' estimates). Targets: EASY < 1 s, conservative < 2 s,
  lookahead < 15 s of simulation; the issue quotes a well-known Python
  simulator at 3.2 s, 6.3 s and 242 s on this machine kind, printed beside
  ours as a ratio (that simulator is not run here).
* ``cosched simulate --policy easy`` on the KTH trace as a whole command
  (issue 11): the installed console script run as a subprocess several
  times, median and min of the wall time, target < 0.9 s (the issue quotes
  the same peer at 9.2 s as a whole process). Printed beside it: where the
  time goes -- interpreter start, the biggest imports (``python -X
  importtime`` of the same command), and reading the trace, simulating,
  metrics and writing timed in this process with the command's own
  functions. The command runs with Python's default bytecode cache (as
  installed software does); one run without it (``PYTHONDONTWRITEBYTECODE``,
  every module compiled from source) is printed too.
* EASY on 1,000,000 Lublin jobs (128 nodes). Target < 60 s.
* Paired gang (fluid mode) on 100,000 Lublin jobs, heterogeneous profiles,
  with strict gang on the same jobs and the ratio of the two. Target: paired
  gang < 60 s (issue 11 measured 268 s, gang 35 s).

Workload loading/generation is timed apart from simulation. The machine is
shared: compare figures of one run (ratios), and expect a second or so of
noise on the long runs.

    python benchmarks/sim_speed.py            # the full run
    python benchmarks/sim_speed.py --quick    # 1/10 of the Lublin sizes
    python benchmarks/sim_speed.py --only cmd # the whole-command timing only
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.policies.registry import make_policy  # noqa: E402
from testbed.sim.engine import simulate  # noqa: E402
from testbed.sim.metrics import summarize  # noqa: E402
from testbed.sim.results import SimConfig  # noqa: E402
from testbed.sim.workloads.lublin import generate_lublin  # noqa: E402
from testbed.sim.workloads.swf import read_swf  # noqa: E402
from testbed.sim.workloads.synthetic import apply_profile  # noqa: E402

KTH = ROOT.parent / "shared" / "traces" / "KTH-SP2-1996-2.1-filtered.swf"
TARGETS = {"fcfs": None, "easy": 1.0, "conservative": 2.0, "lookahead": 15.0}
PEER = {"fcfs": None, "easy": 3.2, "conservative": 6.3, "lookahead": 242.0}
CMD_TARGET = 0.9  # s, whole `cosched simulate --policy easy` on KTH (issue 11)
CMD_PEER = 9.2  # s, the quoted peer simulator as a whole process (not run here)
PAIRED_TARGET = 60.0  # s, paired gang fluid on 100,000 Lublin jobs (issue 11)


def line(label: str, jobs: int, seconds: float, extra: str = "") -> None:
    print(f"{label:<40} {jobs:>9,} jobs {seconds:9.2f} s {jobs / seconds:>11,.0f} jobs/s  {extra}")


def kth() -> None:
    if not KTH.exists():
        print(f"KTH trace not found at {KTH}: skipped")
        return
    t0 = time.perf_counter()
    trace = read_swf(KTH)
    load_s = time.perf_counter() - t0
    print(f"KTH SP2: {len(trace.jobs):,} jobs loaded in {load_s:.2f} s")
    for name, target in TARGETS.items():
        policy = make_policy(name, 100)
        res = simulate(trace.jobs, policy, SimConfig(nodes=100))
        s = summarize(res)
        verdict = ""
        if target is not None:
            ok = "ok" if res.wall_seconds < target else "MISSED"
            peer = PEER[name]
            assert peer is not None
            verdict = (
                f"target < {target:g} s: {ok}; vs quoted peer {peer:g} s: "
                f"{peer / res.wall_seconds:.1f}x faster"
            )
        line(f"KTH {name}", len(trace.jobs), res.wall_seconds, verdict)
        print(
            f"    mean wait {s.mean_wait:,.0f} s, bounded slowdown {s.mean_bounded_slowdown:.2f}, "
            f"utilization {s.utilization:.3f}"
        )


def lublin_easy(n: int) -> None:
    t0 = time.perf_counter()
    jobs = generate_lublin(n, 128, seed=1)
    gen_s = time.perf_counter() - t0
    print(f"Lublin: {n:,} jobs generated in {gen_s:.2f} s")
    res = simulate(jobs, make_policy("easy", 128), SimConfig(nodes=128))
    ok = "ok" if res.wall_seconds < 60 else "MISSED"
    line("Lublin EASY", n, res.wall_seconds, f"target < 60 s (1M jobs): {ok}")


def lublin_paired(n: int) -> None:
    t0 = time.perf_counter()
    jobs = apply_profile(generate_lublin(n, 128, seed=2), "heterogeneous", seed=2)
    gen_s = time.perf_counter() - t0
    print(f"Lublin: {n:,} jobs with heterogeneous profiles generated in {gen_s:.2f} s")
    wall: dict[str, float] = {}
    for name in ("gang", "paired-gang"):
        res = simulate(jobs, make_policy(name, 128), SimConfig(nodes=128, mode="fluid"))
        wall[name] = res.wall_seconds
        s = summarize(res)
        match = f", matching {s.matching_success_rate:.3f}" if s.matching_success_rate else ""
        extra = f"slowdown {s.mean_slowdown:.2f}{match}"
        if name == "paired-gang":
            target = PAIRED_TARGET * n / 100_000
            ok = "ok" if res.wall_seconds < target else "MISSED"
            extra += (
                f"; {res.wall_seconds / wall['gang']:.2f}x gang's time; "
                f"target < {target:g} s ({n:,} jobs): {ok}"
            )
        line(f"Lublin {name} (fluid)", n, res.wall_seconds, extra)


# -- the whole command --------------------------------------------------------------------


def _command(out: Path) -> list[str]:
    """`cosched simulate --policy easy` on KTH, as installed (console script) if it is."""
    script = Path(sys.executable).parent / "cosched"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "testbed.cli"]
    return [*head, "simulate", "--policy", "easy", "--workload", f"swf:{KTH}", "--out", str(out)]


def _timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def _biggest_imports(argv: list[str], env: dict[str, str], top: int = 8) -> tuple[float, str]:
    """Total import time and the ``top`` costliest top-level imports of the command."""
    script = argv[0]
    if script != sys.executable:  # a console script: run its module under -X importtime
        argv = [sys.executable, "-m", "testbed.cli", *argv[1:]]
    argv = [argv[0], "-X", "importtime", *argv[1:]]
    err = subprocess.run(
        argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ).stderr
    rows = []
    total = 0
    for m in re.finditer(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", err):
        own, cum, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
        total += own
        if indent <= 1:  # imported by the command itself, not by another module
            rows.append((cum, name))
    rows.sort(reverse=True)
    shown = ", ".join(f"{name} {cum / 1000:.0f}" for cum, name in rows[:top])
    return total / 1e6, shown


def _stages() -> dict[str, float]:
    """The command's steps timed in this process, with the command's own functions."""
    from testbed.sim.metrics import job_table, write_csv, write_json
    from testbed.sim.workloads.spec import resolve_workload

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        jobs, _ = resolve_workload(f"swf:{KTH}", nodes=100, seed=1)
        t1 = time.perf_counter()
        res = simulate(jobs, make_policy("easy", 100), SimConfig(nodes=100))
        t2 = time.perf_counter()
        table = job_table(res)
        summary = summarize(res, table)
        t3 = time.perf_counter()
        write_csv(Path(tmp) / "jobs-easy.csv", table)
        write_json(Path(tmp) / "summary-easy.json", summary, res)
        t4 = time.perf_counter()
    out["read trace"] = t1 - t0
    out["simulate"] = t2 - t1
    out["metrics"] = t3 - t2
    out["write CSV+JSON"] = t4 - t3
    return out


def whole_command(runs: int) -> None:
    if not KTH.exists():
        print(f"KTH trace not found at {KTH}: skipped")
        return
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed software runs
    with tempfile.TemporaryDirectory() as tmp:
        argv = _command(Path(tmp))
        _timed(argv, env)  # warm-up: page cache, bytecode cache
        times = sorted(_timed(argv, env) for _ in range(runs))
        cold = _timed(argv, {**env, "PYTHONDONTWRITEBYTECODE": "1"})
        start = min(_timed([sys.executable, "-c", "pass"], env) for _ in range(3))
        imports, biggest = _biggest_imports(argv, env)
    median = statistics.median(times)
    ok = "ok" if median < CMD_TARGET else "MISSED"
    print(
        f"cosched simulate --policy easy on KTH, whole command ({runs} runs): "
        f"median {median:.2f} s, min {times[0]:.2f} s; target < {CMD_TARGET:g} s: {ok}; "
        f"vs quoted peer {CMD_PEER:g} s: {CMD_PEER / median:.1f}x faster"
    )
    print(f"    without the bytecode cache (every module compiled): {cold:.2f} s")
    print(f"    interpreter start {start:.2f} s; imports {imports:.2f} s, biggest (ms): {biggest}")
    stages = _stages()
    print("    in process: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()))


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="1/10 of the Lublin sizes")
    ap.add_argument("--only", choices=["kth", "cmd", "easy", "paired"], default=None)
    ap.add_argument("--runs", type=int, default=7, help="whole-command runs (default 7)")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    if args.only in (None, "kth"):
        kth()
    if args.only in (None, "cmd"):
        whole_command(args.runs)
    if args.only in (None, "easy"):
        lublin_easy(1_000_000 // scale)
    if args.only in (None, "paired"):
        lublin_paired(100_000 // scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
