"""Controller <-> agent wire protocol (pure: bytes in, messages out; no sockets).

Frame layout (all integers big-endian)::

    magic  b"CSQ" (3 bytes) | version (1 byte) | body length (4 bytes)
    body   compact UTF-8 JSON object, at most MAX_BODY bytes
    mac    HMAC-SHA256(key, header + body), 32 bytes

Body fields: ``v`` (version), ``type``, ``sender``, ``seq`` (strictly increasing
per sender and connection, from 1), ``conn`` (the connection nonce chosen by
the agent in its hello reply; "" only on the client's opening hello), ``re``
(seq of the request a reply answers, or null), ``ts`` (sender wall clock,
informational) and ``data`` (type-specific object, see SCHEMAS).

Replays: a frame is bound to its connection by ``conn`` (a fresh random nonce
per connection, so a frame recorded on another connection fails) and ordered
within it by ``seq`` (so a repeat on the same connection fails). Both are under
the MAC, so they cannot be edited.

Peers that have not authenticated (issue 28): a server reads at most
``HELLO_MAX_BODY`` bytes of a connection's first frame, parses bodies with
their nesting bounded (common/safejson.py) and answers a refused peer with an
error frame signed with :data:`PUBLIC_KEY` (an empty key anyone can compute),
never with the cluster key: a peer without the key could otherwise collect
cluster-key signatures over text it chose. Clients read such a frame as
:class:`PeerRefused`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common import safejson

MAGIC = b"CSQ"
VERSION = 1
HEADER = struct.Struct(">3sBI")
HEADER_SIZE = HEADER.size  # 8
MAC_SIZE = 32
MAX_BODY = 1 << 20  # 1 MiB: a launch with a big environment fits; garbage lengths do not
HELLO_MAX_BODY = 4096  # a connection's first frame (a hello) before it authenticated
PUBLIC_KEY = b""  # signs refusals to unauthenticated peers: carries no authority

# Requests (controller -> agent), replies and events (agent -> controller).
HELLO = "hello"
HEARTBEAT = "heartbeat"
LAUNCH = "launch"
QUANTUM = "quantum"
ACK = "ack"
KILL = "kill"
STATUS = "status"
JOB_EVENT = "job_event"
OK = "ok"
ERROR = "error"
LOCAL_POLICY = "local_policy"  # the communication-driven scheme to run (docs/cdc.md)
# controller -> relay (controller/relay.py): one frame carrying every node's quantum command
QUANTUM_BATCH = "quantum_batch"
MESSAGE_TYPES = frozenset(
    {
        HELLO,
        HEARTBEAT,
        LAUNCH,
        QUANTUM,
        ACK,
        KILL,
        STATUS,
        JOB_EVENT,
        OK,
        ERROR,
        LOCAL_POLICY,
        QUANTUM_BATCH,
        "request",
        "reply",
    }
)

# Required data fields and their types per request type; replies are free-form.
SCHEMAS: dict[str, dict[str, type | tuple[type, ...]]] = {
    HELLO: {"nonce": str},
    HEARTBEAT: {},
    LAUNCH: {"node": str, "job_id": str, "argv": list},
    # Optional ``at``: the CLOCK_REALTIME instant (s) to apply it at (agent/plan.py);
    # without it the agent applies the quantum on arrival.
    QUANTUM: {"q": int, "start": (int, float), "node": str, "jobs": dict},
    KILL: {"node": str, "job_id": str},
    STATUS: {},
    LOCAL_POLICY: {"node": str, "scheme": str},
    QUANTUM_BATCH: {"q": int, "start": (int, float), "commands": dict},
}


class WireError(ValueError):
    """A frame was refused; ``code`` is sent back in the error reply."""

    code = "malformed"


class BadMagic(WireError):
    code = "bad_magic"


class BadVersion(WireError):
    code = "bad_version"


class FrameTooLarge(WireError):
    code = "too_large"


class BadMac(WireError):
    code = "bad_mac"


class Malformed(WireError):
    code = "malformed"


class Replayed(WireError):
    code = "replayed"


class BadRequest(WireError):
    """Authenticated and fresh, but the payload does not fit the schema."""

    code = "bad_request"


class PeerRefused(WireError):
    """The server refused us before we authenticated (an error frame under PUBLIC_KEY)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Message:
    type: str
    sender: str
    seq: int
    conn: str = ""
    re: int | None = None
    ts: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


