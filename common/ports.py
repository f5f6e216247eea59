"""Free TCP ports for tests and benchmarks, below Linux's ephemeral range (32768-).

A port from ``bind(0)`` lies in the ephemeral range, where any outgoing
connection on the host -- including one to that very port while nobody
listens, which Linux may connect to itself -- can take it before the caller's
server binds it. Ports drawn from 20000..31999 are never handed out that way.
"""

from __future__ import annotations

import random
import socket

LOW, HIGH = 20000, 32000


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now, in LOW..HIGH-1."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(LOW, HIGH)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        return port
    raise AssertionError(f"no free port in {LOW}..{HIGH - 1} on {host}")
