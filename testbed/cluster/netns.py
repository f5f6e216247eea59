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
CLONE_NEWNET = 0x40000000


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


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(os.path.join(NETNS_RUN_DIR, name)).st_ino
    except OSError:
        return None


class NetnsEnterer:
    """Callable for ``subprocess.Popen(preexec_fn=...)`` that moves the child.

    The namespace file is opened and libc resolved in the parent, so the code
    running between fork and exec only makes one system call (no imports, no
    allocation that could deadlock on a lock held by another parent thread).
    Python 3.11 has no ``os.setns``, hence ctypes.
    """

    def __init__(self, name: str, extra: list[tuple[str, str]] | None = None) -> None:
        self.fd = os.open(os.path.join(NETNS_RUN_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
        libname = ctypes.util.find_library("c") or "libc.so.6"
        self._libc = ctypes.CDLL(libname, use_errno=True)
        # (path of a cgroup.procs file) written with the child's PID before exec,
        # so the process and everything it forks start inside the node's cgroups.
        self.cgroup_procs = [p for p, _ in (extra or [])]

    def __call__(self) -> None:
        if self._libc.setns(self.fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns failed")
        pid = str(os.getpid()).encode()
        for path in self.cgroup_procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def close(self) -> None:
        os.close(self.fd)
