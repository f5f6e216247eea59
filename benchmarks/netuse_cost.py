"""What measuring a job's network bytes costs the agent per ack (agent/netuse.py).

One job (this process) holding 8 TCP sockets over loopback; ``NetMeter.deltas`` is
called 200 times and its wall and CPU time per call printed. Needs root for the
descriptor duplication (pidfd_getfd of another process; of itself it works as any user).

    python benchmarks/netuse_cost.py
"""

from __future__ import annotations

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent.netuse import NetMeter

CALLS = 200


def main() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    socks = []
    for _ in range(4):
        c = socket.create_connection(srv.getsockname())
        s, _ = srv.accept()
        socks += [c, s]
    meter = NetMeter()
    pids = {"1": [os.getpid()]}
    meter.deltas(pids)
    t0, w0 = time.process_time(), time.perf_counter()
    for _ in range(CALLS):
        meter.deltas(pids)
    wall = (time.perf_counter() - w0) / CALLS * 1e3
    cpu = (time.process_time() - t0) / CALLS * 1e3
    print(f"NetMeter.deltas, 1 job, 8 TCP sockets: {wall:.2f} ms wall, {cpu:.2f} ms CPU per call")
    for s in (*socks, srv):
        s.close()


if __name__ == "__main__":
    main()
