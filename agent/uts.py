"""A node's own hostname: the agent enters a new UTS namespace and names it.

The local cluster's nodes are network namespaces of one host, so every job saw the
host's hostname; programs that identify nodes by hostname (Open MPI's runtime does:
two daemons with one name are one node to it) could not tell them apart. With
``--hostname`` the agent unshares its UTS namespace before it starts anything and
sets the node's name; every job it launches inherits it. Needs CAP_SYS_ADMIN (the
agent runs as root). Real nodes have their own names and do not need it.
"""

from __future__ import annotations

import ctypes
import os
import socket

from common.errors import UsageError

CLONE_NEWUTS = 0x04000000


def own_hostname(name: str) -> None:
    """Enter a new UTS namespace and set its hostname to ``name``."""
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-." for c in name):
        raise UsageError(f"--hostname {name!r}: letters, digits, '-' and '.', at most 64")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        err = ctypes.get_errno()
        raise UsageError(
            f"--hostname {name}: cannot enter a UTS namespace ({os.strerror(err)})",
            fix="run the agent as root, or leave --hostname out",
        )
    socket.sethostname(name)
