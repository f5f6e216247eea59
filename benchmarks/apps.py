"""NPB-like kernels with 4 ranks: time per iteration, message bandwidth, time communicating.

For each of Yu & Byun's five applications (BT, SP, FT, IS, CG), over our
message library (apps.mp, ranks as local processes) and over Open MPI
(mpi4py under mpirun), one run of about ``--duration`` seconds (whole
verified repetitions, apps/npb/runner.py) prints

* seconds per iteration (an NPB iteration: CG's outer iteration, FT's time
  step, IS's ranking, BT/SP's ADI step) and iterations per second;
* bytes a rank sends per iteration (KB/iter) and the achieved message
  bandwidth: bytes the ranks sent / the time they spent inside
  communication calls (Mbit/s);
* the fraction of time communicating: time inside communication calls /
  wall time, the mean over ranks (what an MPI profiler reports; waiting for
  a slower rank counts as communicating);
* CPU / wall of all ranks, and the verification.

Yu & Byun 2011 §5.2 orders the applications BT, SP, FT, IS, CG from the lowest to
the highest communication intensity: the benchmark prints our order by
fraction of time communicating, and whether BT is lowest and CG highest.
Ours is not tuned toward it. Ours vs MPI: the ratio of seconds per iteration.

    flock -x /tmp/cosched-quiet.lock .venv/bin/python benchmarks/apps.py [--class W] [--duration 4]

Ranks outnumber the cores (4 on a 2-core VM), so both transports are set to
yield: our library waits spin-block (150 µs, then poll()), Open MPI with
mpi_yield_when_idle. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apps.npb import KERNELS  # noqa: E402

ORDER = ["bt", "sp", "ft", "is", "cg"]  # Yu & Byun 2011: lowest to highest intensity


def run(
    kernel: str, transport: str, cls: str, duration: float, ranks: int, steps: int
) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", KERNELS[kernel].module, "--ranks", str(ranks), "--class", cls,
        "--transport", transport, "--duration", str(duration), "--json", "--wait", "spinblock",
    ]  # fmt: skip
    if kernel in ("bt", "sp"):
        argv += ["--steps", str(steps)]
    env = dict(os.environ)
    env.pop("COSCHED_NPB_WORKER", None)
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode not in (0, 3):
        raise SystemExit(f"{kernel} over {transport} failed:\n{p.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--class", dest="cls", default="W", help="problem class (default W)")
    ap.add_argument("--duration", type=float, default=4.0, help="seconds per run (default 4)")
    ap.add_argument(
        "--ranks", type=int, default=4, help="ranks (default 4: a square and a power of two)"
    )
    ap.add_argument(
        "--steps", type=int, default=20, help="BT/SP time steps per repetition (default 20)"
    )
    ap.add_argument("--transports", default="ours,mpi", help="comma-separated (default ours,mpi)")
    ap.add_argument("--json", metavar="PATH", help="also write every report here")
    a = ap.parse_args()
    transports = [t for t in a.transports.split(",") if t]
    print(
        f"NPB-like kernels, class {a.cls}, {a.ranks} ranks, about {a.duration:g} s each, "
        f"host {os.uname().nodename}, {os.cpu_count()} CPUs, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    )
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for transport in transports:
        for k in ORDER:
            print(f"  running {k} over {transport} ...", file=sys.stderr, flush=True)
            results[(k, transport)] = run(k, transport, a.cls, a.duration, a.ranks, a.steps)
    head = (
        f"{'app':4} {'transport':9} {'iters':>6} {'s/iter':>9} {'iter/s':>8} {'KB/iter':>8} "
        f"{'Mbit/s':>9} {'comm %':>7} {'CPU/wall':>8} verified"
    )
    print(head)
    print("-" * len(head))
    for transport in transports:
        for k in ORDER:
            r = results[(k, transport)]
            v = {True: "VERIFIED", False: "UNSUCCESSFUL", None: "n/a"}[r["verified"]]
            print(
                f"{k:4} {transport:9} {r['iterations']:6d} {r['seconds_per_iteration']:9.5f} "
                f"{r['iterations_per_second']:8.2f} "
                f"{r['bytes_sent'] / max(1, r['iterations']) / r['ranks'] / 1e3:8.1f} "
                f"{r['bandwidth_bps'] / 1e6:9.1f} "
                f"{100 * r['comm_fraction']:7.1f} {r['cpu_ratio']:8.3f} {v}"
            )
    print()
    for transport in transports:
        frac = {k: results[(k, transport)]["comm_fraction"] for k in ORDER}
        ours = sorted(ORDER, key=lambda k: frac[k])
        print(
            f"{transport}: by time communicating, lowest first: "
            + " < ".join(f"{k.upper()} {100 * frac[k]:.1f} %" for k in ours)
        )
        print(
            "  Yu & Byun 2011: BT lowest, CG highest -> ours: "
            f"BT lowest {'yes' if ours[0] == 'bt' else 'no'}, "
            f"CG highest {'yes' if ours[-1] == 'cg' else 'no'}; full order BT<SP<FT<IS<CG "
            f"{'yes' if ours == ORDER else 'no'}"
        )

    def spi(k: str, transport: str) -> float:
        return float(results[(k, transport)]["seconds_per_iteration"])

    if "ours" in transports and "mpi" in transports:
        print()
        print(
            "ours / mpi seconds per iteration: "
            + ", ".join(f"{k.upper()} {spi(k, 'ours') / spi(k, 'mpi'):.2f}x" for k in ORDER)
        )
    if a.json:
        Path(a.json).write_text(json.dumps([r for r in results.values()], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
