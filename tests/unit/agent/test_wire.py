"""Wire frames: encoding, authentication, replay and framing errors."""

from __future__ import annotations

import json
import struct

import pytest

from agent import wire

KEY = b"k" * 32


def msg(
    mtype: str = wire.HEARTBEAT, seq: int = 1, conn: str = "c1", **data: object
) -> wire.Message:
    return wire.Message(mtype, "controller", seq, conn, None, 1.5, dict(data))


def test_roundtrip() -> None:
    m = msg(wire.QUANTUM, 7, q=3, node="n0", jobs={"a": 100, "b": 900})
    frame = wire.encode(KEY, m)
    assert frame[:3] == b"CSQ" and frame[3] == wire.VERSION
    (length,) = struct.unpack(">I", frame[4:8])
    assert len(frame) == 8 + length + 32
    assert wire.decode_one(KEY, frame) == m


def test_incremental_and_batched() -> None:
    frames = b"".join(wire.encode(KEY, msg(seq=i)) for i in range(1, 4))
    dec = wire.FrameDecoder(KEY)
    out: list[wire.Message] = []
    for i in range(len(frames)):  # one byte at a time
        out += dec.feed(frames[i : i + 1])
    assert [m.seq for m in out] == [1, 2, 3]
    assert dec.pending == 0
    assert [m.seq for m in wire.FrameDecoder(KEY).feed(frames)] == [1, 2, 3]


def test_forged_mac_refused() -> None:
    frame = bytearray(wire.encode(KEY, msg()))
    frame[-1] ^= 1
    with pytest.raises(wire.BadMac):
        wire.decode_one(KEY, bytes(frame))


def test_wrong_key_refused() -> None:
    with pytest.raises(wire.BadMac):
        wire.decode_one(KEY, wire.encode(b"x" * 32, msg()))


def test_tampered_body_refused() -> None:
    frame = wire.encode(KEY, msg(wire.KILL, node="n0", job_id="1"))
    tampered = frame.replace(b'"job_id":"1"', b'"job_id":"2"')
    assert tampered != frame
    with pytest.raises(wire.BadMac):
        wire.decode_one(KEY, tampered)


def test_truncated_frame() -> None:
    frame = wire.encode(KEY, msg())
    dec = wire.FrameDecoder(KEY)
    assert dec.feed(frame[:-5]) == []
    assert dec.pending == len(frame) - 5
    with pytest.raises(wire.Malformed):
        wire.decode_one(KEY, frame[:-5])


def test_oversized_refused_before_body() -> None:
    header = wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.MAX_BODY + 1)
    with pytest.raises(wire.FrameTooLarge):
        wire.FrameDecoder(KEY).feed(header)
    with pytest.raises(wire.FrameTooLarge):
        wire.encode(KEY, msg(blob="x" * (wire.MAX_BODY + 10)))


def test_garbage_refused() -> None:
    with pytest.raises(wire.BadMagic):
        wire.FrameDecoder(KEY).feed(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(wire.BadVersion):
        wire.FrameDecoder(KEY).feed(wire.HEADER.pack(wire.MAGIC, 99, 10))


def _signed(body: bytes) -> bytes:
    import hashlib
    import hmac

    header = wire.HEADER.pack(wire.MAGIC, wire.VERSION, len(body))
    return header + body + hmac.new(KEY, header + body, hashlib.sha256).digest()


def _body(**over: object) -> bytes:
    base: dict[str, object] = {
        "v": 1, "type": "heartbeat", "sender": "c", "seq": 1, "conn": "", "re": None, "ts": 0,
        "data": {},
    }  # fmt: skip
    base.update(over)
    return json.dumps(base).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1,2]",
        b'{"v":1,"type":"heartbeat"}',
        _body(type="bogus"),
        _body(seq=0),
        _body(seq=True),
        _body(data=[]),
        _body(sender=""),
        _body(v=2),
        b"\xff\xfe",
    ],
)
def test_malformed_bodies_refused(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_one(KEY, _signed(body))


def test_session_replay_refused() -> None:
    client = wire.Session(KEY, "controller", conn="abc")
    server = wire.Session(KEY, "agent:n0", conn="abc")
    frames = [client.make(wire.HEARTBEAT)[1] for _ in range(3)]
    for f in frames:
        server.check(wire.decode_one(KEY, f))
    with pytest.raises(wire.Replayed):
        server.check(wire.decode_one(KEY, frames[1]))  # repeated seq
    with pytest.raises(wire.Replayed):
        server.check(wire.decode_one(KEY, frames[2]))


def test_session_other_connection_refused() -> None:
    old = wire.Session(KEY, "controller", conn="old-conn")
    frame = old.make(wire.HEARTBEAT)[1]
    fresh = wire.Session(KEY, "agent:n0", conn="new-conn")
    with pytest.raises(wire.Replayed):
        fresh.check(wire.decode_one(KEY, frame))


def test_opening_hello() -> None:
    client = wire.Session(KEY, "controller")
    _, frame = client.make(wire.HELLO, {"nonce": "n"})
    server = wire.Session(KEY, "agent:n0")
    server.check(wire.decode_one(KEY, frame), opening=True)


@pytest.mark.parametrize(
    ("mtype", "data"),
    [
        (wire.QUANTUM, {"q": 1, "start": 0, "node": "n0"}),
        (wire.QUANTUM, {"q": 1, "node": "n0", "jobs": {}}),
        (wire.QUANTUM, {"q": "1", "start": 0, "node": "n0", "jobs": {}}),
        (wire.QUANTUM, {"q": 1, "start": 0, "node": "n0", "jobs": {"a": 0}}),
        (wire.QUANTUM, {"q": 1, "start": 0, "node": "n0", "jobs": {"a": True}}),
        (wire.LAUNCH, {"node": "n0", "job_id": "1", "argv": []}),
        (wire.LAUNCH, {"node": "n0", "job_id": "1", "argv": [1]}),
        (wire.KILL, {"node": "n0"}),
    ],
)
def test_validate_refuses(mtype: str, data: dict[str, object]) -> None:
    with pytest.raises(wire.BadRequest):
        wire.validate(wire.Message(mtype, "c", 1, "x", None, 0.0, data))


def test_validate_accepts() -> None:
    wire.validate(msg(wire.QUANTUM, q=1, start=0.5, node="n0", jobs={"a": 1, "b": 10000}))
    wire.validate(msg(wire.LAUNCH, node="n0", job_id="1", argv=["true"]))
