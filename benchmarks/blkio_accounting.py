"""What a job cgroup's block I/O statistics count on this host (issue 31): cgroup v1
``blkio`` and cgroup2 ``io.stat``, for reads and writes, buffered and O_DIRECT.

A child process in a fresh group does each kind of I/O on a file on the root file
system; the group's counters are read right after the call returns and again after a
``sync`` from outside the group, so a write the kernel's flusher issues later shows up
(or not) in the second column. Buffered reads are made cold first with
``posix_fadvise(DONTNEED)`` on the file (only that file's pages leave the cache).

Run as root, under /work/host.lock:

    python benchmarks/blkio_accounting.py [--version v1|v2] [--mib 8]

``--version v2`` needs the io controller in cgroup2's root (the host made
cgroup-v2-only, ``cosched host cgroups v2-only``). Prints one table; docs/nplus1.md
quotes it from docs/results/blkio-accounting/.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.cgroups import CgroupError, detect_layout
from common.cgroups.iostat import read_io_bytes

KINDS = ("buffered write", "buffered write + fsync", "O_DIRECT write", "buffered read (cold)",
         "O_DIRECT read")  # fmt: skip

CHILD = r"""
import mmap, os, sys
kind, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # the parent moved us into the group
buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT wants
buf.write(os.urandom(1 << 20))
direct = os.O_DIRECT if "O_DIRECT" in kind else 0
if "write" in kind:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | direct, 0o600)
    for _ in range(n):
        os.write(fd, buf)
    if "fsync" in kind:
        os.fsync(fd)
else:
    fd = os.open(path, os.O_RDONLY | direct)
    while os.readv(fd, [buf]) > 0:
        pass
os.close(fd)
print("done", flush=True)
"""


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def group_dir(version: str) -> tuple[str, list[str]]:
    """A fresh group in the hierarchy that accounts block I/O; what was enabled for it."""
    layout = detect_layout("v1" if version == "v1" else "v2")
    name = f"blkio-probe-{secrets.token_hex(3)}"
    if version == "v1":
        with open("/proc/self/mounts") as f:
            mounts = [ln.split()[1] for ln in f if " cgroup " in ln
                      and "blkio" in ln.split()[3].split(",")]  # fmt: skip
        if not mounts:
            sys.exit("no v1 blkio hierarchy mounted here")
        d = os.path.join(mounts[0], name)
        os.mkdir(d)
        return d, []
    root = layout.unified
    if root is None or "io" not in read(f"{root}/cgroup.controllers").split():
        sys.exit("cgroup2 offers no io controller here (make the host cgroup-v2-only first)")
    enabled = []
    if "io" not in read(f"{root}/cgroup.subtree_control").split():
        with open(f"{root}/cgroup.subtree_control", "w") as f:
            f.write("+io")
        enabled.append(root)
    d = os.path.join(root, name)
    os.mkdir(d)
    return d, enabled


def run(kind: str, d: str, path: str, mib: int) -> tuple[int, int, int, int, float]:
    """(read, write) bytes counted right after the call, (read, write) after a sync, ms."""
    if "read" in kind:
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    before = read_io_bytes(d)
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, path, str(mib)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    with open(f"{d}/cgroup.procs", "w") as f:
        f.write(str(p.pid))
    assert p.stdin is not None and p.stdout is not None
    t0 = time.perf_counter()
    p.stdin.write("go\n")
    p.stdin.flush()
    p.stdout.readline()
    ms = (time.perf_counter() - t0) * 1e3
    now = read_io_bytes(d) - before
    p.wait()
    os.sync()
    time.sleep(0.5)
    later = read_io_bytes(d) - before
    return now.read, now.write, later.read, later.write, ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", choices=("v1", "v2"), default="v1")
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--dir", default="/var/tmp", help="where the test file goes (a block device)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (makes a cgroup)")
    d, enabled = group_dir(a.version)
    path = os.path.join(a.dir, f"cosched-blkio-probe-{os.getpid()}")
    n = a.mib << 20
    try:
        fname = "io.stat" if a.version == "v2" else "blkio.throttle.io_service_bytes"
        print(f"{a.version}: {fname} of a fresh group; {a.mib} MiB per row, file in {a.dir}")
        print(f"kernel {os.uname().release}; bytes as a fraction of the {a.mib} MiB moved")
        print(f"{'kind':24} {'read now':>9} {'write now':>9} {'read +sync':>10} "
              f"{'write +sync':>11} {'ms':>7}")  # fmt: skip
        for kind in KINDS:
            r, w, rs, ws, ms = run(kind, d, path, a.mib)
            print(f"{kind:24} {r / n:9.3f} {w / n:9.3f} {rs / n:10.3f} {ws / n:11.3f} {ms:7.1f}")
    except CgroupError as e:
        sys.exit(str(e))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        for _ in range(100):
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.05)
        for root in enabled:
            with contextlib.suppress(OSError), open(f"{root}/cgroup.subtree_control", "w") as f:
                f.write("-io")


if __name__ == "__main__":
    main()
