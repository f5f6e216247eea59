"""common/conn.py on real socket pairs: partial sends, buffering, EOF, close after flush."""

from __future__ import annotations

import selectors
import socket

from common.conn import Connection


def _pair(closed: list[Connection]) -> tuple[Connection, socket.socket, selectors.BaseSelector]:
    sel = selectors.DefaultSelector()
    a, b = socket.socketpair()
    conn = Connection(sel, a, "peer", on_close=closed.append)
    conn.register("tag")
    return conn, b, sel


def _drain(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    got = bytearray()
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return bytes(got)
        if not chunk:
            return bytes(got)
        got += chunk


def test_small_write_goes_out_at_once() -> None:
    closed: list[Connection] = []
    conn, peer, sel = _pair(closed)
    conn.write(b"hello")
    assert conn.out == b"" and peer.recv(10) == b"hello"
    assert sel.get_key(conn.sock).events == selectors.EVENT_READ


def test_partial_send_is_buffered_and_flushed_in_order() -> None:
    closed: list[Connection] = []
    conn, peer, sel = _pair(closed)
    big = bytes(range(256)) * 40_000  # far more than a socket buffer
    conn.write(big)
    conn.write(b"tail")
    assert conn.out  # the kernel took only part
    assert sel.get_key(conn.sock).events & selectors.EVENT_WRITE
    got = bytearray()
    while conn.out:
        got += _drain(peer)
        conn.flush()
    got += _drain(peer)
    assert bytes(got) == big + b"tail"
    assert sel.get_key(conn.sock).events == selectors.EVENT_READ


def test_close_after_flush_waits_for_queued_output() -> None:
    closed: list[Connection] = []
    conn, peer, _ = _pair(closed)
    big = b"x" * 2_000_000
    conn.write(big)
    conn.close_after_flush()
    assert conn.open and not closed
    got = bytearray()
    while conn.open:
        got += _drain(peer)
        conn.flush()
    got += _drain(peer)
    assert len(got) == len(big) and closed == [conn]


def test_recv_nothing_data_and_eof() -> None:
    closed: list[Connection] = []
    conn, peer, _ = _pair(closed)
    assert conn.recv() is None
    peer.sendall(b"abc")
    assert conn.recv() == b"abc"
    peer.close()
    assert conn.recv() == b"" and not conn.open and closed == [conn]
    conn.write(b"ignored")  # writing to a closed connection is a no-op
