"""What a daemon's listening socket lets any local user or peer hold (issue 28).

Connections that have not authenticated cost the daemon descriptors, buffers
and loop turns, and anyone can open them: one local user opening connections
as fast as it can ran an agent out of descriptors (``accept`` raised EMFILE
and the agent exited) and set the controller spinning at real-time priority.
This module holds the rules both daemons (and the relay, and the NIC socket)
apply:

* :class:`Acceptor`: ``accept`` that never raises. At EMFILE/ENFILE it closes a
  spare descriptor, accepts the waiting connection, closes it at once and
  reopens the spare: the backlog drains, the loop does not spin on a listener
  that stays readable, and nothing it holds is given up.
* :class:`Admission`: at most ``pending_per_peer`` unauthenticated connections
  per source (a TCP address; all local users share the host's) and
  ``pending_total`` in all; a new one beyond that evicts the *oldest* pending
  one, so a flood cannot lock a legitimate client out (its hello arrives
  within microseconds of its connect and authenticates it). At most
  ``open_per_user`` connections per uid on a unix socket (root exempt); a new
  one beyond that is refused, which only hurts the user who holds them.
  An unauthenticated connection gets ``handshake_s`` to authenticate; an
  established one that sends nothing for ``idle_s`` is closed.

Each daemon calls :meth:`Admission.expired` from its loop. Reply backpressure
(``max_out``) is common/conn.py's.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("cosched.guard")

#: accept() errors that mean "out of descriptors": shed the connection.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})
#: accept() errors that concern only the connection being accepted: skip it.
_TRANSIENT = frozenset(
    {errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENOBUFS, errno.ENOMEM, errno.EINTR}
)


@dataclass(frozen=True)
class Limits:
    pending_per_peer: int = 128  # unauthenticated connections per source
    pending_total: int = 1024  # unauthenticated connections in all
    open_per_user: int = 32  # unix socket: open connections per uid (root exempt)
    handshake_s: float = 5.0  # to authenticate
    idle_s: float = 600.0  # an established connection silent this long is closed
    accept_batch: int = 16  # accepts per loop turn: the loop reads between batches
    listen_backlog: int = 512


DEFAULT = Limits()


class Acceptor:
    """``accept`` on a non-blocking listener that returns None instead of raising."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.shed = 0  # connections accepted and closed for want of descriptors
        self._spare = _open_spare()
        self._warned = False

    def accept(self) -> tuple[socket.socket, Any] | None:
        try:
            return self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            if e.errno in _EXHAUSTED:
                self._shed(e)
                return None
            if e.errno in _TRANSIENT or isinstance(e, ConnectionError):
                return None
            log.warning("accept on %s failed: %s", _name(self.listener), e)
            return None

    def accept_many(self, limit: int) -> list[tuple[socket.socket, Any]]:
        out = []
        for _ in range(limit):
            got = self.accept()
            if got is None:
                break
            out.append(got)
        return out

    def _shed(self, err: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.warning("out of descriptors (%s): refusing new connections on %s until some "
                        "close", err.strerror, _name(self.listener))  # fmt: skip
        if self._spare >= 0:
            os.close(self._spare)
            self._spare = -1
        with contextlib.suppress(OSError):
            sock, _ = self.listener.accept()
            sock.close()
            self.shed += 1
        self._spare = _open_spare()

    def close(self) -> None:
        if self._spare >= 0:
            os.close(self._spare)
            self._spare = -1


def _open_spare() -> int:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def _name(s: socket.socket) -> str:
    try:
        return str(s.getsockname())
    except OSError:
        return "a listener"


class Admission:
    """Per-source pending caps, per-uid open caps and deadlines of one server's connections.

    Connections are any hashable objects with a ``close()``; the owner tells the
    admission when one authenticates (:meth:`authenticated`), sends something
    (:meth:`heard`) or goes away (:meth:`forget`).
    """

    def __init__(self, limits: Limits = DEFAULT, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self._pending: OrderedDict[Hashable, tuple[Hashable, float]] = OrderedDict()
        self._per_peer: dict[Hashable, OrderedDict[Hashable, None]] = {}
        self._established: dict[Hashable, float] = {}  # conn -> last heard
        self._per_user: dict[int, int] = {}
        self._user_of: dict[Hashable, int] = {}
        self.evicted = 0
        self.refused = 0
        self.expired_count = 0

    # ---- admission -------------------------------------------------------------------
    def admit_pending(self, conn: Hashable, peer: Hashable) -> list[Hashable]:
        """Record an unauthenticated connection from ``peer``; returns those to close
        now (the oldest pending ones over the caps)."""
        self._pending[conn] = (peer, self.clock())
        self._per_peer.setdefault(peer, OrderedDict())[conn] = None
        drop: list[Hashable] = []
        mine = self._per_peer[peer]
        while len(mine) > self.limits.pending_per_peer:
            drop.append(next(iter(mine)))
            self._drop_pending(drop[-1])
        while len(self._pending) > self.limits.pending_total:
            drop.append(next(iter(self._pending)))
            self._drop_pending(drop[-1])
        self.evicted += len(drop)
        return drop

    def admit_user(self, conn: Hashable, uid: int, exempt: bool = False) -> bool:
        """A unix-socket connection of ``uid``: False (refuse it) past the per-user cap."""
        n = self._per_user.get(uid, 0)
        if not exempt and uid != 0 and n >= self.limits.open_per_user:
            self.refused += 1
            return False
        self._per_user[uid] = n + 1
        self._user_of[conn] = uid
        self._established[conn] = self.clock()
        return True

    def authenticated(self, conn: Hashable) -> None:
        if conn in self._pending:
            self._drop_pending(conn)
        self._established[conn] = self.clock()

    def is_pending(self, conn: Hashable) -> bool:
        return conn in self._pending

    def heard(self, conn: Hashable) -> None:
        if conn in self._established:
            self._established[conn] = self.clock()

    def forget(self, conn: Hashable) -> None:
        if conn in self._pending:
            self._drop_pending(conn)
        self._established.pop(conn, None)
        uid = self._user_of.pop(conn, None)
        if uid is not None:
            left = self._per_user.get(uid, 1) - 1
            if left > 0:
                self._per_user[uid] = left
            else:
                self._per_user.pop(uid, None)

    def _drop_pending(self, conn: Hashable) -> None:
        peer, _ = self._pending.pop(conn)
        mine = self._per_peer.get(peer)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self._per_peer[peer]

    # ---- deadlines -------------------------------------------------------------------
    def expired(self) -> list[Hashable]:
        """Connections past their deadline (the caller closes them; they stay recorded
        until :meth:`forget`)."""
        now = self.clock()
        out = []
        for conn, (_peer, since) in self._pending.items():
            if now - since <= self.limits.handshake_s:
                break  # ordered by arrival: the rest are younger
            out.append(conn)
        idle = self.limits.idle_s
        out += [c for c, heard in self._established.items() if now - heard > idle]
        self.expired_count += len(out)
        return out

    def counts(self) -> dict[str, int]:
        return {
            "pending": len(self._pending),
            "established": len(self._established),
            "evicted": self.evicted,
            "refused": self.refused,
            "expired": self.expired_count,
        }
