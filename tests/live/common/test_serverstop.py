"""common/serverstop.py on real sockets: a server whose loop waits a minute between
looks for a shutdown request stops at once, and leaves nothing listening."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from common.serverstop import stop_server

SLOW_POLL_S = 60.0  # shutdown() alone would wait up to this long


class _Quiet(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(1)


def _serving(server: socketserver.BaseServer) -> threading.Thread:
    t = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SLOW_POLL_S}, daemon=True
    )
    t.start()
    time.sleep(0.05)  # into its select()
    return t


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_a_slow_polling_server_stops_without_waiting_out_its_interval(
    family: str, tmp_path: Path
) -> None:
    if family == "tcp":
        server: socketserver.BaseServer = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Quiet)
    else:
        server = socketserver.ThreadingUnixStreamServer(str(tmp_path / "s"), _Quiet)
    thread = _serving(server)
    t0 = time.monotonic()
    stop_server(server)
    took = time.monotonic() - t0
    thread.join(5.0)
    assert not thread.is_alive(), "serve_forever still runs"
    assert took < SLOW_POLL_S / 4, f"stop took {took:.1f} s: the loop was not woken"
    assert server.socket.fileno() == -1  # closed


def test_the_metrics_server_stops_and_its_port_is_free() -> None:
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=CollectorRegistry())
    port = httpd.server_address[1]
    stop_server(httpd)
    thread.join(5.0)
    assert not thread.is_alive()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
