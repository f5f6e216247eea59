"""The synthetic compute / I-O / barrier program of Wiseman & Feitelson 2003 §4.1.1, Fig. 6.

::

    loop N times
        loop G_comp times: null statement          (compute part)
        loop G_IO times: open new file, write B bytes, close   (I/O part)
        [communication phase: K exchanges, --comm]  (Yu & Byun 2011 Table 2 patterns)
        barrier                                     (through rank 0)

``G_IO = 0`` makes a compute-bound job, ``G_comp = 0`` an I/O-bound one; the
paper used G_comp = 2,500,000, G_IO = 20, B = 8,193 and N = 250, and measured
progress in barriers completed per second.

Run one rank as ``python -m apps.synthetic``. Rank, size, the ranks'
addresses and the port come from ``COSCHED_RANK``, ``COSCHED_SIZE``,
``COSCHED_PEERS`` (else every rank at ``COSCHED_RANK0_ADDR``) and
``COSCHED_PORT`` (set by the controller and agent, docs/cdc.md); flags
override them. Without any of them the program runs as a single rank. All
communication, the barrier included, goes through the message library
(apps/mp), so the waiting action, link emulation and NIC registration the
agent asks for apply, and every receive's message delay is measured.

The communication phase (``--comm``, after the I/O part of each iteration)
imitates Yu & Byun 2011 Table 2's patterns: ``nn`` exchanges ``--msg-bytes`` with
both ring neighbours (Isend/Irecv/Wait: BT, SP, CG), ``a2a`` an all-to-all
of that many bytes per pair (FT, IS), ``allreduce`` a sum over
``--msg-bytes / 8`` doubles (IS); ``--comm-rounds`` times per iteration.

Choices where the paper is silent (numbers measured on the 2-core
development VM, CPython 3.11; see ``--loop-cost`` for your machine):

* **The compute loop** is a fixed pure-Python arithmetic loop (a 16-bit
  linear congruential update per iteration) rather than a literal ``pass``
  loop, so that each iteration does the same small amount of interpreter
  work on every Python version. It costs about 70 ns per iteration here, so
  the paper's G_comp = 2,500,000 is about 0.175 s of CPU per barrier.
* **fsync** is on by default. Without it, ``write`` only copies into the page
  cache and returns at once: an "I/O-bound" job never blocks and is in fact
  CPU-bound (measured here, B = 8,193: 0.02-0.05 ms per open/write/close,
  CPU/wall 0.6-1.0). With fsync one file costs 0.16-2.2 ms depending on
  what else the disk is doing, CPU/wall 0.05-0.4; a G_comp = 0, G_IO = 20
  job ran at CPU/wall 0.36 on an idle VM. To match the paper's "similar
  times for a compute barrier and an I/O barrier" choose G_IO with
  ``--loop-cost`` (here about 100-1000 files for 0.175 s, not 20).
  ``--no-fsync`` restores the literal Fig. 6 behaviour.
* ``--device-latency S`` emulates the device instead: after each write the
  rank is blocked S seconds as on a real disk, using no CPU. On this
  VM fsync itself costs CPU (virtio and the journal), so an fsync-bound job
  shows CPU/wall 0.1-0.4 where the paper's I/O jobs showed "typically 0
  percent"; the default experiment (experiments/paired-vs-gang.toml) uses the
  emulated device so that I/O-bound jobs are what the paper's were.
* ``--device`` says whose device that is: ``rank`` (the default) sleeps in
  the rank, so no two ranks ever wait for each other's I/O; ``node`` queues
  the request at the node's one device, which every job on the node shares
  (the agent's, agent/iodevice.py, ``COSCHED_IODEV``): Wiseman & Feitelson's
  nodes each had one local disk, and §4.1.2's I/O jobs "interfere with each
  other when writing to the disk". The report gives the seconds spent queued
  behind other requests (``device_wait_seconds``).
* Each file is unlinked right after it is closed (after the fsync), so a long
  ``--duration`` run does not fill the disk; the per-rank directory is a
  fresh temporary directory removed at exit, also on SIGTERM/SIGINT.
* ``--duration S`` stops at the first barrier after S seconds of rank 0's
  clock; rank 0's decision travels with that barrier's release, so every
  rank stops after the same barrier and reports the same count.
* CPU seconds are the process's user + system time (``time.process_time``),
  so the system time spent in write/fsync counts as CPU, as a kernel would
  account it to the job.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from agent.iodevice import ENV as IODEV_ENV
from agent.iodevice import DeviceClient
from apps.mp import Comm, LinkEmu, MPError, WaitMode
from apps.mp.comm import DEFAULT_CONNECT_TIMEOUT
from apps.presets import (
    FINE_CPU_TARGET,
    FINE_PROBE_BARRIERS,
    PAPER_BYTES,
    PAPER_GCOMP,
    PRESETS,
    QCRD_DEFAULT,
    Phase,
    fine_compute_s,
    gcomp_for,
    preset,
    qcrd_phases,
)

COMM_PATTERNS = ("none", "nn", "a2a", "allreduce")

# Wiseman & Feitelson 2003 §4.1.1 values (apps/presets.py scales them to this machine).
PAPER_ITERATIONS = 250
_QCRD_TEXT = ",".join(f"{v:g}" for v in QCRD_DEFAULT)


class ConfigError(ValueError):
    """Bad flags or environment: the message says which and how to fix it."""


@dataclass(frozen=True)
class Config:
    """One rank's parameters, after flags and environment are merged."""

    rank: int = 0
    size: int = 1
    rank0_addr: str = "127.0.0.1"
    port: int = 0
    iterations: int | None = PAPER_ITERATIONS
    duration: float | None = None
    gcomp: int = PAPER_GCOMP
    gio: int = 0
    nbytes: int = PAPER_BYTES
    directory: str | None = None
    fsync: bool = True
    device_latency: float = 0.0
    device: str = "rank"  # "rank": a sleep of its own; "node": the node's shared device
    iodev_path: str | None = None  # COSCHED_IODEV
    report: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    comm: str = "none"
    msg_bytes: int = 8192
    comm_rounds: int = 1
    peers: tuple[str, ...] | None = None  # COSCHED_PEERS
    job: str = ""
    nic_job: str = ""
    nic_path: str | None = None
    wait: WaitMode = field(default_factory=WaitMode)
    link: LinkEmu | None = None
    preset: str | None = None  # apps/presets.py
    ns_per_iteration: float | None = None  # measured for a preset
    fine_probe: bool = False  # fine: gcomp from the barrier measured at start-up
    fine_target: float = FINE_CPU_TARGET  # fine: the CPU share to size the compute for
    qcrd: tuple[Phase, ...] = ()
    qcrd_work: bool = False  # qcrd: each phase a fixed number of barriers, not a time


