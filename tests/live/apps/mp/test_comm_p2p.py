"""Point to point (apps/mp/comm.py): matching by (source, tag) in arrival order, wildcards,
non-blocking requests, large messages, and the state page's unexpected count."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from agent import nicproto
from apps.mp import ANY_SOURCE, ANY_TAG, Comm, MPError, WaitMode
from tests.support.mp_helpers import free_base, spmd


@pytest.mark.parametrize("wait", ["block", "spin"])
def test_order_per_sender_and_tag_and_any_source(wait: str) -> None:
    def body(c: Comm) -> Any:
        if c.rank in (1, 2):
            for k in range(20):
                c.send(0, f"{c.rank}:a{k}".encode(), tag=5)
                c.send(0, f"{c.rank}:b{k}".encode(), tag=6)
            return None
        # tag 6 first, then tag 5: each (sender, tag) stream stays in order
        b1 = [c.recv(1, 6) for _ in range(20)]
        a1 = [c.recv(1, 5) for _ in range(20)]
        rest = [c.recv(ANY_SOURCE, 5) for _ in range(20)] + [c.recv(2, 6) for _ in range(20)]
        return b1, a1, rest

    b1, a1, rest = spmd(3, body, wait=WaitMode(wait, wait))[0]
    assert b1 == [f"1:b{k}".encode() for k in range(20)]
    assert a1 == [f"1:a{k}".encode() for k in range(20)]
    assert rest[:20] == [f"2:a{k}".encode() for k in range(20)]
    assert rest[20:] == [f"2:b{k}".encode() for k in range(20)]


def test_any_source_keeps_each_senders_order_and_says_who_sent() -> None:
    def body(c: Comm) -> Any:
        if c.rank > 0:
            for k in range(30):
                c.send(0, b"%d" % k, tag=c.rank)
            return None
        got: dict[int, list[int]] = {1: [], 2: [], 3: []}
        for _ in range(90):
            r = c.irecv(ANY_SOURCE, ANY_TAG)
            data = c.wait(r)
            assert r.recv_tag == r.source
            got[r.source].append(int(data))
        return got

    got = spmd(4, body)[0]
    assert got == {r: list(range(30)) for r in (1, 2, 3)}


def test_posted_receives_match_in_posting_order() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 1:
            c.barrier()
            for k in range(3):
                c.send(0, b"m%d" % k, 4)
            return None
        reqs = [c.irecv(1, 4), c.irecv(ANY_SOURCE, 4), c.irecv(1, ANY_TAG)]
        c.barrier()  # the receives are posted before anything is sent
        return c.waitall(reqs)

    assert spmd(2, body)[0] == [b"m0", b"m1", b"m2"]


def test_any_tag_never_takes_a_collectives_message() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 1:
            c.barrier()  # its barrier message reaches rank 0 while ANY_TAG is posted
            c.send(0, b"user", 3)
            return None
        r = c.irecv(ANY_SOURCE, ANY_TAG)
        c.barrier()
        return c.wait(r), r.recv_tag

    assert spmd(2, body)[0] == (b"user", 3)


def test_nonblocking_both_ways_with_large_messages() -> None:
    big = os.urandom(3 << 20)

    def body(c: Comm) -> Any:
        peer = 1 - c.rank
        reqs = [c.isend(peer, big, 0), c.isend(peer, b"tail", 0)]  # both send first
        r1, r2 = c.irecv(peer, 0), c.irecv(peer, 0)
        c.waitall([*reqs, r1, r2])
        assert all(c.test(r) for r in (*reqs, r1, r2))
        return r1.data, r2.data

    out = spmd(2, body)
    assert out[0] == (big, b"tail") and out[1] == (big, b"tail")


def test_test_polls_without_waiting_and_sendrecv_rings() -> None:
    def body(c: Comm) -> Any:
        n = c.size
        r = c.irecv((c.rank - 1) % n, 1)
        assert not c.test(r) or n == 1  # nothing was sent yet
        c.barrier()
        c.send((c.rank + 1) % n, b"%d" % c.rank, 1)
        deadline = time.monotonic() + 10
        while not c.test(r):
            assert time.monotonic() < deadline
        ring = c.sendrecv((c.rank + 1) % n, b"s%d" % c.rank, (c.rank - 1) % n, tag=2)
        return r.data, ring

    out = spmd(3, body)
    assert out == [(b"%d" % ((r - 1) % 3), b"s%d" % ((r - 1) % 3)) for r in range(3)]


def test_messages_to_oneself_and_a_single_rank_job() -> None:
    with Comm(0, 1) as c:
        r = c.irecv(0, 7)
        c.send(0, b"me", 7)
        assert c.wait(r) == b"me"
        assert c.barrier(stop=True) is True
        assert c.allreduce([2, 3]) == [2, 3] and c.bcast(b"x") == b"x"
        assert c.report()["messages_received"] == 1


def test_unexpected_messages_are_counted_in_the_state_page() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 0:
            for k in range(3):
                c.send(1, b"%d" % k, 9)
            c.barrier()
            return None
        c.barrier()  # rank 0's three messages came before its barrier message
        queued = nicproto.read_state(c.page.mem).unexpected
        data = [c.recv(0, 9) for _ in range(3)]
        st = nicproto.read_state(c.page.mem)
        return queued, data, st.unexpected, st.consumed

    queued, data, left, consumed = spmd(2, body)[1]
    assert (queued, data, left) == (3, [b"0", b"1", b"2"], 0)
    assert consumed == 4  # three messages and the barrier's release


def test_ranks_started_in_any_order_connect_by_retrying() -> None:
    base = free_base(3)
    out: dict[int, list[bool]] = {}
    errs: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            with Comm(r, 3, port=base, job="t", wait=WaitMode("block"), connect_timeout=20) as c:
                out[r] = [c.barrier(stop=k == 2) for k in range(3)]
        except BaseException as e:
            errs.append(e)

    ts = []
    for r in (2, 1, 0):  # the connecting ranks start first: their connects are refused
        ts.append(threading.Thread(target=rank, args=(r,)))
        ts[-1].start()
        time.sleep(0.3)
    for t in ts:
        t.join(30)
    assert not errs, errs
    assert out == {r: [False, False, True] for r in range(3)}


def test_user_tags_must_not_be_negative() -> None:
    def body(c: Comm) -> Any:
        with pytest.raises(MPError, match=r"cannot send with tag -2: user tags are 0\.\."):
            c.isend(1 - c.rank, b"x", tag=-2)
        with pytest.raises(MPError, match="cannot receive with tag -3"):
            c.irecv(ANY_SOURCE, -3)
        return True

    assert spmd(2, body) == [True, True]
