"""Frames on a data connection (docs/cdc.md "Frames").

Every message is a 40-byte header and ``size`` payload bytes. The header
carries what Yu & Byun 2011 §4.2 has the NIC see: sender, tag, size, the send time
and the sender node's current expected rescheduling latency (ERL).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from agent import nicproto
from apps.mp.errors import MPError

MAGIC = b"CSM1"
VERSION = 1
DATA = 1
HELLO = 2
KINDS = (DATA, HELLO)
MAX_SIZE = 256 << 20  # one message, bytes
HEADER = struct.Struct("!4sBBHiiQqq")  # magic ver kind flags src tag size send_ns erl_us
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 40 == nicproto.FRAME_HEADER_SIZE  # the agent bounds claims with it


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 µs more per message
class Header:
    """One parsed header (read-only by convention)."""

    kind: int
    src: int
    tag: int
    size: int
    send_ns: int
    erl_us: int


def pack(kind: int, src: int, tag: int, size: int, send_ns: int, erl_us: int) -> bytes:
    """The 40-byte header, network byte order (docs/cdc.md "Frames")."""
    return HEADER.pack(MAGIC, VERSION, kind, 0, src, tag, size, send_ns, erl_us)


def unpack(buf: bytes | bytearray | memoryview, offset: int = 0, who: str = "peer") -> Header:
    """Parse and validate one header; errors name the peer (``who``) and the field."""
    magic, ver, kind, _flags, src, tag, size, send_ns, erl_us = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        raise MPError(f"bad frame from {who}: magic {bytes(magic)!r}, want {MAGIC!r}")
    if ver != VERSION:
        raise MPError(f"bad frame from {who}: version {ver}, want {VERSION}")
    if kind not in KINDS:
        raise MPError(f"bad frame from {who}: unknown kind {kind}")
    if size > MAX_SIZE:
        raise MPError(f"bad frame from {who}: size {size} exceeds the {MAX_SIZE} byte limit")
    return Header(kind, src, tag, size, send_ns, erl_us)
