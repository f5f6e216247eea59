"""A job bound to one device: the CPU, the disk or the network (issue 31's three kinds;
Wiseman & Feitelson 2003 §5's N + 1 gangs, docs/nplus1.md).

Each rank repeats a *unit* of work on its device and then pauses, so that alone it keeps
the device busy ``--duty`` of the time, as the simulator's kinds do (compute 0.90 of the
CPU, disk and network 0.80 of their device: ``DEVICE_KINDS``):

* ``cpu``: ``--loops`` iterations of an integer loop;
* ``disk``: one ``--block``-byte write with O_DIRECT at offset 0 of a file of the rank's
  own in ``--dir`` (the kind of write the kernel charges to the writer's cgroup at once:
  docs/nplus1.md "Disk bytes"); the file is removed at the end;
* ``net``: one round trip of ``--block`` bytes between ranks 0 and 1 over the message
  library (other ranks idle), waiting in the kernel (``--wait block``), so the job's CPU
  stays low while the link carries its bytes.

The pause after a unit is ``(1 / duty - 1)`` times the *shortest* unit so far: its cost
when nothing else ran (a unit stretched by a freeze or a shared device does not lengthen
the pause). ``--units`` fixes the work (a response time), ``--seconds`` the length.
Each rank that worked prints one JSON line: units, bytes, elapsed and CPU seconds, the
shortest unit.

    cosched submit --size 2 -- python -m apps.devicejob --kind disk --units 400 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

KINDS = ("cpu", "disk", "net")
_GO, _STOP = b"\x01", b"\x00"


def pause_for(best_unit_s: float, duty: float) -> float:
    """Seconds to pause after a unit so that alone the device is busy ``duty`` of the time."""
    if not 0.0 < duty <= 1.0:
        raise ValueError(f"duty must be in (0, 1], got {duty}")
    return max(0.0, best_unit_s) * (1.0 / duty - 1.0)


def spin(loops: int) -> int:
    total = 0
    for i in range(loops):
        total += i & 7
    return total


def _cpu(loops: int) -> None:
    spin(loops)


def run_units(
    unit: Callable[[], None], duty: float, units: int | None, seconds: float | None
) -> dict[str, float]:
    """Repeat ``unit`` with its pauses for ``units`` units or ``seconds`` s."""
    t0, c0 = time.perf_counter(), time.process_time()
    done, best = 0, float("inf")
    while True:
        if units is not None and done >= units:
            break
        if seconds is not None and time.perf_counter() - t0 >= seconds:
            break
        u0 = time.perf_counter()
        unit()
        best = min(best, time.perf_counter() - u0)
        done += 1
        time.sleep(pause_for(best, duty))
    return {
        "units": done,
        "elapsed_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "best_unit_s": best if done else 0.0,
    }


def _disk(args: argparse.Namespace, rank: int) -> dict[str, float]:
    buf = mmap.mmap(-1, args.block)  # page-aligned, as O_DIRECT needs
    buf.write(b"x" * args.block)
    path = Path(args.dir) / f"devicejob-{os.getpid()}-{rank}.dat"
    # a fresh file, never one planted under the name (shared /var/tmp): O_EXCL, O_NOFOLLOW
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_DIRECT
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise OSError(
            f"cannot open {path} for O_DIRECT writes ({e.strerror}): give --dir a "
            "directory you can write on a disk file system (not tmpfs), e.g. /var/tmp"
        ) from None
    try:
        res = run_units(lambda: _write_all(fd, buf), args.duty, args.units, args.seconds)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
    return {**res, "bytes": res["units"] * args.block}


def _write_all(fd: int, buf: mmap.mmap) -> None:
    if os.pwrite(fd, buf, 0) != len(buf):
        raise OSError("short O_DIRECT write")


def _net(args: argparse.Namespace) -> dict[str, float] | None:
    from apps.mp import Comm

    env = {**os.environ, "COSCHED_WAIT": args.wait, "COSCHED_SEND_WAIT": args.wait}
    with Comm.from_env(env) as comm:
        if comm.size < 2:
            raise SystemExit("devicejob: --kind net needs 2 ranks (COSCHED_SIZE=2)")
        if comm.rank > 1:
            comm.barrier()
            return None
        data = b"\x01" + bytes(max(0, args.block - 1))
        if comm.rank == 1:  # echo until rank 0 says stop
            while comm.recv(0)[:1] == _GO:
                comm.send(0, data)
            comm.barrier()
            return None

        def round_trip() -> None:
            comm.send(1, data)
            comm.recv(1)

        res = run_units(round_trip, args.duty, args.units, args.seconds)
        comm.send(1, _STOP)
        comm.barrier()
    return {**res, "bytes": res["units"] * 2 * args.block}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m apps.devicejob",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("--duty", type=float, default=1.0, help="device busy share alone (0, 1]")
    ap.add_argument("--units", type=int, default=None, help="units of work, then end")
    ap.add_argument("--seconds", type=float, default=None, help="or: run this long")
    ap.add_argument("--loops", type=int, default=100_000, help="cpu: loop iterations per unit")
    ap.add_argument("--block", type=int, default=16 << 20, help="disk/net: bytes per unit")
    ap.add_argument("--dir", default="/var/tmp", help="disk: where the rank's file goes")
    ap.add_argument("--wait", choices=("spin", "block"), default="block", help="net: waiting")
    a = ap.parse_args(argv)
    if (a.units is None) == (a.seconds is None):
        ap.error("one of --units N or --seconds S")
    if not 0.0 < a.duty <= 1.0 or a.loops < 1 or a.block < 1:
        ap.error("--duty in (0, 1], --loops >= 1 and --block >= 1")
    if (a.units is not None and a.units < 1) or (a.seconds is not None and a.seconds <= 0):
        ap.error("--units >= 1 or --seconds > 0")
    rank = int(os.environ.get("COSCHED_RANK", "0"))
    res: dict[str, float] | None
    try:
        if a.kind == "cpu":
            res = run_units(lambda: _cpu(a.loops), a.duty, a.units, a.seconds)
            res["bytes"] = 0
        elif a.kind == "disk":
            res = _disk(a, rank)
        else:
            res = _net(a)
    except OSError as e:
        print(f"devicejob: {a.kind}: {e}", file=sys.stderr)
        return 1
    if res is not None:  # every rank of cpu and disk; rank 0 of net
        print(json.dumps({"kind": a.kind, "duty": a.duty, **res}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
