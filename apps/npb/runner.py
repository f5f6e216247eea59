"""The common entry point of the NPB-like kernels: flags, launching ranks, timing, the report.

``python -m apps.npb.<kernel> --ranks R --class S --transport ours|mpi``
checks everything it can (rank count, class, parameters, Open MPI present)
*before* any process starts, then

* ``--transport ours`` starts R local processes of the same program, each a
  rank of our message library, the way the controller starts a job's ranks:
  ``COSCHED_RANK``, ``COSCHED_SIZE``, ``COSCHED_PORT``, ``COSCHED_JOB`` and the
  waiting action (``COSCHED_WAIT``) in the environment (docs/cdc.md);
* ``--transport mpi`` runs ``mpirun -n R`` of the same program over mpi4py.

Without ``--ranks`` the program is one rank of a job started by someone else
(a cosched agent -- COSCHED_* -- or ``mpirun``), so ``cosched submit --size 4
-- python -m apps.npb.cg --class S`` needs nothing more.

Timing follows NPB: set-up (matrix, initial field, keys) is not timed; a
**repetition** is one whole benchmark run (NPB's iteration count from its
initial state) and verifies on its own. ``--duration S`` sets the number of
repetitions from the first one's time (rank 0 decides, one broadcast), so
the run lasts about S seconds; the default is one repetition.

Exit status: 0 when verified (or when verification does not apply, e.g.
``--niter`` changed), 3 when UNSUCCESSFUL, 2 for bad input, 1 on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from apps.mp import auth
from apps.npb import KERNELS, NpbError, check_class, check_ranks, table2_shares
from apps.npb.transport import MpiTransport, OursTransport, Transport

WORKER_ENV = "COSCHED_NPB_WORKER"
EXIT_UNSUCCESSFUL = 3


@dataclass
class Rep:
    """What one repetition computed: its iterations and its verification."""

    iterations: int
    verified: bool | None  # None: not performed (no reference for these parameters)
    detail: dict[str, Any]


class Kernel:
    """What each kernel module provides (subclassed there)."""

    name = ""

    def add_args(self, ap: argparse.ArgumentParser) -> None:
        pass

    def check_args(self, args: argparse.Namespace, ranks: int) -> None:
        """Raise NpbError for bad kernel parameters (runs before any process starts)."""

    def setup(self, t: Transport, cls: str, args: argparse.Namespace) -> None:
        raise NotImplementedError

    def rep(self, t: Transport) -> Rep:
        raise NotImplementedError

    def finish(self, t: Transport, rep: Rep) -> Rep:
        """Checks after the timed repetitions (untimed, no messages); the last rep, updated."""
        return rep

    def text(self, rep: Rep) -> list[str]:
        """NPB-style lines about the verification (rank 0)."""
        return []


# ---- flags ---------------------------------------------------------------------------------


def build_parser(k: Kernel) -> argparse.ArgumentParser:
    info = KERNELS[k.name]
    ap = argparse.ArgumentParser(
        prog=f"python -m {info.module}",
        description=(
            f"NPB {info.name.upper()}: {info.description}.\n"
            f"Yu & Byun 2011 Table 2: {info.intensity} communication intensity, pattern "
            f"{info.pattern}, "
            f"{', '.join(info.routines)};\nmessage sizes "
            + ", ".join(f"{e.label} ({e.share:g} %)" for e in info.table2)
            + f".\nVerification: {info.verification}.\n"
            f"Ranks: {'a square number' if info.rank_rule == 'square' else 'a power of two'} "
            f"({', '.join(map(str, info.allowed_ranks(16)))}); classes {', '.join(info.classes)}."
        ),
        epilog=(
            "examples:\n"
            f"  python -m {info.module} --ranks 4 --class S                # our library\n"
            f"  python -m {info.module} --ranks 4 --class S --transport mpi  # Open MPI\n"
            f"  python -m {info.module} --ranks 4 --duration 60 --json       # about 60 s\n"
            f"  cosched submit --size 4 -- python -m {info.module} --class S  # as a job\n"
            "exit status: 0 verified (or not applicable), 3 UNSUCCESSFUL, 2 bad input, 1 failure"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--ranks",
        type=int,
        default=None,
        metavar="R",
        help="start R local ranks (without it: one rank of a job started by cosched or mpirun)",
    )
    ap.add_argument("--class", dest="cls", default="S", help="problem class (default S)")
    ap.add_argument(
        "--transport",
        choices=("ours", "mpi"),
        default="ours",
        help="our message library (apps.mp) or real MPI (mpi4py, Open MPI); default ours",
    )
    ap.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="run about S seconds: whole verified repetitions, their number from the first's time",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=1,
        metavar="N",
        help="repetitions without --duration (default 1)",
    )
    ap.add_argument(
        "--wait",
        choices=("spin", "block", "spinblock"),
        default=None,
        help="ours with --ranks: how ranks wait for messages (default spinblock when ranks "
        "outnumber cores, else spin; a cosched agent sets COSCHED_WAIT itself)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    ap.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="launcher: give up after S s"
    )
    k.add_args(ap)
    return ap


def check_inputs(k: Kernel, args: argparse.Namespace, ranks: int) -> None:
    """Everything that can be wrong before a process starts -> one NpbError."""
    check_ranks(k.name, ranks)
    args.cls = check_class(k.name, args.cls)
    if args.duration is not None and not args.duration > 0:
        raise NpbError(f"--duration must be > 0 seconds, got {args.duration}")
    if args.reps < 1:
        raise NpbError(f"--reps must be >= 1, got {args.reps}")
    if args.timeout <= 0:
        raise NpbError(f"--timeout must be > 0 seconds, got {args.timeout}")
    k.check_args(args, ranks)


def check_mpi() -> str:
    """The mpirun to use; NpbError when Open MPI or mpi4py is missing."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise NpbError(
            "--transport mpi: mpirun is not installed",
            fix="install Open MPI (apt-get install openmpi-bin libopenmpi-dev; "
            "scripts/bootstrap.sh does it as root)",
        )
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise NpbError(
            "--transport mpi: the mpi4py package is not installed",
            fix="pip install mpi4py (it is in pyproject's dependencies)",
        ) from None
    return mpirun