# -- the two phases of Fig. 6 ----------------------------------------------


def compute(iterations: int, seed: int = 1) -> int:
    """The compute part: ``iterations`` rounds of a fixed arithmetic update.

    Returns the final value so the work is observable (and testable); CPython
    does not optimise loops away, but returning it keeps the intent explicit.
    """
    x = seed
    for _ in range(iterations):
        x = (x * 75 + 74) & 0xFFFF
    return x


def io_phase(
    directory: Path,
    tag: str,
    count: int,
    payload: bytes,
    fsync: bool,
    device_latency: float = 0.0,
    device: DeviceClient | None = None,
) -> None:
    """The I/O part: ``count`` times open a new file, write the payload, close it.

    With ``device_latency`` > 0 each write then waits that long for an emulated
    device instead of calling fsync (see the module docstring): the node's shared
    one when ``device`` is given, else a sleep of the rank's own.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    for j in range(count):
        path = directory / f"{tag}-{j}"
        fd = os.open(path, flags, 0o600)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if device_latency > 0 and device is not None:
                # the node's disk: queued behind the other jobs' writes, blocked in recv
                device.request(device_latency)
            elif device_latency > 0:
                # An emulated device: the rank blocks without using the CPU, as a
                # process waiting on a 2003 disk did (this VM's fsync costs CPU).
                time.sleep(device_latency)
            elif fsync:
                # Forces the data to the device, so the rank blocks on I/O as the
                # paper's jobs did (see the module docstring).
                os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)


# -- configuration -----------------------------------------------------------


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment {name}={raw!r} is not an integer") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m apps.synthetic",
        description=(
            "The synthetic program of Wiseman & Feitelson 2003 Fig. 6, with Yu & Byun's "
            "communication:\n"
            "  loop N times { compute G_comp iterations;\n"
            "                 G_IO times open a new file, write B bytes, close;\n"
            "                 K communication rounds (--comm);\n"
            "                 barrier through rank 0 }\n"
            "Prints one JSON line: barriers per second, CPU seconds, the parameters, the\n"
            "scheme (COSCHED_SCHEME) and the message library's report (messages, bytes,\n"
            "message delay count/mean/p50/p99, waiting actions)."
        ),
        epilog=(
            "environment (set by the controller and the agent; flags override):\n"
            "  COSCHED_RANK, COSCHED_SIZE   this rank and the number of ranks (default 0 of 1)\n"
            "  COSCHED_PEERS                every rank's data address, comma-separated;\n"
            "                               without it all ranks are at COSCHED_RANK0_ADDR\n"
            "  COSCHED_PORT                 the job's port (rank r listens on port + r on one "
            "host)\n"
            "  COSCHED_WAIT, COSCHED_SEND_WAIT, COSCHED_SPIN_US\n"
            "                               waiting actions: spin | block | spinblock "
            "(default spin, 150 us)\n"
            "  COSCHED_NET_DELAY_US, _JITTER_US, _LOSS_PCT, _RATE_BPS\n"
            "                               userspace link emulation (clusters without netem)\n"
            "  COSCHED_NIC_SOCK, COSCHED_JOB_ID  register with the node agent (docs/cdc.md)\n"
            "\n"
            "Yu & Byun 2011 Table 2 (message sizes from the table; the share of time spent\n"
            "communicating follows from --gcomp against the rounds):\n"
            "  BT  --comm nn --msg-bytes 62464 --comm-rounds 1     low intensity, NN\n"
            "  SP  --comm nn --msg-bytes 40960 --comm-rounds 2     medium, NN\n"
            "  FT  --comm a2a --msg-bytes 1073152 --comm-rounds 1  medium, all-to-all\n"
            "  IS  --comm a2a --msg-bytes 4096 --comm-rounds 4     high, all-to-all\n"
            "  CG  --comm nn --msg-bytes 28672 --comm-rounds 8     high, NN\n"
            "\n"
            "examples:\n"
            "  python -m apps.synthetic --loop-cost --target 0.2\n"
            "  python -m apps.synthetic --gcomp 2500000 --gio 0 --iterations 50      "
            "# compute-bound, one rank\n"
            "  python -m apps.synthetic --gcomp 0 --gio 20 --duration 30             "
            "# I/O-bound\n"
            "  COSCHED_SIZE=2 COSCHED_PORT=7000 COSCHED_RANK=0 python -m apps.synthetic &\n"
            "  COSCHED_SIZE=2 COSCHED_PORT=7000 COSCHED_RANK=1 python -m apps.synthetic\n"
            "  cosched submit --size 4 -- python -m apps.synthetic --gio 20 --gcomp 0\n"
            "  cosched submit --size 4 -- python -m apps.synthetic --gcomp 150000 "
            "--comm nn --msg-bytes 8192 --comm-rounds 4 --duration 60"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    work = parser.add_argument_group("workload (Wiseman & Feitelson 2003 §4.1.1)")
    work.add_argument(
        "--iterations",
        "-N",
        type=int,
        default=None,
        metavar="N",
        help=f"barriers to run (default {PAPER_ITERATIONS}, or unbounded with --duration)",
    )
    work.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="stop at the first barrier after S seconds (rank 0's clock; all ranks agree)",
    )
    work.add_argument(
        "--gcomp",
        type=int,
        default=None,
        metavar="G",
        help=f"compute iterations per barrier (default {PAPER_GCOMP}, or the preset's; "
        "see --loop-cost)",
    )
    work.add_argument(
        "--gio",
        type=int,
        default=None,
        metavar="G",
        help="files written per barrier (default 0, or the preset's)",
    )
    work.add_argument(
        "--bytes",
        dest="nbytes",
        type=int,
        default=None,
        metavar="B",
        help=f"bytes per file (default {PAPER_BYTES})",
    )
    work.add_argument(
        "--dir",
        dest="directory",
        default=None,
        help="where the per-rank temporary directory goes (default: $TMPDIR or /tmp)",
    )
    work.add_argument(
        "--fsync",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fsync each file before closing it (default on: without it writes only fill "
        "the page cache and an I/O-bound job is really CPU-bound)",
    )
    work.add_argument(
        "--device-latency",
        type=float,
        default=None,
        metavar="S",
        help="emulate the disk: after each write, block S seconds without using the CPU "
        "(replaces fsync; default 0 = real fsync)",
    )
    work.add_argument(
        "--device",
        choices=("rank", "node"),
        default="rank",
        help="whose device --device-latency waits on: rank = a sleep of its own (no "
        "contention; default), node = the node's one device that every job on the node "
        "queues at (the agent's, COSCHED_IODEV; Wiseman & Feitelson's local disk)",
    )
    work.add_argument(
        "--preset",
        choices=PRESETS,
        default=None,
        help="Wiseman & Feitelson's jobs scaled to this machine (apps/presets.py): compute (G_comp "
        "2,500,000 -> 75 ms per barrier), io (G_IO 20 x 8,193 B on a 3.75 ms device), "
        "fine (about 45 %% CPU: compute sized from the barrier measured at start-up, "
        "waits block; 2+ ranks), qcrd (12 x (I/O, CPU) phases, then a long I/O phase); "
        "--gcomp/--gio/--bytes/--device-latency/--wait override",
    )
    work.add_argument(
        "--fine-target",
        type=float,
        default=None,
        metavar="U",
        help="with --preset fine: the CPU share to size the compute part for (default 0.45, "
        "§4.2.1; §4.2.2's heterogeneous jobs draw it from 0-1)",
    )
    work.add_argument(
        "--qcrd-work",
        action="store_true",
        help="with --preset qcrd: each phase is a fixed number of barriers (its length alone "
        "/ the preset's time per barrier) rather than a stretch of wall time, so that a job "
        "time-shared with others takes longer, as a real application does",
    )
    work.add_argument(
        "--qcrd-phases",
        default=None,
        metavar="IO,CPU,FINAL",
        help=f"QCRD phase lengths in seconds (default {_QCRD_TEXT}); with --duration they "
        "are scaled to fill it",
    )
    job = parser.add_argument_group("job (defaults from the COSCHED_* environment)")
    job.add_argument("--rank", type=int, default=None, help="this rank (COSCHED_RANK, else 0)")
    job.add_argument("--size", type=int, default=None, help="ranks in the job (COSCHED_SIZE)")
    job.add_argument(
        "--rank0-addr",
        default=None,
        help="every rank's address, one host (COSCHED_RANK0_ADDR, else 127.0.0.1); "
        "overrides COSCHED_PEERS",
    )
    job.add_argument("--port", type=int, default=None, help="the job's port (COSCHED_PORT)")
    job.add_argument(
        "--wait",
        choices=("spin", "block", "spinblock"),
        default=None,
        help="how a receive waits, the barrier's included (overrides COSCHED_WAIT; "
        "default spin). block is what Wiseman & Feitelson's barrier did: its jobs used "
        "conventional Unix IPC (§3.2), where a waiting process sleeps in the kernel",
    )
    job.add_argument(
        "--spin-us",
        type=float,
        default=None,
        metavar="US",
        help="with --wait spinblock: how long a receive spins before it blocks (overrides "
        "COSCHED_SPIN_US; default 150). On the command line because a job's spec may not "
        "set COSCHED_* variables and gang policies' agents set none (docs/cdc.md)",
    )
    job.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="S",
        help="how long ranks wait for each other at start-up (default %(default)s s)",
    )
    cm = parser.add_argument_group("communication phase (Yu & Byun 2011 Table 2 patterns)")
    cm.add_argument(
        "--comm",
        choices=COMM_PATTERNS,
        default="none",
        help="per iteration: nn = exchange with both ring neighbours, a2a = all-to-all, "
        "allreduce = sum of --msg-bytes/8 doubles (default none)",
    )
    cm.add_argument(
        "--msg-bytes", type=int, default=8192, metavar="N", help="bytes per message (default 8192)"
    )
    cm.add_argument(
        "--comm-rounds",
        type=int,
        default=1,
        metavar="K",
        help="exchanges per iteration (default 1)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--report", default=None, metavar="PATH", help="also write the JSON here")
    out.add_argument(
        "--loop-cost",
        "--calibrate",  # its name before "calibrate" came to mean only `cosched calibrate`
        dest="loop_cost",
        action="store_true",
        help="measure the cost of a compute iteration and of one file write, then exit",
    )
    out.add_argument(
        "--target",
        type=float,
        default=None,
        metavar="S",
        help="with --loop-cost: suggest G_comp for S seconds of compute per barrier",
    )
    return parser


def config_from(args: argparse.Namespace, env: Mapping[str, str]) -> Config:
    """Merge flags over the ``COSCHED_*`` environment and check the result."""
    rank = args.rank if args.rank is not None else _env_int(env, "COSCHED_RANK")
    size = args.size if args.size is not None else _env_int(env, "COSCHED_SIZE")
    port = args.port if args.port is not None else _env_int(env, "COSCHED_PORT")
    addr = args.rank0_addr or env.get("COSCHED_RANK0_ADDR") or "127.0.0.1"
    rank = 0 if rank is None else rank
    size = 1 if size is None else size
    if size < 1:
        raise ConfigError(f"job size must be at least 1 (--size / COSCHED_SIZE), got {size}")
    if not 0 <= rank < size:
        raise ConfigError(
            f"rank {rank} is outside 0..{size - 1} (--rank / COSCHED_RANK vs COSCHED_SIZE)"
        )
    if size > 1 and not port:
        raise ConfigError(
            f"a job of {size} ranks needs rank 0's barrier port: set COSCHED_PORT or --port"
        )
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError(f"port {port} is outside 0..65535 (--port / COSCHED_PORT)")
    for name, value in (("--gcomp", args.gcomp), ("--gio", args.gio), ("--bytes", args.nbytes)):
        if value is not None and value < 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")
    if args.iterations is not None and args.iterations < 0:
        raise ConfigError(f"--iterations must be >= 0, got {args.iterations}")
    if args.device_latency is not None and not args.device_latency >= 0:
        raise ConfigError(f"--device-latency must be >= 0 seconds, got {args.device_latency}")
    iodev_path = env.get(IODEV_ENV) or None
    if args.device == "node" and iodev_path is None:
        raise ConfigError(
            f"--device node needs the node's I/O device ({IODEV_ENV}): run the job through "
            "a cosched agent, which sets it, or use --device rank"
        )
    if args.device == "node" and args.device_latency is not None and args.device_latency > 1.0:
        raise ConfigError(
            f"--device-latency {args.device_latency} s: the node's device serves at most "
            "1 s per request"
        )
    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0 seconds, got {args.duration}")
    if args.connect_timeout <= 0:
        raise ConfigError(f"--connect-timeout must be > 0 seconds, got {args.connect_timeout}")
    if args.msg_bytes < 0 or args.comm_rounds < 0:
        raise ConfigError("--msg-bytes and --comm-rounds must be >= 0")
    peers: tuple[str, ...] | None = None
    raw_peers = env.get("COSCHED_PEERS", "")
    if raw_peers and args.rank0_addr is None:
        peers = tuple(p.strip() for p in raw_peers.split(","))
        if len(peers) != size:
            raise ConfigError(f"COSCHED_PEERS names {len(peers)} addresses for {size} ranks")
    try:
        wait = WaitMode.from_env(env)
        if args.wait is not None:
            wait = WaitMode(args.wait, wait.send, wait.spin_us)
        if args.spin_us is not None:
            if not 0 <= args.spin_us <= 1e7:  # also refuses nan
                raise ConfigError(
                    f"--spin-us {args.spin_us:g}: a spin time in 0..10000000 us, please"
                )
            wait = WaitMode(wait.recv, wait.send, args.spin_us)
        link = LinkEmu.from_env(env)
    except MPError as exc:
        raise ConfigError(str(exc)) from None
    iterations = args.iterations
    if iterations is None and args.duration is None:
        iterations = PAPER_ITERATIONS
    if args.qcrd_phases is not None and args.preset != "qcrd":
        raise ConfigError("--qcrd-phases needs --preset qcrd")
    if args.qcrd_work and args.preset != "qcrd":
        raise ConfigError("--qcrd-work needs --preset qcrd")
    if args.fine_target is not None and args.preset != "fine":
        raise ConfigError("--fine-target needs --preset fine")
    if args.fine_target is not None and not 0.0 < args.fine_target < 1.0:
        raise ConfigError(f"--fine-target must be in (0, 1), got {args.fine_target}")
    gcomp = PAPER_GCOMP if args.gcomp is None else args.gcomp
    gio = 0 if args.gio is None else args.gio
    nbytes = PAPER_BYTES if args.nbytes is None else args.nbytes
    device_latency = 0.0 if args.device_latency is None else args.device_latency
    ns: float | None = None
    qcrd: tuple[Phase, ...] = ()
    fine_probe = False
    if args.preset is not None:
        p = preset(args.preset)
        ns = ns_per_iteration()
        if args.gcomp is None:
            gcomp = gcomp_for(p.compute_s, ns)
        if args.gio is None:
            gio = p.gio
        if args.nbytes is None:
            nbytes = p.nbytes
        if args.device_latency is None:
            device_latency = p.device_latency
        if p.block and args.wait is None and "COSCHED_WAIT" not in env:
            wait = WaitMode("block", wait.send, wait.spin_us)
        if p.name == "fine":
            if size < 2:
                raise ConfigError(
                    "--preset fine needs 2 or more ranks: its 45 % CPU comes from waiting "
                    "at the barrier (--size / COSCHED_SIZE)"
                )
            fine_probe = args.gcomp is None
        if p.name == "qcrd":
            # with --qcrd-work the phases keep their unscaled lengths: a fixed amount of work
            qcrd = tuple(_qcrd(args.qcrd_phases, None if args.qcrd_work else args.duration))
            iterations = None
    return Config(
        rank=rank,
        size=size,
        rank0_addr=addr,
        port=port or 0,
        iterations=iterations,
        duration=args.duration,
        gcomp=gcomp,
        gio=gio,
        nbytes=nbytes,
        directory=args.directory,
        fsync=args.fsync,
        device_latency=device_latency,
        device=args.device,
        iodev_path=iodev_path,
        report=args.report,
        connect_timeout=args.connect_timeout,
        comm=args.comm,
        msg_bytes=args.msg_bytes,
        comm_rounds=args.comm_rounds,
        peers=peers,
        job=env.get("COSCHED_JOB", ""),
        nic_job=env.get("COSCHED_JOB_ID", ""),
        nic_path=env.get("COSCHED_NIC_SOCK") or None,
        wait=wait,
        link=link,
        preset=args.preset,
        ns_per_iteration=ns,
        fine_probe=fine_probe,
        fine_target=FINE_CPU_TARGET if args.fine_target is None else args.fine_target,
        qcrd=qcrd,
        qcrd_work=args.qcrd_work,
    )


def _qcrd(raw: str | None, duration: float | None) -> list[Phase]:
    values = QCRD_DEFAULT
    if raw is not None:
        try:
            io_s, cpu_s, final_s = (float(v) for v in raw.split(","))
        except ValueError:
            raise ConfigError(
                f"--qcrd-phases {raw!r}: want three lengths in seconds, IO,CPU,FINAL (e.g. 1,4,8)"
            ) from None
        values = (io_s, cpu_s, final_s)
    try:
        return qcrd_phases(*values, duration=duration)
    except ValueError as e:
        raise ConfigError(f"--qcrd-phases: {e}") from None


def ns_per_iteration(n: int = 200_000) -> float:
    """What one iteration of :func:`compute` costs here (best of 3: the least disturbed)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        compute(n)
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e9


