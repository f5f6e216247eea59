"""Bad input and lost peers (apps/mp): one clear MPError line naming the rank, never a hang
where an end of file can be seen."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from apps.mp import Comm, MPError, WaitMode
from tests.support.mp_helpers import BLOCK, RankProcess, free_base, listeners, spmd


def test_message_to_a_rank_that_does_not_exist() -> None:
    def body(c: Comm) -> Any:
        with pytest.raises(
            MPError, match=r"^rank \d: cannot send to rank 5: the job has ranks 0\.\.1$"
        ):
            c.isend(5, b"x")
        with pytest.raises(MPError, match="cannot send to rank 5"):
            c.send(5, b"x")
        with pytest.raises(MPError, match="cannot receive from rank -3"):
            c.irecv(-3)
        c.barrier()  # the job is still usable
        return True

    assert spmd(2, body) == [True, True]


@pytest.mark.parametrize("wait", ["spin", "block"])
def test_a_killed_peer_is_named(wait: str) -> None:
    base, socks = listeners(1)
    child = RankProcess("idle", 1, 2, base)
    try:
        with Comm(0, 2, port=base, job="t", listener=socks[0], wait=WaitMode(wait, wait)) as c:
            child.line()
            threading.Timer(0.3, child.proc.kill).start()  # while rank 0 waits
            t0 = time.monotonic()
            with pytest.raises(MPError, match=r"^rank 0: lost rank 1: connection") as exc:
                c.recv(1)
            assert time.monotonic() - t0 < 5
            with pytest.raises(MPError, match="lost rank 1"):
                c.send(1, b"x")
    finally:
        child.kill()
    assert "\n" not in str(exc.value)


def test_a_peer_that_goes_is_seen_by_the_rank_waiting_for_it() -> None:
    base, socks = listeners(1)
    child = RankProcess("idle", 1, 2, base)
    try:
        with Comm(0, 2, port=base, job="t", listener=socks[0], wait=BLOCK):
            child.line()
        # rank 0 has closed: the child's recv ends with an error instead of waiting forever
        res = child.line()
        rc, _err = child.finish()
    finally:
        child.kill()
    assert rc == 1 and res["error"].startswith("rank 1: lost rank 0: connection closed")


def test_peer_dying_inside_a_barrier_names_the_barrier_and_the_rank() -> None:
    def body(c: Comm) -> Any:
        c.barrier()  # barrier 0 passes
        if c.rank == 1:
            c.close()
            return None
        with pytest.raises(MPError, match=r"^rank 0: barrier 1: lost rank 1: connection closed"):
            c.barrier()
        return True

    assert spmd(2, body)[0] is True


def _pair(other_size: int, other_job: str) -> list[str]:
    """Rank 0 of a 2-rank job "t" and a rank 1 that disagrees; their error messages."""
    base, socks = listeners(2)
    errs: list[str] = []

    def rank(r: int, size: int, job: str) -> None:
        try:
            Comm(r, size, port=base, job=job, listener=socks[r], connect_timeout=2).open()
        except MPError as e:
            errs.append(str(e))

    ts = [
        threading.Thread(target=rank, args=(0, 2, "t")),
        threading.Thread(target=rank, args=(1, other_size, other_job)),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    return errs


@pytest.mark.parametrize(
    ("size", "job", "message"), [(3, "t", "job size mismatch"), (2, "u", "belongs to job")]
)
def test_handshake_refuses_a_size_or_job_mismatch(size: int, job: str, message: str) -> None:
    errs = _pair(size, job)
    assert any(message in e for e in errs), errs
    assert all(e.startswith("rank ") for e in errs), errs


def test_unreachable_rank_is_a_clear_error() -> None:
    base = free_base(1)  # nobody listens at rank 0's port
    c = Comm(1, 2, port=base, job="t", connect_timeout=0.3)
    with pytest.raises(
        MPError,
        match=r"^rank 1: cannot reach rank 0 at 127\.0\.0\.1:\d+ within 0.3 s "
        r".*is rank 0 running\?$",
    ):
        c.open()
    c.close()


def test_a_rank_that_never_connects_is_named_after_the_timeout() -> None:
    base, socks = listeners(3)
    c = Comm(0, 3, port=base, job="t", listener=socks[0], connect_timeout=0.5)
    with pytest.raises(MPError, match=r"rank 0: ranks \[1, 2\] did not connect within 0.5 s"):
        c.open()
    c.close()
    for s in socks[1:]:
        s.close()


def test_bad_arguments_and_an_unopened_communicator() -> None:
    with pytest.raises(MPError, match=r"rank 2 is outside 0\.\.1"):
        Comm(2, 2, port=1)
    with pytest.raises(MPError, match="needs a port: set COSCHED_PORT"):
        Comm(1, 2)
    with pytest.raises(MPError, match="2 peer addresses for 3 ranks"):
        Comm(0, 3, peers=["a", "b"], port=1)
    with pytest.raises(MPError, match="COSCHED_SIZE='two' is not an integer"):
        Comm.from_env({"COSCHED_SIZE": "two"})
    c = Comm(0, 2, port=1)
    with pytest.raises(MPError, match="the communicator is not open"):
        c.isend(1, b"")
    c.close()