# ---- launching -------------------------------------------------------------------------------


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(n: int) -> int:
    """A base port with ``n`` consecutive free ports on 127.0.0.1 (rank r listens on base + r).

    Below the kernel's ephemeral range: a port probed free there can be taken by any
    outgoing connection before the rank binds it (seen in CI: EADDRINUSE).
    """
    low = _ephemeral_low()
    for _ in range(200):
        base = random.randint(10000, max(10001, low - n - 1))
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise NpbError(f"no {n} consecutive free ports on 127.0.0.1")


def _strip_ranks(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--ranks":
            skip = True
            continue
        if a.startswith("--ranks="):
            continue
        out.append(a)
    return out


def launch(module: str, args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Start the ranks as local processes; rank 0's output is ours. Returns the exit status."""
    ranks = args.ranks
    rest = _strip_ranks(argv)
    env = dict(os.environ)
    env[WORKER_ENV] = "1"
    # The ranks import apps.npb from this checkout even when it is not installed.
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    if args.transport == "mpi":
        mpirun = check_mpi()
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        # Yield when idle: ranks may outnumber the cores; shared memory + TCP loopback only.
        cmd = [
            mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to", "none",
            "--mca", "mpi_yield_when_idle", "1",
            "-x", WORKER_ENV, "-x", "PYTHONPATH",
            sys.executable, "-m", module, *rest,
        ]  # fmt: skip
        procs = [subprocess.Popen(cmd, env=env, start_new_session=True)]
    else:
        port = free_port_run(ranks)
        env.setdefault(auth.SECRET_ENV, auth.new_secret())  # the ranks prove it to each other
        wait = args.wait or ("spinblock" if ranks > (os.cpu_count() or 1) else "spin")
        job = f"npb-{module.rsplit('.', 1)[-1]}-{os.getpid()}"
        procs = []
        for r in range(ranks):
            e = dict(env)
            e.update(
                COSCHED_RANK=str(r),
                COSCHED_SIZE=str(ranks),
                COSCHED_PORT=str(port),
                COSCHED_JOB=job,
                COSCHED_RANK0_ADDR="127.0.0.1",
            )
            e.pop("COSCHED_PEERS", None)
            if args.wait or "COSCHED_WAIT" not in os.environ:
                e["COSCHED_WAIT"] = wait
            out = None if r == 0 else subprocess.DEVNULL
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", module, *rest], env=e, stdout=out, start_new_session=True
                )
            )
    deadline = time.monotonic() + args.timeout
    codes: list[int | None] = [None] * len(procs)
    try:
        while any(c is None for c in codes):
            for i, p in enumerate(procs):
                if codes[i] is None:
                    codes[i] = p.poll()
            failed = [c for c in codes if c not in (None, 0, EXIT_UNSUCCESSFUL)]
            if failed or time.monotonic() > deadline:
                if not failed:
                    print(
                        f"npb: the ranks did not finish within {args.timeout:g} s", file=sys.stderr
                    )
                break
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    codes = [p.returncode for p in procs]
    bad = [c for c in codes if c not in (0, EXIT_UNSUCCESSFUL)]
    if bad:
        return 1
    return EXIT_UNSUCCESSFUL if EXIT_UNSUCCESSFUL in codes else 0


