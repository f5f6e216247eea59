"""The tests of tests/unit/apps/mp/test_frame.py that start processes or sockets (tests/live/)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apps.mp import Comm, MPError, frame
from tests.support.mp_helpers import spmd


def _send_raw(c: Comm, raw: bytes) -> None:
    conn = c._conns[0]
    assert conn is not None
    conn.sock.setblocking(True)
    conn.sock.sendall(raw)
    time.sleep(0.2)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"GARBAGE!" * 10, "rank 0: bad frame from rank 1: magic b'GARB'"),
        (frame.pack(frame.DATA, 0, 0, 1, 0, 0) + b"x", "rank 0: bad frame from rank 1: src 0"),
        (frame.pack(frame.HELLO, 1, 2, 0, 0, 0), "rank 0: bad frame from rank 1: kind 2"),
    ],
)
def test_a_wrong_frame_on_a_connection_fails_the_receiver_clearly(raw: bytes, message: str) -> None:
    def body(c: Comm) -> Any:
        if c.rank == 1:
            _send_raw(c, raw)
            return None
        with pytest.raises(MPError, match=message) as exc:
            c.recv(1)
        assert "\n" not in str(exc.value)
        return True

    assert spmd(2, body)[0] is True
