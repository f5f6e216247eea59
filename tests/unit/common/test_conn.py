"""common/conn.py on real socket pairs: partial sends, buffering, framing, EOF, refusal, close."""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from common.conn import MAX_OUT, Connection, split_line

BIG = bytes(range(256)) * 40_000  # 10 MB: far more than a socket buffer takes at once


@dataclass
class Pair:
    conn: Connection
    peer: socket.socket
    sel: selectors.BaseSelector
    closed: list[Connection] = field(default_factory=list)

    def events(self) -> int:
        return self.sel.get_key(self.conn.sock).events


@pytest.fixture
def pair() -> Iterator[Pair]:
    yield from _make(None)


@pytest.fixture
def capped() -> Iterator[Pair]:
    yield from _make(100)


def _make(max_input: int | None) -> Iterator[Pair]:
    sel = selectors.DefaultSelector()
    a, b = socket.socketpair()
    closed: list[Connection] = []
    conn = Connection(sel, a, "peer", max_input=max_input, on_close=closed.append)
    conn.register("tag")
    p = Pair(conn, b, sel, closed)
    yield p
    conn.close()
    b.close()
    sel.close()


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


def _pump(p: Pair) -> bytes:
    """Play the event loop and the reader until the connection has nothing queued."""
    got = bytearray()
    while p.conn.open and p.conn.out:
        got += _drain(p.peer)
        p.conn.flush()
    return bytes(got + _drain(p.peer))


# ---- output -------------------------------------------------------------------


def test_small_write_goes_out_at_once(pair: Pair) -> None:
    pair.conn.write(b"hello")
    assert pair.conn.out == b"" and pair.peer.recv(10) == b"hello"
    assert pair.events() == selectors.EVENT_READ
    assert pair.sel.get_key(pair.conn.sock).data == "tag"