# ---- one rank ----------------------------------------------------------------------------------


def make_transport(kind: str) -> Transport:
    if kind == "mpi":
        return MpiTransport()
    from apps.mp import Comm

    comm = Comm.from_env()
    comm.open()
    return OursTransport(comm)


def run_rank(
    k: Kernel, args: argparse.Namespace, t: Transport
) -> tuple[dict[str, Any] | None, Rep]:
    """Set up, run the timed repetitions, gather the report at rank 0."""
    k.setup(t, args.cls, args)
    t.rec.enabled = True
    t.rec.hist.clear()
    t.rec.bytes_sent, t.rec.comm_s, t.rec.calls = 0, 0.0, 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    t.mark("rep")
    reps = [k.rep(t)]
    first = time.perf_counter() - wall0
    total = args.reps
    if args.duration is not None:
        want = np.array([max(1, round(args.duration / max(first, 1e-6)))], dtype=np.int64)
        total = int(t.bcast(want, 0, "control")[0]) if t.size > 1 else int(want[0])
    while len(reps) < total:
        t.mark("rep")
        reps.append(k.rep(t))
    t.mark("end")
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    mine = {
        "wall_s": wall,
        "cpu_s": cpu,
        "comm_s": t.rec.comm_s,
        "bytes_sent": t.rec.bytes_sent,
        "hist": t.rec.as_rows(),
    }
    t.rec.enabled = False
    reps[-1] = k.finish(t, reps[-1])
    every = t.gather_obj(mine)
    last = reps[-1]
    verdicts = {r.verified for r in reps}
    verified = False if False in verdicts else (None if None in verdicts else True)
    if every is None:
        return None, last
    iters = sum(r.iterations for r in reps)
    hist: Counter[tuple[str, str, int]] = Counter()
    for m in every:
        for row in m["hist"]:
            hist[(row["routine"], row["kind"], row["bytes"])] += row["count"]
    kinds: Counter[str] = Counter()
    for (_r, kd, _n), c in hist.items():
        kinds[kd] += c
    bytes_sent = sum(m["bytes_sent"] for m in every)
    comm_s = [m["comm_s"] for m in every]
    walls = [m["wall_s"] for m in every]
    cpus = [m["cpu_s"] for m in every]
    report = {
        "kernel": k.name,
        "class": args.cls,
        "ranks": t.size,
        "transport": t.name,
        "reps": len(reps),
        "iterations": iters,
        "seconds": round(wall, 6),
        "iterations_per_second": round(iters / wall, 4) if wall > 0 else 0.0,
        "seconds_per_iteration": round(wall / iters, 6) if iters else 0.0,
        "cpu_seconds": round(sum(cpus), 4),
        "cpu_ratio": round(sum(cpus) / sum(walls), 4) if sum(walls) > 0 else 0.0,
        "comm_fraction": round(
            float(np.mean([c / w for c, w in zip(comm_s, walls, strict=True) if w > 0])), 4
        ),
        "bytes_sent": bytes_sent,
        "bandwidth_bps": round(8 * bytes_sent / sum(comm_s), 1) if sum(comm_s) > 0 else 0.0,
        "verified": verified,
        "verification": last.detail,
        "histogram": [
            {"routine": r, "kind": kd, "bytes": n, "count": c}
            for (r, kd, n), c in sorted(hist.items())
        ],
        "table2": [
            {
                "label": e.label,
                "table_share": e.share,
                "measured_share": round(s, 2),
                "kinds": list(e.kinds),
            }
            for e, s in table2_shares(k.name, dict(kinds))
        ],
        "scheme": os.environ.get("COSCHED_SCHEME"),
        "job": os.environ.get("COSCHED_JOB"),
    }
    return report, last


