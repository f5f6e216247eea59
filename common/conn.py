"""A non-blocking stream connection on a selector, shared by the agent and the controller.

Both daemons run one selectors loop; each accepted socket becomes a
:class:`Connection`: writes go out at once when the socket takes them and the
rest is buffered (the selector then also watches for EVENT_WRITE until the
buffer drains); reads return what arrived; closing can wait for queued output
(so a refusal is delivered before the socket closes). What the bytes mean
(authenticated frames, JSON lines) is the owner's business: it either keeps
its own decoder (the agent wire protocol's ``FrameDecoder``) or lets
:meth:`Connection.frames` cut the input with a :data:`Split` callback, capped
at ``max_input`` bytes of incomplete input. While more than ``MAX_OUT`` bytes
of output wait for a peer that does not read, the connection is not read
either (issue 28: replies were queued without bound while the server kept
reading requests); :attr:`Connection.backlogged` says so.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
from collections.abc import Callable

RECV_SIZE = 1 << 16
MAX_OUT = 4 << 20  # queued output above which the peer's input is left unread

Split = Callable[[bytearray, int], int | None]
"""``split(buf, start)``: where the frame beginning at ``start`` ends (exclusive),
or None while it is incomplete."""


def split_line(buf: bytearray, start: int) -> int | None:
    """A :data:`Split` for newline-terminated frames (the newline stays in the frame)."""
    end = buf.find(b"\n", start)
    return None if end < 0 else end + 1


class Connection:
    """One accepted socket: buffered non-blocking writes, reads, close (maybe after flush).

    ``on_close(conn)`` runs once, when the socket is closed for whatever reason
    (the owner forgets the connection there).
    """

    def __init__(
        self,
        sel: selectors.BaseSelector,
        sock: socket.socket,
        peer: str,
        *,
        max_input: int | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.sel = sel
        self.sock = sock
        self.peer = peer
        self.max_input = max_input
        self.out = bytearray()
        self.inbuf = bytearray()  # incomplete input kept by frames()
        self.closing = False  # input is ignored; close once ``out`` has drained
        self._on_close = on_close
        self._tag: object = self
        self._events = 0  # what the selector watches now (0 = not registered)
        self.fd = sock.fileno()  # kept after close: owners index connections by it
        sock.setblocking(False)

    @property
    def open(self) -> bool:
        return self.sock.fileno() >= 0

    def register(self, tag: object) -> None:
        """Watch for input; ``tag`` is what the selector hands back as ``key.data``."""
        self._tag = tag
        self._events = selectors.EVENT_READ
        self.sel.register(self.sock, self._events, tag)

    # ---- output ----------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Send what the socket takes now, queue the rest; a dead peer closes us."""
        if not self.open:
            return
        if data and not self.out:  # queued bytes go first: keep the order
            try:
                n = self.sock.send(data)
            except BlockingIOError:
                n = 0
            except OSError:
                self.close()
                return
            data = data[n:]
        self.out += data
        self._settle()

    def flush(self) -> None:
        """Called on EVENT_WRITE: push queued output; close if asked and drained."""
        if not self.open:
            return
        if self.out:
            try:
                n = self.sock.send(self.out)
            except BlockingIOError:
                return
            except OSError:
                self.close()
                return
            del self.out[:n]
        self._settle()

    def drain_blocking(self, timeout: float = 1.0) -> None:
        """Send queued output synchronously (a reply before shutdown), then close."""
        with contextlib.suppress(OSError):
            if self.open and self.out:
                self.sock.setblocking(True)
                self.sock.settimeout(timeout)
                self.sock.sendall(bytes(self.out))
                self.out.clear()
        self.close()

    # ---- input -----------------------------------------------------------------
    def recv(self) -> bytes | None:
        """What arrived; None when nothing did; b"" at EOF or on an error.

        After an error the connection is closed. At EOF it closes once queued
        output is out: a client may shut only its sending side and still
        wait for the answers.
        """
        try:
            data = self.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            self.close()
            return b""
        if not data:
            self.close_after_flush()
        return data

    def frames(self, data: bytes, split: Split) -> list[bytes]:
        """Add ``data`` to the input buffer and take out each complete frame, in order.

        What remains is an incomplete frame; :attr:`overflowed` says whether
        it has grown past ``max_input`` (the owner then refuses the peer).
        """
        self.inbuf += data
        out: list[bytes] = []
        start = 0
        while (end := split(self.inbuf, start)) is not None:
            if end <= start:
                raise ValueError(f"split returned {end}, not past {start}")
            out.append(bytes(self.inbuf[start:end]))
            start = end
        del self.inbuf[:start]
        return out

    @property
    def backlogged(self) -> bool:
        """More output is queued than a peer that reads would leave: stop taking requests."""
        return len(self.out) >= MAX_OUT

    @property
    def overflowed(self) -> bool:
        """The incomplete input held by :meth:`frames` exceeds ``max_input``."""
        return self.max_input is not None and len(self.inbuf) > self.max_input

    # ---- closing ---------------------------------------------------------------
    def refuse(self, last: bytes) -> None:
        """Stop reading, send ``last`` (an error for the peer) after queued output, close."""
        self.inbuf.clear()
        self.closing = True
        self.write(last)

    def close_after_flush(self) -> None:
        """Close once queued output is out (at once when there is none)."""
        self.closing = True
        if self.open:
            self._settle()

    def close(self) -> None:
        if self.open:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self.sock)
            self._events = 0
            self.sock.close()
            if self._on_close is not None:
                self._on_close(self)

    def _settle(self) -> None:
        """Close if asked and drained; else watch input unless closing, output while queued."""
        if self.closing and not self.out:
            self.close()
            return
        events = 0 if self.closing or self.backlogged else selectors.EVENT_READ
        if self.out:
            events |= selectors.EVENT_WRITE
        # Only on a change: the agent writes an ack per quantum, and a modify is a syscall.
        if events != self._events and self._events:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.modify(self.sock, events, self._tag)
            self._events = events
