"""agent/realtime.py on a real process (our own child; a shorter slice needs no root):
the kernel takes the short slice, and a process it forks starts with the default one."""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = """
import os, sys
from agent.realtime import set_short_slice

def slice_ns():
    for line in open("/proc/self/sched"):
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return -1

before = slice_ns()
set_short_slice(250)
mine = slice_ns()
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, str(slice_ns()).encode())
    os._exit(0)
os.wait()
print(before, mine, os.read(r, 64).decode(), os.sched_getscheduler(0))
"""


def test_short_slice_is_taken_and_not_inherited() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True, timeout=30).stdout.split()  # fmt: skip
    before, mine, forked, policy = map(int, out)
    assert mine == 250_000 and before != mine
    assert forked == before  # reset-on-fork: a job gets the default slice
    assert policy == os.SCHED_OTHER | os.SCHED_RESET_ON_FORK