def render(k: Kernel, report: dict[str, Any], rep: Rep) -> str:
    v = report["verified"]
    word = "VERIFIED" if v else ("UNSUCCESSFUL" if v is False else "NOT PERFORMED")
    lines = [
        f" NAS Parallel Benchmarks (cosched NPB-like) - {k.name.upper()} Benchmark",
        f" Class           =  {report['class']}",
        f" Ranks           =  {report['ranks']} ({report['transport']})",
        f" Repetitions     =  {report['reps']} ({report['iterations']} iterations)",
        f" Time in seconds =  {report['seconds']:.4f}",
        f" Iterations/s    =  {report['iterations_per_second']:.4f}",
        f" CPU / wall      =  {report['cpu_ratio']:.3f} "
        f"({report['cpu_seconds']:.3f} CPU s, all ranks)",
        f" Communicating   =  {100 * report['comm_fraction']:.1f} % of the time "
        f"({report['bandwidth_bps'] / 1e6:.1f} Mbit/s while communicating)",
        *k.text(rep),
        f" Verification    =  {word}",
        " Messages (per call; Yu & Byun 2011 Table 2 at 16 ranks, class A, beside ours):",
    ]
    for row in report["table2"]:
        lines.append(
            f"   {row['label']:>12}: table {row['table_share']:5.1f} %, "
            f"measured {row['measured_share']:5.1f} %"
            f"  ({'/'.join(row['kinds'])})"
        )
    for row in report["histogram"]:
        lines.append(
            f"   {row['routine']:>9} {row['kind']:>9} {row['bytes']:>10} B x {row['count']}"
        )
    return "\n".join(lines)


def main(k: Kernel, argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser(k)
    args = ap.parse_args(argv)
    module = KERNELS[k.name].module
    worker = os.environ.get(WORKER_ENV) == "1" or args.ranks is None
    try:
        if not worker:
            check_inputs(k, args, args.ranks)
            if args.transport == "mpi":
                check_mpi()
            return launch(module, args, argv)
        return _worker(k, args)
    except NpbError as e:
        print(f"{k.name}: {e}", file=sys.stderr)
        return e.exit_code


def _worker(k: Kernel, args: argparse.Namespace) -> int:
    from apps.mp import MPError

    if args.transport == "mpi":
        check_mpi()
        size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "0") or 0)
    else:
        raw = os.environ.get("COSCHED_SIZE", "1")
        try:
            size = int(raw)
        except ValueError:
            raise NpbError(f"environment COSCHED_SIZE={raw!r} is not an integer") from None
    if size:
        check_inputs(k, args, size)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    try:
        t = make_transport(args.transport)
        if not size:
            check_inputs(k, args, t.size)
        try:
            report, rep = run_rank(k, args, t)
        finally:
            t.close()
    except MPError as e:
        print(f"{k.name}: {e}", file=sys.stderr)
        return 1
    if report is None:
        return 0
    if args.json:
        print(json.dumps(report), flush=True)
    else:
        print(render(k, report, rep), flush=True)
    return EXIT_UNSUCCESSFUL if report["verified"] is False else 0


def entry(k: Kernel) -> Callable[[], None]:
    def _run() -> None:
        sys.exit(main(k))

    return _run
