"""Network namespaces: create, remove, list, and enter (in a child before exec).

Namespaces are the named bind mounts under /run/netns that ``ip netns`` uses,
so ``ip netns list`` shows them. Creation and removal go through pyroute2.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from pyroute2 import netns as _pr_netns

NETNS_RUN_DIR = "/run/netns"


def list_netns() -> list[str]:
    try:
        return sorted(_pr_netns.listnetns())
    except FileNotFoundError:
        return []


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_RUN_DIR, name))


def create_netns(name: str) -> None:
    if netns_exists(name):
        raise FileExistsError(f"network namespace {name} already exists")
    _pr_netns.create(name)


def remove_netns(name: str) -> bool:
    """Remove a namespace if present. Returns True if something was removed.

    The namespace itself lives on until its last process and socket are gone;
    callers stop processes first so the links inside die with it.
    """
    if not netns_exists(name):
        return False
    _pr_netns.remove(name)
    return True


def processes_in(names: list[str], proc: str = "/proc") -> list[str]:
    """``"pid (comm) in <netns>"`` for processes whose net namespace is one of ``names``."""
    inodes = {ino: n for n in names if (ino := netns_inode(n)) is not None}
    found: list[str] = []
    if not inodes:
        return found
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            ino = os.stat(f"{proc}/{entry}/ns/net").st_ino
            if ino in inodes:
                with open(f"{proc}/{entry}/comm") as f:
                    comm = f.read().strip()
                found.append(f"pid {entry} ({comm}) in {inodes[ino]}")
        except OSError:
            continue
    return found


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(os.path.join(NETNS_RUN_DIR, name)).st_ino
    except OSError:
        return None


class NetnsEnterer:
    """Callable for ``subprocess.Popen(preexec_fn=...)`` that moves the child.

    The move is pyroute2's own :func:`pyroute2.netns.setns`, called the one way
    that is safe between fork and exec: with a namespace *file descriptor*
    opened here in the parent (a name would make pyroute2 list /run/netns and,
    with its default ``O_CREAT``, even fork a helper to create a missing
    namespace) and with the C library handle resolved here too (pyroute2 would
    otherwise ``dlopen`` it lazily in the child). What runs in the child is
    then one ``setns(2)`` system call through pyroute2's per-architecture
    syscall table, and the ``cgroup.procs`` writes: no imports, no allocation
    that could deadlock on a lock held by another parent thread.
    (Python 3.12 has ``os.setns``; we support 3.11.)
    """

    def __init__(self, name: str, extra: list[tuple[str, str]] | None = None) -> None:
        self.fd = os.open(os.path.join(NETNS_RUN_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        # (path of a cgroup.procs file) written with the child's PID before exec,
        # so the process and everything it forks start inside the node's cgroups.
        self.cgroup_procs = [p for p, _ in (extra or [])]

    def __call__(self) -> None:
        # flags=0: never create; an fd is used as given and not closed by pyroute2.
        _pr_netns.setns(self.fd, flags=0, libc=self._libc)
        pid = str(os.getpid()).encode()
        for path in self.cgroup_procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def close(self) -> None:
        os.close(self.fd)
