"""Stopping a ``socketserver`` server without waiting out its poll interval.

``serve_forever`` looks for a shutdown request only between ``select`` calls that
each wait up to ``poll_interval`` (0.5 s in prometheus-client's metrics server and in
the node's I/O device), so ``shutdown()`` blocked up to half a second: most of the
time an agent took to exit on SIGTERM, paid at every cluster teardown
(docs/cluster.md, "Bringing a cluster up and down"). A connection to the listening
socket ends the wait at once; the server takes it as a client that sends nothing.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading

POKE_EVERY_S = 0.02  # until the loop has seen the request (a poke may come before it)


def stop_server(server: socketserver.BaseServer) -> None:
    """``server.shutdown()`` and ``server_close()``, waking its loop by connecting."""
    stopper = threading.Thread(target=server.shutdown, name="server-stop", daemon=True)
    stopper.start()
    while stopper.is_alive():
        _poke(server)
        stopper.join(POKE_EVERY_S)
    server.server_close()


def _poke(server: socketserver.BaseServer) -> None:
    """Connect to the server's listening socket and hang up (best effort: a server we
    cannot reach still stops, at its poll interval)."""
    sock = getattr(server, "socket", None)
    if sock is None:
        return
    family = sock.family
    address = server.server_address
    if family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        host = address[0]
        if host in ("", "0.0.0.0", "::"):
            host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        address = (host, *address[1:])
    with (
        contextlib.suppress(OSError),
        socket.socket(family, socket.SOCK_STREAM) as s,
    ):
        s.settimeout(0.2)
        s.connect(address)
