"""A non-blocking stream connection on a selector, shared by the agent and the controller.

Both daemons run one selectors loop; each accepted socket becomes a
:class:`Connection`: writes go out at once when the socket takes them and the
rest is buffered (the selector then also watches for EVENT_WRITE until the
buffer drains); reads return what arrived; closing can wait for queued output
(so a refusal is delivered before the socket closes). What the bytes mean
(authenticated frames, JSON lines) is the owner's business.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
from collections.abc import Callable

RECV_SIZE = 1 << 16


class Connection:
    """One accepted socket: buffered non-blocking writes, reads, close (maybe after flush)."""

    def __init__(
        self,
        sel: selectors.BaseSelector,
        sock: socket.socket,
        peer: str,
        *,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.sel = sel
        self.sock = sock
        self.peer = peer
        self.out = bytearray()
        self.inbuf = bytearray()  # for line- or frame-oriented owners
        self.closing = False  # close once ``out`` has drained
        self._on_close = on_close
        self._tag: object = self
        self.fd = sock.fileno()
        sock.setblocking(False)

    @property
    def open(self) -> bool:
        return self.sock.fileno() >= 0

    def register(self, tag: object) -> None:
        """Watch for input; ``tag`` is what the selector hands back as ``key.data``."""
        self._tag = tag
        self.sel.register(self.sock, selectors.EVENT_READ, tag)

    def write(self, data: bytes) -> None:
        """Send what the socket takes now, queue the rest; a dead peer closes us."""
        if not self.open:
            return
        if self.out:
            self.out += data
            return
        try:
            n = self.sock.send(data)
        except BlockingIOError:
            n = 0
        except OSError:
            self.close()
            return
        if n < len(data):
            self.out += data[n:]
            self._watch(selectors.EVENT_READ | selectors.EVENT_WRITE)
        elif self.closing:
            self.close()

    def flush(self) -> None:
        """Called on EVENT_WRITE: push queued output; close if asked and drained."""
        if not self.open or not self.out:
            return
        try:
            n = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.out[:n]
        if not self.out:
            if self.closing:
                self.close()
            else:
                self._watch(selectors.EVENT_READ)

    def recv(self) -> bytes | None:
        """What arrived; None when nothing did; b"" at EOF or error (then closed)."""
        try:
            data = self.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self.close()
        return data

    def close_after_flush(self) -> None:
        """Close once queued output is out (at once when there is none)."""
        self.closing = True
        if not self.out:
            self.close()
        else:
            self._watch(selectors.EVENT_WRITE)

    def drain_blocking(self, timeout: float = 1.0) -> None:
        """Send queued output synchronously (a reply before shutdown), then close."""
        with contextlib.suppress(OSError):
            if self.open and self.out:
                self.sock.setblocking(True)
                self.sock.settimeout(timeout)
                self.sock.sendall(bytes(self.out))
                self.out.clear()
        self.close()

    def close(self) -> None:
        if self.open:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self.sock)
            self.sock.close()
            if self._on_close is not None:
                self._on_close(self)

    def _watch(self, events: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.modify(self.sock, events, self._tag)
