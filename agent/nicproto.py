"""The NIC API between the message library (apps/mp) and its agent (docs/cdc.md).

Yu & Byun 2011 §4.2 (Fig. 4) has each process register its receive completion
queue with the kernel so that the NIC firmware and the local scheduler see
its messages; here the library registers a shared memory page and its data
sockets with the node's agent. This module is shared by both sides and free
of any other agent import, so the library can use it without pulling in the
daemon. Two shared pages:

* the rank's **state page** (written by the library, read by the agent):
  wait state, collective flag, unexpected-queue length, consumed count and
  the message-delay histogram;
* the node's **ERL page** (written by the agent, read by the library): the
  node's expected rescheduling latency in µs, copied into every header.
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAGIC = 0x504D5343  # b"CSMP" little-endian
VERSION = 1

WAIT_COMPUTING = 0
WAIT_SPINNING = 1
WAIT_BLOCKED = 2

# Message delay histogram upper bounds, seconds (the last is +Inf).
MD_BUCKETS_S: tuple[float, ...] = (
    10e-6,
    25e-6,
    50e-6,
    100e-6,
    250e-6,
    500e-6,
    1e-3,
    2.5e-3,
    5e-3,
    10e-3,
    25e-3,
    50e-3,
    100e-3,
    1.0,
    10.0,
    math.inf,
)

_HEAD = struct.Struct("<IIII")  # magic, version, wait, in_collective
_COUNTS = struct.Struct("<QQQQ")  # unexpected, consumed, md_count, md_sum_ns
_BUCKETS = struct.Struct("<" + "Q" * len(MD_BUCKETS_S))

OFF_WAIT = 8
OFF_IN_COLLECTIVE = 12
OFF_UNEXPECTED = 16
OFF_CONSUMED = 24
OFF_MD_COUNT = 32
OFF_MD_SUM = 40
OFF_MD_BUCKETS = 48
# the rank's message bytes so far, sent and received (issue 31: a job's network demand for
# N + 1 gangs, read by whoever holds the page; after the fields a reader of version 1
# already knew, which a fresh page has as zero)
OFF_SENT_BYTES = OFF_MD_BUCKETS + 8 * len(MD_BUCKETS_S)  # 176
OFF_RECEIVED_BYTES = OFF_SENT_BYTES + 8
STATE_FIELDS_END = OFF_RECEIVED_BYTES + 8  # 192: bytes the fields use
STATE_SIZE = 4096  # one page

ERL_PAGE_SIZE = 8
_ERL = struct.Struct("<q")

#: Every message the library sends starts with a header this long (apps/mp/frame.py),
#: so a socket that received N bytes delivered at most N // FRAME_HEADER_SIZE messages.
FRAME_HEADER_SIZE = 40


def mesh_port(peers: Sequence[str], port: int, rank: int) -> int:
    """Where ``rank`` listens: ``port`` + the lower ranks at its address (apps/mp/mesh.py)."""
    return port + sum(1 for j in range(rank) if peers[j] == peers[rank])


class PageError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class State:
    wait: int
    in_collective: int
    unexpected: int
    consumed: int
    md_count: int
    md_sum_ns: int
    md_buckets: tuple[int, ...]


def init_state(buf: Any) -> None:
    """Write magic and version into a fresh (zeroed) state page."""
    _HEAD.pack_into(buf, 0, MAGIC, VERSION, WAIT_COMPUTING, 0)


def read_state(buf: Any) -> State:
    magic, version, wait, coll = _HEAD.unpack_from(buf, 0)
    if magic != MAGIC or version != VERSION:
        raise PageError(f"not a cosched state page (magic {magic:#x}, version {version})")
    unexp, consumed, md_count, md_sum = _COUNTS.unpack_from(buf, OFF_UNEXPECTED)
    buckets = _BUCKETS.unpack_from(buf, OFF_MD_BUCKETS)
    return State(wait, coll, unexp, consumed, md_count, md_sum, tuple(buckets))


_FLAGS = struct.Struct("<IIQ")  # wait, in_collective, unexpected (offsets 8..24)


def read_flags(buf: Any) -> tuple[int, int, int]:
    """(wait, in_collective, unexpected): what a decision point needs, in one unpack."""
    wait, coll, unexpected = _FLAGS.unpack_from(buf, OFF_WAIT)
    return int(wait), int(coll), int(unexpected)


# -- writers (the library's side; the agent only reads) ------------------------------------
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_U64X2 = struct.Struct("<QQ")


def write_wait(buf: Any, state: int) -> None:
    """Wait state: WAIT_COMPUTING, WAIT_SPINNING or WAIT_BLOCKED."""
    _U32.pack_into(buf, OFF_WAIT, state)


def write_collective(buf: Any, on: bool) -> None:
    _U32.pack_into(buf, OFF_IN_COLLECTIVE, 1 if on else 0)


def write_unexpected(buf: Any, n: int) -> None:
    _U64.pack_into(buf, OFF_UNEXPECTED, n)


def write_receive(buf: Any, consumed: int, md_count: int, md_sum_ns: int, bucket: int) -> None:
    """One completed receive: the consumed and MD totals, and one more in ``bucket``."""
    _U64.pack_into(buf, OFF_CONSUMED, consumed)
    _U64X2.pack_into(buf, OFF_MD_COUNT, md_count, md_sum_ns)
    off = OFF_MD_BUCKETS + 8 * bucket
    _U64.pack_into(buf, off, _U64.unpack_from(buf, off)[0] + 1)


def write_sent_bytes(buf: Any, n: int) -> None:
    _U64.pack_into(buf, OFF_SENT_BYTES, n)


def write_received_bytes(buf: Any, n: int) -> None:
    _U64.pack_into(buf, OFF_RECEIVED_BYTES, n)


def read_bytes(buf: Any) -> tuple[int, int]:
    """(sent, received) message bytes of the rank so far."""
    sent, received = _U64X2.unpack_from(buf, OFF_SENT_BYTES)
    return int(sent), int(received)


def md_bucket(seconds: float) -> int:
    """Index of the histogram bucket a delay falls into (the first bound >= ``seconds``)."""
    return min(bisect.bisect_left(MD_BUCKETS_S, seconds), len(MD_BUCKETS_S) - 1)


def write_erl(buf: Any, erl_us: int) -> None:
    _ERL.pack_into(buf, 0, erl_us)


def read_erl(buf: Any) -> int:
    return int(_ERL.unpack_from(buf, 0)[0])