def _mac(key: bytes, header: bytes, body: bytes) -> bytes:
    return hmac.new(key, header + body, hashlib.sha256).digest()


def encode(key: bytes, msg: Message) -> bytes:
    body = json.dumps(
        {
            "v": VERSION,
            "type": msg.type,
            "sender": msg.sender,
            "seq": msg.seq,
            "conn": msg.conn,
            "re": msg.re,
            "ts": msg.ts,
            "data": msg.data,
        },
        separators=(",", ":"),
        allow_nan=False,
    ).encode("utf-8")
    if len(body) > MAX_BODY:
        raise FrameTooLarge(f"body of {len(body)} bytes exceeds {MAX_BODY}")
    header = HEADER.pack(MAGIC, VERSION, len(body))
    return header + body + _mac(key, header, body)


def _parse_body(body: bytes) -> Message:
    try:
        obj = safejson.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed(f"body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise Malformed("body is not a JSON object")
    try:
        mtype, sender, seq = obj["type"], obj["sender"], obj["seq"]
        conn, re, ts, data = obj["conn"], obj["re"], obj["ts"], obj["data"]
    except KeyError as e:
        raise Malformed(f"missing field {e}") from None
    if obj.get("v") != VERSION:
        raise BadVersion(f"body version {obj.get('v')!r}")
    if not isinstance(mtype, str) or mtype not in MESSAGE_TYPES:
        raise Malformed(f"unknown message type {mtype!r}")
    if not isinstance(sender, str) or not sender or len(sender) > 128:
        raise Malformed("bad sender")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise Malformed("bad seq")
    if not isinstance(conn, str):
        raise Malformed("bad conn")
    if re is not None and (not isinstance(re, int) or isinstance(re, bool)):
        raise Malformed("bad re")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise Malformed("bad ts")
    if not isinstance(data, dict):
        raise Malformed("data is not an object")
    return Message(mtype, sender, seq, conn, re, float(ts), data)


class FrameDecoder:
    """Incremental decoder: feed bytes, get whole authenticated messages.

    Any error is final for the stream (framing is lost), so callers close the
    connection after replying with the error.
    """

    def __init__(
        self,
        key: bytes,
        max_body: int = MAX_BODY,
        key_for: Callable[[str], bytes | None] | None = None,
        first_max: int | None = None,
    ) -> None:
        self._key = key
        self._max = max_body
        # A server reads little of an unauthenticated peer: its first frame is a hello.
        self._first_max = first_max
        self._buf = bytearray()
        # A server with several credentials (controller/server.py: per-user keys) picks
        # the key by the first frame's sender, then pins it for the stream.
        self._key_for = key_for
        self.key_used: bytes = key if key_for is None else b""
        self._pinned = key_for is None  # the key is known (PUBLIC_KEY is empty, yet known)
        self.frames = 0  # authenticated frames decoded so far

    def feed(self, data: bytes) -> list[Message]:
        self._buf += data
        out: list[Message] = []
        while len(self._buf) >= HEADER_SIZE:
            magic, version, length = HEADER.unpack_from(self._buf)
            if magic != MAGIC:
                raise BadMagic(f"bad magic {bytes(magic)!r}")
            if version != VERSION:
                raise BadVersion(f"unsupported protocol version {version}")
            limit = self._max if self.frames or self._first_max is None else self._first_max
            if length > limit:
                # Refuse before buffering: a garbage length must not make us allocate.
                raise FrameTooLarge(f"frame body of {length} bytes exceeds {limit}")
            total = HEADER_SIZE + length + MAC_SIZE
            if len(self._buf) < total:
                break
            header = bytes(self._buf[:HEADER_SIZE])
            body = bytes(self._buf[HEADER_SIZE : HEADER_SIZE + length])
            mac = bytes(self._buf[HEADER_SIZE + length : total])
            del self._buf[:total]
            if not self._pinned:
                assert self._key_for is not None
                sender = _parse_body(body).sender  # bounded by first_max and safejson
                key = self._key_for(sender)
                if key is None:
                    raise BadMac(f"no credential for sender {sender!r}")
                if not hmac.compare_digest(mac, _mac(key, header, body)):
                    raise BadMac("HMAC mismatch (wrong key or tampered frame)")
                self.key_used, self._pinned = key, True
                out.append(_parse_body(body))
                self.frames += 1
                continue
            if not hmac.compare_digest(mac, _mac(self.key_used, header, body)):
                _raise_if_public_refusal(header, body, mac)
                raise BadMac("HMAC mismatch (wrong key or tampered frame)")
            out.append(_parse_body(body))
            self.frames += 1
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (a truncated frame at EOF)."""
        return len(self._buf)


def _raise_if_public_refusal(header: bytes, body: bytes, mac: bytes) -> None:
    """An error frame signed with PUBLIC_KEY: the server refused us unauthenticated."""
    if not hmac.compare_digest(mac, _mac(PUBLIC_KEY, header, body)):
        return
    try:
        msg = _parse_body(body)
    except WireError:
        return
    if msg.type == ERROR:
        raise PeerRefused(str(msg.data.get("code", "refused")), str(msg.data.get("reason", "")))


def public_error(sender: str, code: str, reason: str, re: int | None = None) -> bytes:
    """The error frame a server sends a peer that has not authenticated (module doc)."""
    msg = Message(ERROR, sender, 1, "", re, time.time(), {"code": code, "reason": reason})
    return encode(PUBLIC_KEY, msg)


def decode_one(key: bytes, frame: bytes, max_body: int = MAX_BODY) -> Message:
    """Decode exactly one complete frame (tests, tools)."""
    dec = FrameDecoder(key, max_body)
    msgs = dec.feed(frame)
    if len(msgs) != 1 or dec.pending:
        raise Malformed("truncated frame" if not msgs else "trailing bytes after frame")
    return msgs[0]


def validate(msg: Message) -> None:
    """Check a request's data against SCHEMAS; raise BadRequest with the reason."""
    schema = SCHEMAS.get(msg.type)
    if schema is None:
        return
    for name, typ in schema.items():
        if name not in msg.data:
            raise BadRequest(f"{msg.type}: missing field {name!r}")
        val = msg.data[name]
        if not isinstance(val, typ) or (isinstance(val, bool) and typ is int):
            raise BadRequest(f"{msg.type}: field {name!r} has the wrong type")
    if msg.type == QUANTUM:
        at = msg.data.get("at")
        if at is not None and (
            not isinstance(at, int | float)
            or isinstance(at, bool)
            or not math.isfinite(at)
            or at <= 0
        ):
            raise BadRequest("quantum: 'at' must be a positive number of seconds (CLOCK_REALTIME)")
        for jid, w in msg.data["jobs"].items():
            if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 10000:
                raise BadRequest(f"quantum: weight of job {jid!r} must be an int in 1..10000")
    if msg.type == LAUNCH:
        argv = msg.data["argv"]
        if not argv or not all(isinstance(a, str) for a in argv):
            raise BadRequest("launch: argv must be a non-empty list of strings")


class Session:
    """Per-connection sequencing and replay checks for one side of a connection."""

    def __init__(self, key: bytes, sender: str, conn: str = "") -> None:
        self.key = key
        self.sender = sender
        self.conn = conn  # set by the agent at hello time; "" until then on a client
        self._out_seq = 0
        self._in_seq: dict[str, int] = {}

    def make(
        self, mtype: str, data: dict[str, Any] | None = None, re: int | None = None
    ) -> tuple[int, bytes]:
        """Encode the next outgoing frame; returns (seq, bytes)."""
        self._out_seq += 1
        msg = Message(mtype, self.sender, self._out_seq, self.conn, re, time.time(), data or {})
        return self._out_seq, encode(self.key, msg)

    def check(self, msg: Message, *, opening: bool = False) -> None:
        """Refuse frames of another connection and repeated/old sequence numbers.

        ``opening`` is for the client's first hello, sent before a nonce exists.
        """
        expected = "" if opening else self.conn
        if msg.conn != expected:
            raise Replayed("frame belongs to another connection")
        last = self._in_seq.get(msg.sender, 0)
        if msg.seq <= last:
            raise Replayed(f"sequence {msg.seq} from {msg.sender!r} not above {last}")
        self._in_seq[msg.sender] = msg.seq

    def check_incoming(self, msg: Message, established: bool) -> None:
        """A server's check of a received frame: before the session exists the
        only acceptable frame is the client's opening hello."""
        if established:
            self.check(msg)
            return
        self.check(msg, opening=True)
        if msg.type != HELLO:
            raise Malformed("first frame must be hello")
