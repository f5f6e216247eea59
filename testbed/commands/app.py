"""``cosched app list|run``: the apps without a scheduler, for checking and calibrating.

``run`` starts the ranks as local processes on 127.0.0.1 (rank r listens on a port
below the ephemeral range + r): the NPB-like kernels through their own launcher
(``python -m apps.npb.K --ranks R``, over our library or Open MPI), the synthetic
program and the ping-pong with the ``COSCHED_*`` environment a cluster job gets.
Every check (rank count, class, transport, preset, Open MPI) happens before any
process starts.
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

from apps.catalog import AppInfo, catalog, check
from apps.mp import auth
from apps.npb.runner import check_mpi, free_port_run
from apps.presets import PRESETS
from common.errors import UsageError

from . import command_parser

REPO = Path(__file__).resolve().parents[2]


def add_commands(sub: Any) -> None:
    """Register ``app`` (list, run) on ``sub``."""
    p = command_parser(
        sub,
        "app",
        "list the apps; run one as local processes without a scheduler",
        "The apps cosched ships: Wiseman & Feitelson's synthetic program (presets compute, io, "
        "fine, "
        "qcrd), the ping-pong, and the NPB-like kernels BT, SP, FT, IS and CG (docs/apps.md). "
        "`run` starts R ranks on this host, prints each rank's report and exits with the "
        "job's status; to run one under a scheduler, `cosched submit` the same command.",
        "  cosched app list\n"
        "  cosched app run cg --ranks 4 --class S\n"
        "  cosched app run ft --ranks 2 --class W --transport mpi\n"
        "  cosched app run synthetic --ranks 2 --preset fine --duration 5\n"
        "  cosched app run synthetic --ranks 1 --preset qcrd --duration 20\n"
        "  cosched app run pingpong --ranks 2 -- --bytes 65536 --count 500",
    )
    s = p.add_subparsers(dest="app_command", metavar="{list,run}")
    s.required = True
    lp = command_parser(
        s,
        "list",
        "apps, classes and allowed rank counts",
        "Every app with the rank counts it takes, its NPB classes, its transports and presets.",
        "  cosched app list\n  cosched app list --json",
    )
    lp.add_argument("--json", action="store_true", help="machine-readable")
    lp.set_defaults(func=cmd_list)
    rp = command_parser(
        s,
        "run",
        "run an app's ranks as local processes",
        "Run NAME with --ranks R as local processes, without a scheduler; extra arguments "
        "after -- go to every rank (see `python -m MODULE --help`). Each rank's report is "
        "printed; the exit status is the worst rank's.",
        "  cosched app run cg --ranks 4 --class S\n"
        "  cosched app run synthetic --ranks 2 --preset qcrd --duration 20",
    )
    rp.add_argument("name", metavar="NAME", help="an app from `cosched app list`")
    rp.add_argument("--ranks", "-n", type=int, required=True, metavar="R")
    rp.add_argument("--class", dest="cls", default=None, metavar="S", help="NPB class (S)")
    rp.add_argument("--transport", choices=("ours", "mpi"), default="ours")
    rp.add_argument("--preset", choices=PRESETS, default=None, help="synthetic only")
    rp.add_argument("--duration", type=float, default=None, metavar="S", help="target seconds")
    rp.add_argument("--timeout", type=float, default=600.0, metavar="S", help="give up after")
    rp.add_argument("extra", nargs="*", metavar="-- ARGS", help="arguments for every rank")
    rp.set_defaults(func=cmd_run)


def cmd_list(args: argparse.Namespace) -> int:
    apps = catalog()
    if args.json:
        print(json.dumps({n: {"module": a.module, "ranks": a.ranks, "classes": a.classes,
                              "transports": a.transports, "presets": a.presets,
                              "description": a.description} for n, a in apps.items()},
                         indent=2))  # fmt: skip
        return 0
    print(f"{'APP':<10} {'RANKS':<30} {'CLASSES':<8} {'TRANSPORTS':<10} DESCRIPTION")
    for a in apps.values():
        print(f"{a.name:<10} {a.ranks:<30} {','.join(a.classes) or '-':<8} "
              f"{','.join(a.transports):<10} {a.description}")  # fmt: skip
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    apps = catalog()
    app = apps.get(args.name)
    if app is None:
        raise UsageError(f"no app {args.name!r}", fix=f"use one of {', '.join(apps)}")
    why = check(app, args.ranks, args.cls, args.transport, args.preset)
    if why:
        raise UsageError(why, fix="see `cosched app list`")
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration {args.duration}: want seconds > 0")
    extra = list(args.extra)
    if app.npb:
        if args.transport == "mpi":
            check_mpi()  # NpbError: one line before any process starts
        argv = [
            *(sys.executable, "-m", app.module, "--ranks", str(args.ranks)),
            *("--class", args.cls or "S", "--transport", args.transport),
            *("--timeout", str(args.timeout)),
        ]
        if args.duration is not None:
            argv += ["--duration", f"{args.duration:g}"]
        return subprocess.run([*argv, *extra], cwd=REPO, env=_env()).returncode
    rank_args = list(extra)
    if args.preset:
        rank_args += ["--preset", args.preset]
    if args.duration is not None:
        rank_args += ["--duration", f"{args.duration:g}"]
    return _run_local(app, args.ranks, rank_args, args.timeout)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(REPO))  # the ranks import this checkout's apps
    return env


def _run_local(app: AppInfo, ranks: int, rank_args: list[str], timeout: float) -> int:
    """Start ``ranks`` ranks of ``app`` as a cluster job's ranks are started; print
    each rank's report (one JSON line, rank order); the status is the worst rank's."""
    port = free_port_run(ranks)
    secret = auth.new_secret()  # the ranks prove it to each other, as a cluster job's do
    procs = []
    for r in range(ranks):
        env = _env()
        env.update(COSCHED_RANK=str(r), COSCHED_SIZE=str(ranks), COSCHED_PORT=str(port),
                   COSCHED_RANK0_ADDR="127.0.0.1", COSCHED_JOB=f"app-{os.getpid()}")  # fmt: skip
        env[auth.SECRET_ENV] = secret
        env.pop("COSCHED_PEERS", None)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", app.module, *rank_args], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        ))  # fmt: skip
    end = time.monotonic() + timeout
    outs: list[tuple[str, str]] = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=max(0.1, end - time.monotonic())))
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{app.name}: the ranks did not finish within {timeout:g} s",
            fix="give a longer --timeout or a shorter --duration",
        ) from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    status = 0
    for r, (p, (out, err)) in enumerate(zip(procs, outs, strict=True)):
        for line in out.strip().splitlines()[-1:]:
            print(line)
        if p.returncode != 0:
            status = status or p.returncode
            tail = err.strip().splitlines()[-1:] or ["no message"]
            print(f"cosched: rank {r} exited with status {p.returncode}: {tail[0]}",
                  file=sys.stderr)  # fmt: skip
    return status