# -- running -----------------------------------------------------------------


def make_comm(cfg: Config) -> Comm:
    """The rank's communicator for ``cfg`` (not opened)."""
    return Comm(
        cfg.rank,
        cfg.size,
        peers=list(cfg.peers) if cfg.peers else [cfg.rank0_addr] * cfg.size,
        port=cfg.port,
        job=cfg.job,
        wait=cfg.wait,
        link=cfg.link,
        nic_path=cfg.nic_path,
        nic_job=cfg.nic_job,
        connect_timeout=cfg.connect_timeout,
    )


def comm_phase(comm: Comm, pattern: str, nbytes: int, rounds: int) -> None:
    """``rounds`` exchanges in ``pattern`` (see the module docstring)."""
    if pattern == "none" or comm.size == 1:
        return
    data = bytes(nbytes)
    for _ in range(rounds):
        if pattern == "nn":
            left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
            peers = [left] if left == right else [left, right]
            recvs = [comm.irecv(p, 1) for p in peers]
            sends = [comm.isend(p, data, 1) for p in peers]
            comm.waitall(recvs + sends)
        elif pattern == "a2a":
            comm.alltoall([data] * comm.size)
        elif pattern == "allreduce":
            comm.allreduce([1.0] * max(1, nbytes // 8))


def run(cfg: Config, comm: Comm | None = None) -> dict[str, Any]:
    """Run one rank to completion and return its result record.

    ``comm`` may be passed already listening (tests pick port 0 that way);
    otherwise one is built from ``cfg``.
    """
    own = comm is None
    if comm is None:
        comm = make_comm(cfg)
    payload = bytes(range(256)) * (cfg.nbytes // 256) + bytes(cfg.nbytes % 256)
    workdir = Path(tempfile.mkdtemp(prefix=f"cosched-synthetic-r{cfg.rank}-", dir=cfg.directory))
    extra: dict[str, Any] = {}
    dev: DeviceClient | None = None
    try:
        if cfg.device == "node":
            assert cfg.iodev_path is not None
            dev = DeviceClient(cfg.iodev_path)
        comm.open()
        if cfg.fine_probe:
            cfg, extra["fine"] = _fine_probe(comm, cfg, workdir, payload)
        # Timing starts once the job is connected: start-up skew between ranks
        # is not the program's progress.
        runq0 = runq_seconds()
        # for launch and teardown costs (cosched calibrate): when the work began and
        # ended on the host's monotonic clock, and the CPU the start-up took
        extra["started_monotonic"] = round(time.monotonic(), 6)
        extra["started_wall"] = round(time.time(), 6)  # the controller's records' clock
        extra["startup_cpu_seconds"] = round(time.process_time(), 6)
        if cfg.qcrd:
            done, seconds, cpu, extra["phases"] = _qcrd_run(comm, cfg, workdir, payload, dev)
        else:
            done, seconds, cpu = _loop(
                comm, cfg, workdir, payload, cfg.gcomp, cfg.gio, cfg.device_latency,
                cfg.iterations, cfg.duration, dev=dev,
            )  # fmt: skip
        extra["ended_monotonic"] = round(time.monotonic(), 6)
        extra["ended_wall"] = round(time.time(), 6)
        runq = runq_seconds() - runq0
        report = comm.report()
    finally:
        if own:
            comm.close()
        if dev is not None:
            extra["device_wait_seconds"] = round(dev.waited, 6)
            dev.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "rank": cfg.rank,
        "size": cfg.size,
        "job": os.environ.get("COSCHED_JOB"),
        "scheme": os.environ.get("COSCHED_SCHEME"),
        "barriers": done,
        "seconds": round(seconds, 6),
        "barriers_per_second": round(done / seconds, 6) if seconds > 0 else 0.0,
        "cpu_seconds": round(cpu, 6),
        "cpu_ratio": round(cpu / seconds, 4) if seconds > 0 else 0.0,
        # what the rank would have used on an idle host: time spent waiting for a CPU
        # on a busy one is taken out of the wall time
        "runq_seconds": round(runq, 6),
        "cpu_ratio_alone": round(cpu / (seconds - runq), 4) if seconds > runq else 0.0,
        "params": {
            "gcomp": cfg.gcomp,
            "gio": cfg.gio,
            "bytes": cfg.nbytes,
            "fsync": cfg.fsync,
            "device_latency": cfg.device_latency,
            "device": cfg.device,
            "iterations": cfg.iterations,
            "duration": cfg.duration,
            "comm": cfg.comm,
            "msg_bytes": cfg.msg_bytes,
            "comm_rounds": cfg.comm_rounds,
        },
        "preset": cfg.preset,
        "ns_per_iteration": round(cfg.ns_per_iteration, 2) if cfg.ns_per_iteration else None,
        **extra,
        "messages": report,
    }


def runq_seconds() -> float:
    """Seconds this thread has waited on a run queue (``/proc/thread-self/schedstat``,
    second field); 0.0 where the kernel does not report it."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _loop(
    comm: Comm,
    cfg: Config,
    workdir: Path,
    payload: bytes,
    gcomp: int,
    gio: int,
    device_latency: float,
    iterations: int | None,
    duration: float | None,
    tag: str = "b",
    communicate: bool = True,
    dev: DeviceClient | None = None,
) -> tuple[int, float, float]:
    """Fig. 6's loop until ``iterations`` barriers or the first barrier after
    ``duration`` s of rank 0's clock; returns barriers, wall and CPU seconds."""
    wall0, cpu0 = time.monotonic(), time.process_time()
    done = 0
    while iterations is None or done < iterations:
        compute(gcomp)
        io_phase(workdir, f"{tag}{done}", gio, payload, cfg.fsync, device_latency, dev)
        if communicate:
            comm_phase(comm, cfg.comm, cfg.msg_bytes, cfg.comm_rounds)
        want_stop = duration is not None and time.monotonic() - wall0 >= duration
        stop = comm.barrier(stop=want_stop)
        done += 1
        if stop:
            break
    return done, time.monotonic() - wall0, time.process_time() - cpu0


def _fine_probe(
    comm: Comm, cfg: Config, workdir: Path, payload: bytes
) -> tuple[Config, dict[str, Any]]:
    """§4.2.1: time the barrier, then size the compute part for about 45 % CPU."""
    _loop(comm, cfg, workdir, payload, 0, 0, 0.0, 10, None, "w", communicate=False)  # warm-up
    n, wall, cpu = _loop(
        comm, cfg, workdir, payload, 0, 0, 0.0, FINE_PROBE_BARRIERS, None, "p", communicate=False
    )
    # One G_comp for the whole job, as in the paper: from the ranks' mean barrier.
    assert cfg.ns_per_iteration is not None
    sums = comm.allreduce([wall / n, cpu / n, cfg.ns_per_iteration])
    mean_wall, mean_cpu, mean_ns = (v / comm.size for v in sums)
    x = fine_compute_s(mean_wall, mean_cpu, cfg.fine_target)
    gcomp = gcomp_for(x, mean_ns)
    info: dict[str, Any] = {
        "barrier_ms": round(mean_wall * 1e3, 4),
        "barrier_cpu_ms": round(mean_cpu * 1e3, 4),
        "compute_ms": round(x * 1e3, 4),
        "gcomp": gcomp,
    }
    if x == 0:
        info["note"] = (
            f"the barrier alone uses {mean_cpu / mean_wall:.0%} of the CPU here, above the "
            "45 % target: no compute part (a slower link, e.g. the cluster's, leaves room)"
        )
    return replace(cfg, gcomp=gcomp), info


def _qcrd_run(
    comm: Comm, cfg: Config, workdir: Path, payload: bytes, dev: DeviceClient | None = None
) -> tuple[int, float, float, list[dict[str, Any]]]:
    """§4.2.3: each phase runs compute- or io-preset barriers for its length."""
    io = preset("io")
    phases: list[dict[str, Any]] = []
    done = 0
    seconds = cpu = 0.0
    for i, ph in enumerate(cfg.qcrd):
        if ph.kind == "cpu":
            g, f, dl = cfg.gcomp, 0, 0.0
            per_barrier = preset("compute").compute_s
        else:
            g, f, dl = 0, io.gio, io.device_latency
            per_barrier = io.gio * io.device_latency
        if cfg.qcrd_work:  # a fixed amount of work: the phase's barriers alone
            count: int | None = max(1, round(ph.seconds / per_barrier))
            limit: float | None = None
        else:
            count, limit = None, ph.seconds
        n, w, c = _loop(comm, cfg, workdir, payload, g, f, dl, count, limit, f"q{i}-", dev=dev)
        phases.append({"kind": ph.kind, "seconds": round(w, 4), "barriers": n,
                       "cpu_ratio": round(c / w, 4) if w > 0 else 0.0})  # fmt: skip
        done, seconds, cpu = done + n, seconds + w, cpu + c
    return done, seconds, cpu, phases


def loop_cost(
    gcomp: int, nbytes: int, directory: str | None, target: float | None
) -> dict[str, Any]:
    """Time the compute loop and one file write with and without fsync."""
    n = gcomp if gcomp > 0 else PAPER_GCOMP
    best = float("inf")
    for _ in range(3):  # best of 3: the least disturbed run is the loop's own cost
        t0 = time.perf_counter()
        compute(n)
        best = min(best, time.perf_counter() - t0)
    per_iter = best / n
    result: dict[str, Any] = {
        "gcomp": n,
        "compute_seconds": round(best, 6),
        "ns_per_iteration": round(per_iter * 1e9, 2),
    }
    if target is not None:
        result["target_seconds"] = target
        result["suggested_gcomp"] = max(1, round(target / per_iter))
    payload = bytes(nbytes)
    workdir = Path(tempfile.mkdtemp(prefix="cosched-synthetic-cal-", dir=directory))
    try:
        for fsync in (False, True):
            count = 200 if not fsync else 50
            w0, c0 = time.perf_counter(), time.process_time()
            io_phase(workdir, "cal", count, payload, fsync)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            key = "file_fsync" if fsync else "file_nofsync"
            result[key] = {
                "ms_per_file": round(wall / count * 1e3, 4),
                "cpu_ms_per_file": round(cpu / count * 1e3, 4),
                "cpu_ratio": round(cpu / wall, 3) if wall > 0 else 0.0,
            }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    # SystemExit unwinds through run()'s finally, which removes the work directory.
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        cfg = config_from(args, os.environ if env is None else env)
    except ConfigError as exc:
        print(f"synthetic: {exc}", file=sys.stderr)
        return 2
    if args.loop_cost:
        res = loop_cost(cfg.gcomp, cfg.nbytes, cfg.directory, args.target)
        print(json.dumps(res))
        return 0
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        result = run(cfg)
    except MPError as exc:
        msg = str(exc)  # the library's errors begin with "rank R: "
        if not msg.startswith(f"rank {cfg.rank}: "):
            msg = f"rank {cfg.rank}: {msg}"
        print(f"synthetic: {msg}", file=sys.stderr)
        return 1
    except OSError as exc:
        fix = (
            "; free space there or give --dir on another file system"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT)
            else ""
        )
        where = "" if exc.filename else f" in {cfg.directory or tempfile.gettempdir()}"
        print(f"synthetic: rank {cfg.rank}: I/O failed{where}: {exc}{fix}", file=sys.stderr)
        return 1
    line = json.dumps(result)
    if cfg.report:
        try:
            Path(cfg.report).write_text(line + "\n")
        except OSError as exc:
            print(f"synthetic: cannot write report {cfg.report}: {exc}", file=sys.stderr)
            return 1
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
