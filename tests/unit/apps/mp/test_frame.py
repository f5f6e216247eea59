"""Frames on a data connection (apps/mp/frame.py, docs/cdc.md "Frames"): the 40-byte
header round trip and its checks, in isolation and on a live connection."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.mp import MPError, frame


@given(
    st.sampled_from(frame.KINDS),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, frame.MAX_SIZE),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_header_round_trip(kind: int, src: int, tag: int, size: int, ns: int, erl: int) -> None:
    raw = frame.pack(kind, src, tag, size, ns, erl)
    assert len(raw) == frame.HEADER_SIZE == 40
    assert frame.unpack(raw) == frame.Header(kind, src, tag, size, ns, erl)
    assert frame.unpack(b"junk" + raw, offset=4) == frame.unpack(raw)


def test_header_layout_is_the_contracts() -> None:
    raw = frame.pack(frame.DATA, 3, -4, 5, 6, 7)
    # magic, version u8, kind u8, flags u16, src i32, tag i32, size u64, send_ns i64, erl_us i64
    assert raw == b"CSM1" + bytes([1, 1, 0, 0]) + struct.pack("!iiQqq", 3, -4, 5, 6, 7)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (lambda b: b"XXXX" + b[4:], r"bad frame from rank 1: magic b'XXXX', want b'CSM1'"),
        (lambda b: b[:4] + bytes([9]) + b[5:], "bad frame from rank 1: version 9, want 1"),
        (lambda b: b[:5] + bytes([7]) + b[6:], "bad frame from rank 1: unknown kind 7"),
        (
            lambda b: b[:16] + struct.pack("!Q", frame.MAX_SIZE + 1) + b[24:],
            f"bad frame from rank 1: size {frame.MAX_SIZE + 1} exceeds",
        ),
    ],
)
def test_bad_headers_name_the_peer_and_the_field(patch: Any, message: str) -> None:
    good = frame.pack(frame.DATA, 1, 0, 10, 0, 0)
    with pytest.raises(MPError, match=message.replace("(", r"\(")):
        frame.unpack(patch(good), who="rank 1")
