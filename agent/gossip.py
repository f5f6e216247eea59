"""ERL exchange between agents over the control network (docs/cdc.md "NIC emulation").

Yu & Byun 2011 piggybacks each node's expected rescheduling latency on outgoing
messages and the NIC files it with the arrival (§4.2). Our agent cannot read a
header without consuming it for the rank, so agents tell each other their ERL
directly: one small UDP datagram to every peer agent when the value moved by
more than 5 % (and at least every ``refresh_s``), authenticated with the
cluster's key (HMAC-SHA256, 16 bytes). A datagram that fails the check is
dropped and counted; it never changes a table entry.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger("agent.gossip")

MAGIC = b"ERL1"
MAC_LEN = 16
_HEAD = struct.Struct("!4sB")  # magic, node name length
_BODY = struct.Struct("!qQ")  # erl_us, sequence
MAX_NODE = 64
CHANGE = 0.05  # relative change that triggers a send


def pack(key: bytes, node: str, erl_us: int, seq: int) -> bytes:
    name = node.encode()
    if not 0 < len(name) <= MAX_NODE:
        raise ValueError(f"node name {node!r} must be 1..{MAX_NODE} bytes")
    payload = _HEAD.pack(MAGIC, len(name)) + name + _BODY.pack(erl_us, seq)
    return payload + hmac.digest(key, payload, hashlib.sha256)[:MAC_LEN]


def unpack(key: bytes, data: bytes) -> tuple[str, int, int]:
    """(node, erl_us, seq) of an authentic datagram; ValueError otherwise."""
    if len(data) < _HEAD.size + _BODY.size + MAC_LEN:
        raise ValueError("short datagram")
    payload, mac = data[:-MAC_LEN], data[-MAC_LEN:]
    if not hmac.compare_digest(mac, hmac.digest(key, payload, hashlib.sha256)[:MAC_LEN]):
        raise ValueError("bad MAC")
    magic, n = _HEAD.unpack_from(payload)
    if magic != MAGIC or len(payload) != _HEAD.size + n + _BODY.size:
        raise ValueError("bad header")
    node = payload[_HEAD.size : _HEAD.size + n].decode(errors="replace")
    erl_us, seq = _BODY.unpack_from(payload, _HEAD.size + n)
    return node, int(erl_us), int(seq)


@dataclass
class PeerErl:
    erl_us: float
    heard_s: float
    seq: int


class ErlGossip:
    def __init__(
        self,
        node: str,
        key: bytes,
        bind: tuple[str, int],
        peers: Mapping[str, tuple[str, int]],
        refresh_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.key = key
        self.peers = {n: a for n, a in peers.items() if n != node}
        self.refresh_s = refresh_s
        self.clock = clock
        self.table: dict[str, PeerErl] = {}
        self.seq = 0
        self.sent = 0
        self.rejected = 0
        self._last_sent: tuple[float, float] | None = None  # (time, value)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(bind)

    def close(self) -> None:
        self.sock.close()

    def erl_of(self, node: str | None) -> float:
        """The last ERL heard from ``node`` (0 when unknown: assume it runs now)."""
        if node is None:
            return 0.0
        e = self.table.get(node)
        return e.erl_us if e is not None else 0.0

    def maybe_send(self, erl_us: float) -> bool:
        now = self.clock()
        last = self._last_sent
        if last is not None:
            t, v = last
            moved = abs(erl_us - v) > CHANGE * max(abs(v), 1.0)
            if not moved and now - t < self.refresh_s:
                return False
        # Wall-clock based so a restarted agent's datagrams are not taken for replays.
        self.seq = max(self.seq + 1, time.time_ns() // 1000)
        data = pack(self.key, self.node, int(erl_us), self.seq)
        for addr in self.peers.values():
            try:
                self.sock.sendto(data, addr)
                self.sent += 1
            except OSError as e:  # a peer agent down: its ERL just goes stale
                log.debug("ERL to %s: %s", addr, e)
        self._last_sent = (now, erl_us)
        return True

    def readable(self) -> int:
        """Drain the socket; returns how many valid datagrams were taken."""
        taken = 0
        while True:
            try:
                data, _addr = self.sock.recvfrom(512)
            except (BlockingIOError, InterruptedError):
                return taken
            except OSError:
                return taken
            try:
                node, erl, seq = unpack(self.key, data)
            except ValueError:
                self.rejected += 1
                continue
            if node not in self.peers:
                self.rejected += 1
                continue
            old = self.table.get(node)
            if old is not None and seq <= old.seq:
                continue  # reordered or replayed
            self.table[node] = PeerErl(float(erl), self.clock(), seq)
            taken += 1
