"""Ping-pong between rank 0 and rank 1 over the message library: latency and bandwidth.

Rank 0 sends ``--bytes`` to rank 1, which sends them back, ``--count`` times
after ``--warmup`` untimed rounds; rank 0 prints one JSON line with the
round-trip median and p99 (µs) and the achieved rate of the payload
(both directions, bits/s). Environment and waiting actions as every cosched
program (docs/cdc.md); a link profile's userspace delay applies.

    cosched submit --size 2 -- python -m apps.pingpong --bytes 8 --count 2000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from apps.mp import Comm, MPError


def pingpong(comm: Comm, nbytes: int, count: int, warmup: int) -> dict[str, float] | None:
    if comm.size < 2:
        raise MPError("ping-pong needs 2 ranks (COSCHED_SIZE=2)")
    data = bytes(nbytes)
    rtts: list[int] = []
    if comm.rank > 1:
        comm.barrier()
        return None
    peer = 1 - comm.rank
    t_all = 0
    for i in range(warmup + count):
        if comm.rank == 0:
            t0 = time.perf_counter_ns()
            comm.send(peer, data)
            comm.recv(peer)
            dt = time.perf_counter_ns() - t0
            if i >= warmup:
                rtts.append(dt)
                t_all += dt
        else:
            comm.recv(peer)
            comm.send(peer, data)
    comm.barrier()
    if comm.rank != 0:
        return None
    rtts.sort()
    return {
        "bytes": nbytes,
        "count": count,
        # the fastest round trip: what the path costs when nothing else runs (a busy
        # host inflates the median, never the minimum below the path's own cost)
        "rtt_min_us": rtts[0] / 1e3,
        "rtt_median_us": rtts[len(rtts) // 2] / 1e3,
        "rtt_p99_us": rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))] / 1e3,
        "rate_bps": 2 * nbytes * 8 * count / (t_all / 1e9) if t_all else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m apps.pingpong",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--bytes", type=int, default=8, help="payload per message (default 8)")
    ap.add_argument("--count", type=int, default=1000, help="timed round trips (default 1000)")
    ap.add_argument("--warmup", type=int, default=100, help="untimed round trips first")
    a = ap.parse_args(argv)
    if a.bytes < 0 or a.count < 1 or a.warmup < 0:
        print("pingpong: --bytes >= 0, --count >= 1 and --warmup >= 0, please", file=sys.stderr)
        return 2
    try:
        with Comm.from_env() as comm:
            res = pingpong(comm, a.bytes, a.count, a.warmup)
    except MPError as e:
        print(f"pingpong: {e}", file=sys.stderr)
        return 1
    if res is not None:
        print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
