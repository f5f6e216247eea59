"""The start-up mesh survives Linux's TCP self-connect (apps/mp/mesh.py)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from apps.mp import mesh
from common.ports import free_port


def _self_connected(port: int) -> socket.socket:
    """A real socket connected to itself: bound to ``port`` and connected to it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.connect(("127.0.0.1", port))
    return s


def test_a_socket_connected_to_itself_is_recognised() -> None:
    port = free_port()
    try:
        s = _self_connected(port)
    except OSError as e:  # a kernel without simultaneous open
        pytest.skip(f"this kernel does not self-connect ({e})")
    with s:
        assert mesh.is_self_connected(s)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    with lst, socket.create_connection(lst.getsockname()) as c:
        assert not mesh.is_self_connected(c)


def test_connect_drops_a_self_connection_and_reaches_the_rank_that_listens_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rank 1 connects to rank 0 before rank 0 listens; its first attempt connects to itself.

    Without the check, rank 1 would take that self-connection for rank 0
    (and hold the port rank 0 needs); with it, rank 1 retries and reaches rank 0.
    """
    port = free_port()
    real_socket = socket.socket
    made: list[socket.socket] = []

    def first_one_self_connects(*a: object, **kw: object) -> socket.socket:
        s = real_socket(*a, **kw)  # type: ignore[arg-type]
        if not made:  # the first connect attempt: source port = destination port
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
        made.append(s)
        return s

    peers = ["127.0.0.1", "127.0.0.1"]
    monkeypatch.setattr(mesh.socket, "socket", first_one_self_connects)
    links: dict[int, list[mesh.Link]] = {}
    errors: list[BaseException] = []

    def rank0() -> None:
        while len(made) < 2:  # rank 0 starts after rank 1's self-connection is gone
            time.sleep(0.01)
        try:
            lst = mesh.listen(0, peers, port, 2)
            with lst:
                links[0] = mesh.Handshake(0, 2, peers, port, "j", 10).connect_all(lst)
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=rank0)
    t.start()
    try:
        links[1] = mesh.Handshake(1, 2, peers, port, "j", 10).connect_all(None)
    finally:
        t.join(15)
    assert not errors, errors
    assert [link.peer for link in links[1]] == [0] and [link.peer for link in links[0]] == [1]
    s1, s0 = links[1][0].sock, links[0][0].sock
    assert s1.getpeername() == s0.getsockname() and s1.getsockname() != s1.getpeername()
    for link in links[0] + links[1]:
        link.sock.close()