def test_partial_send_is_buffered_and_flushed_in_order(pair: Pair) -> None:
    pair.conn.write(BIG[: MAX_OUT // 2])
    pair.conn.write(b"tail")  # queued behind the rest, never sent ahead of it
    assert pair.conn.out.endswith(b"tail") and len(pair.conn.out) < MAX_OUT // 2 + 4
    assert pair.events() == selectors.EVENT_READ | selectors.EVENT_WRITE
    assert _pump(pair) == BIG[: MAX_OUT // 2] + b"tail"
    assert pair.events() == selectors.EVENT_READ  # writable no longer watched once drained
    assert pair.conn.open and not pair.closed


def test_a_peer_that_does_not_read_is_not_read_either(pair: Pair) -> None:
    """Issue 28: past MAX_OUT queued bytes the connection's input is left unread (a client
    sending requests without reading the replies cannot make the daemon queue forever)."""
    pair.conn.write(BIG)
    assert pair.conn.backlogged and len(pair.conn.out) >= MAX_OUT
    assert pair.events() == selectors.EVENT_WRITE
    assert _pump(pair) == BIG
    assert not pair.conn.backlogged and pair.events() == selectors.EVENT_READ


def test_flush_with_the_socket_still_full_keeps_everything(pair: Pair) -> None:
    pair.conn.write(BIG)
    queued = bytes(pair.conn.out)
    pair.conn.flush()  # nobody read: the kernel takes nothing more
    assert pair.conn.out == queued and pair.conn.open


def test_write_to_a_vanished_peer_closes(pair: Pair) -> None:
    pair.peer.close()
    pair.conn.write(b"x")
    assert not pair.conn.open and pair.closed == [pair.conn]


def test_flush_to_a_vanished_peer_closes(pair: Pair) -> None:
    pair.conn.write(BIG)
    assert pair.conn.out
    pair.peer.close()
    pair.conn.flush()
    assert not pair.conn.open and pair.closed == [pair.conn]


def test_drain_blocking_sends_the_rest_then_closes(pair: Pair) -> None:
    pair.conn.write(b"x" * 300_000)
    got = bytearray()
    pair.peer.settimeout(5)

    def reader() -> None:
        while chunk := pair.peer.recv(1 << 16):
            got.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    pair.conn.drain_blocking(timeout=5)
    t.join(5)
    assert len(got) == 300_000 and not pair.conn.open and pair.closed == [pair.conn]


# ---- input --------------------------------------------------------------------


def test_recv_nothing_data_and_eof(pair: Pair) -> None:
    assert pair.conn.recv() is None
    pair.peer.sendall(b"abc")
    assert pair.conn.recv() == b"abc"
    pair.peer.close()
    assert pair.conn.recv() == b"" and not pair.conn.open and pair.closed == [pair.conn]
    pair.conn.write(b"ignored")  # writing to a closed connection is a no-op
    pair.conn.flush()


def test_eof_after_a_request_still_delivers_the_queued_answer(pair: Pair) -> None:
    pair.conn.write(BIG)  # the answer, too big to go out at once
    pair.peer.shutdown(socket.SHUT_WR)  # the client has said all it will say
    assert pair.conn.recv() == b""
    assert pair.conn.open and pair.conn.closing
    assert pair.events() == selectors.EVENT_WRITE  # EOF is not read again and again
    assert _pump(pair) == BIG
    assert not pair.conn.open and pair.closed == [pair.conn]


def test_frames_cut_lines_across_reads(pair: Pair) -> None:
    c = pair.conn
    assert c.frames(b"one\ntw", split_line) == [b"one\n"]
    assert c.inbuf == b"tw"
    assert c.frames(b"o\n\nthree\nfo", split_line) == [b"two\n", b"\n", b"three\n"]
    assert c.frames(b"", split_line) == []
    assert c.frames(b"ur\n", split_line) == [b"four\n"] and c.inbuf == b""
    assert not c.overflowed  # no cap on this one


def test_frames_with_a_length_prefix_split() -> None:
    def split(buf: bytearray, start: int) -> int | None:
        if len(buf) - start < 1:
            return None
        end = start + 1 + buf[start]
        return end if end <= len(buf) else None

    a, b = socket.socketpair()
    try:
        c = Connection(selectors.DefaultSelector(), a, "peer")
        assert c.frames(b"\x03abc\x02d", split) == [b"\x03abc"]
        assert c.frames(b"e\x00", split) == [b"\x02de", b"\x00"]
    finally:
        a.close()
        b.close()


def test_a_split_that_does_not_advance_is_a_bug(pair: Pair) -> None:
    with pytest.raises(ValueError, match="not past"):
        pair.conn.frames(b"abc", lambda buf, start: start)


def test_oversize_input_is_flagged_and_refused(capped: Pair) -> None:
    c = capped.conn
    assert c.frames(b"ok\n" + b"x" * 100, split_line) == [b"ok\n"]
    assert not c.overflowed  # exactly at the cap: still fine
    assert c.frames(b"x", split_line) == [] and c.overflowed
    c.refuse(b"too long\n")
    assert c.inbuf == b"" and not c.overflowed  # the garbage is not kept
    assert not c.open and capped.closed == [c]
    assert _drain(capped.peer) == b"too long\n"


# ---- refusal and close ------------------------------------------------------------


def test_refuse_sends_its_words_after_queued_output_then_closes(pair: Pair) -> None:
    pair.conn.write(BIG)
    pair.conn.refuse(b"error: bye")
    assert pair.conn.open and pair.conn.closing
    assert pair.events() == selectors.EVENT_WRITE  # no more reading from a refused peer
    pair.conn.write(b"late")  # still ordered after what was queued
    assert _pump(pair) == BIG + b"error: bye" + b"late"
    assert not pair.conn.open and pair.closed == [pair.conn]


def test_refuse_with_nothing_to_say_closes_at_once(pair: Pair) -> None:
    pair.conn.refuse(b"")
    assert not pair.conn.open and pair.closed == [pair.conn]
    assert _drain(pair.peer) == b""  # EOF


def test_close_after_flush_waits_for_queued_output(pair: Pair) -> None:
    pair.conn.write(b"x" * 2_000_000)
    pair.conn.close_after_flush()
    assert pair.conn.open and not pair.closed
    assert len(_pump(pair)) == 2_000_000
    assert pair.closed == [pair.conn]


def test_close_after_flush_with_nothing_queued_closes_now(pair: Pair) -> None:
    pair.conn.close_after_flush()
    assert not pair.conn.open and pair.closed == [pair.conn]


def test_close_unregisters_once_and_keeps_the_fd_number(pair: Pair) -> None:
    fd = pair.conn.fd
    pair.conn.close()
    pair.conn.close()
    pair.conn.close_after_flush()
    assert pair.closed == [pair.conn]  # on_close runs once
    assert pair.conn.fd == fd and not pair.sel.get_map()
    assert pair.conn.recv() == b""  # a closed socket reads as EOF, nothing raised
