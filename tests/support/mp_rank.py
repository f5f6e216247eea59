"""One rank in its own process, for tests/live/apps/mp/ (see mp_helpers.RankProcess).

    python -m tests.support.mp_rank echo|late|idle     (COSCHED_* from the environment)

Every scenario prints a JSON line once connected (its pid and state page fd),
then does its part with rank 0 (the test process):

* ``echo``: send back every tag-0 message; a tag-9 message ends it;
* ``late``: measure how much CPU a busy loop gets here now (the reference),
  tell rank 0 it is ready, then wait for a tag-2 message and print the CPU
  and wall time that wait took with this process's waiting action;
* ``idle``: wait for a message that never comes (until killed or rank 0 goes);
  prints the error it gets.
"""

from __future__ import annotations

import json
import os
import sys
import time

from apps.mp import Comm, MPError


def busy_ratio(seconds: float) -> float:
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        pass
    return (time.process_time() - c0) / (time.perf_counter() - w0)


def main() -> int:
    scenario = sys.argv[1]
    with Comm.from_env() as c:
        ready = {"pid": os.getpid(), "page_fd": c.page.fd, "mode": c.mode.recv}
        print(json.dumps(ready), flush=True)
        if scenario == "echo":
            while True:
                req = c.irecv(0)
                data = c.wait(req)
                if req.recv_tag == 9:
                    break
                c.send(0, data)
        elif scenario == "late":
            ref = busy_ratio(0.1)
            c.send(0, b"ready", 1)
            w0, c0 = time.perf_counter(), time.process_time()
            c.recv(0, 2)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            rep = c.report()
            out = {"cpu": cpu, "wall": wall, "ref_ratio": ref}
            out.update(spin_polls=rep["spin_polls"], blocks=rep["blocks"])
            print(json.dumps(out), flush=True)
        elif scenario == "idle":
            try:
                c.recv(0)
            except MPError as e:
                print(json.dumps({"error": str(e)}), flush=True)
                return 1
        else:
            print(f"unknown scenario {scenario!r}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
