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


def free_port(host: str = "127.0.0.1", span: int = 1) -> int:
    """A port p such that p .. p+span-1 are all free on ``host`` now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(LOW, HIGH - span)
        socks: list[socket.socket] = []
        try:
            for p in range(base, base + span):
                s = socket.socket()
                socks.append(s)
                s.bind((host, p))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    raise AssertionError(f"no {span} free consecutive ports in {LOW}..{HIGH - 1} on {host}")
