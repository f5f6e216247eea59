"""The NPB-like kernels' message traces, as the simulator reads them.

Recorded from real runs of apps/npb over our library (apps/mp/trace.py) at
class A, Yu & Byun 2011's class (§5.2), with each kernel at the process
counts of Table 3 (BT, SP: 4, 9, 16; FT, IS, CG: 4, 8, 16) and only a few of
its iterations (`python -m testbed.sim.cdc.traces record`). Each file holds,
per rank, the steps of one repetition's prologue, of its steady iteration
and of its epilogue (testbed/sim/cdc/program.py); the simulator repeats the
iteration NPB's count for class A (``NPB_ITERATIONS``). Computation is the
CPU time the rank used between library calls on the machine that recorded
it (``recorded`` in each file says which and when): the speed-1 node.

Committed in ``testbed/sim/cdc/traces/<kernel>-A-<ranks>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

from testbed.sim.cdc.program import (
    JobProgram,
    RankProgram,
    Segment,
    Step,
    _steady,
    split_marks,
    steps_of,
)

TRACE_DIR = Path(__file__).resolve().parent / "traces"
#: NPB 3 class A: CG's outer iterations, FT's time steps, IS's rankings, BT's and SP's steps.
NPB_ITERATIONS: dict[str, int] = {"cg": 15, "ft": 6, "is": 10, "bt": 200, "sp": 400}
#: Yu & Byun 2011 Table 3: the process counts of each application.
TABLE3_RANKS: dict[str, tuple[int, ...]] = {
    "bt": (4, 9, 16),
    "sp": (4, 9, 16),
    "ft": (4, 8, 16),
    "is": (4, 8, 16),
    "cg": (4, 8, 16),
}
_MODULES = {"cg": "cg", "ft": "ft", "is": "is_", "bt": "bt", "sp": "sp"}
#: What each recording runs: few iterations (the simulator repeats the steady one).
_RECORD_ARGS = {
    "cg": ["--niter", "3"],
    "ft": ["--niter", "3"],
    "is": [],
    "bt": ["--steps", "3"],
    "sp": ["--steps", "3"],
}


class TraceError(ValueError):
    """No trace for an application and process count (one line: what exists)."""


def available() -> dict[str, tuple[int, ...]]:
    """Application -> process counts with a committed trace."""
    out: dict[str, list[int]] = {}
    for f in sorted(TRACE_DIR.glob("*-A-*.json")):
        app, _cls, n = f.stem.split("-")
        out.setdefault(app, []).append(int(n))
    return {a: tuple(sorted(v)) for a, v in out.items()}


def _encode(steps: list[Step]) -> list[list[Any]]:
    return [[round(c, 7), [list(s) for s in snd], list(rcv), b, f] for c, snd, rcv, b, f in steps]


def _decode(rows: list[list[Any]]) -> tuple[Step, ...]:
    return tuple(
        (
            float(c),
            tuple((int(d), int(n)) for d, n in snd),
            tuple(int(s) for s in rcv),
            int(b),
            int(f),
        )
        for c, snd, rcv, b, f in rows
    )


def process_recording(
    rank_files: list[Path], kernel: str, ranks: int, info: dict[str, Any]
) -> dict[str, Any]:
    """The committed form of one recording (module docstring)."""
    per_rank = []
    for f in rank_files:
        ops = json.loads(f.read_text())["ops"]
        parts = split_marks(ops)
        per_rank.append(
            {
                "prologue": _encode(steps_of(parts.prologue)),
                "iteration": _encode(_steady(parts.iterations)),
                "epilogue": _encode(steps_of(parts.epilogue)),
                "recorded_iterations": len(parts.iterations),
            }
        )
    return {
        "kernel": kernel,
        "class": "A",
        "ranks": ranks,
        "npb_iterations": NPB_ITERATIONS[kernel],
        "recorded": info,
        "per_rank": per_rank,
    }


@cache
def _load(app: str, ranks: int) -> dict[str, Any]:
    path = TRACE_DIR / f"{app}-A-{ranks}.json"
    if not path.exists():
        have = available()
        if app not in have:
            raise TraceError(
                f"no recorded trace for application {app!r}; recorded: "
                + ", ".join(f"{a} ({'/'.join(map(str, n))} ranks)" for a, n in have.items())
            )
        raise TraceError(
            f"no recorded trace of {app.upper()} on {ranks} processes; recorded: "
            f"{', '.join(map(str, have[app]))}"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def npb_program(app: str, ranks: int, iterations: int | None = None) -> JobProgram:
    """One class-A repetition of ``app`` on ``ranks`` processes (NPB's iteration count)."""
    d = _load(app, ranks)
    n = iterations if iterations is not None else int(d["npb_iterations"])
    progs = []
    for r in d["per_rank"]:
        segs: list[Segment] = []
        body: list[bool] = []
        for part, count, is_body in (
            ("prologue", 1, False),
            ("iteration", n, True),
            ("epilogue", 1, False),
        ):
            steps = _decode(r[part])
            if steps:
                segs.append((steps, count))
                body.append(is_body)
        progs.append(RankProgram(tuple(segs), tuple(body)))
    info = {"class": "A", "npb_iterations": n, "recorded": d.get("recorded", {})}
    return JobProgram(app, tuple(progs), f"{app}.A.{ranks}", info)


# ---- recording (needs the kernels and a few minutes; writes into TRACE_DIR) -----------------


def record(app: str, ranks: int, python: str = sys.executable) -> dict[str, Any]:
    """Run ``app`` at class A on ``ranks`` local processes with the trace on."""
    with tempfile.TemporaryDirectory(prefix=f"cosched-trace-{app}-") as tmp:
        env = dict(os.environ, COSCHED_TRACE=tmp)
        cmd = [python, "-m", f"apps.npb.{_MODULES[app]}", "--ranks", str(ranks), "--class", "A",
               *_RECORD_ARGS[app], "--json", "--timeout", "3000"]  # fmt: skip
        began = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode not in (0, 3):
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
        info = {
            "command": " ".join(cmd[1:]),
            "host": _platform.node(),
            "machine": _platform.machine(),
            "date": time.strftime("%Y-%m-%d", time.gmtime(began)),
            "load_average": list(os.getloadavg()),
            "compute": "thread CPU time between transport calls (time.thread_time)",
        }
        files = [Path(tmp) / f"rank{r}.json" for r in range(ranks)]
        return process_recording(files, app, ranks, info)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.sim.cdc.traces",
        description="Record the NPB-like kernels' class-A message traces for the simulator.",
    )
    ap.add_argument("command", choices=["record", "list"])
    ap.add_argument("--apps", default=",".join(TABLE3_RANKS), help="comma-separated kernels")
    args = ap.parse_args(argv)
    if args.command == "list":
        for app, ns in available().items():
            print(f"{app}: {', '.join(map(str, ns))} ranks")
        return 0
    TRACE_DIR.mkdir(parents=True, exist_ok=True)
    for app in args.apps.split(","):
        for n in TABLE3_RANKS[app]:
            d = record(app, n)
            out = TRACE_DIR / f"{app}-A-{n}.json"
            out.write_text(json.dumps(d, separators=(",", ":")) + "\n")
            print(f"{out.name}: {len(d['per_rank'][0]['iteration'])} steps per iteration (rank 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
