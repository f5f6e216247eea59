"""The message library (apps/mp): frames, matching order, collectives, waiting actions,
userspace link emulation, errors and the NIC registration. Ranks are threads on
127.0.0.1 with pre-bound listening sockets."""

from __future__ import annotations

import json
import mmap
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import nicproto
from apps.mp import ANY_SOURCE, Comm, LinkEmu, MPError, WaitMode, frame
from apps.mp.linkemu import RTO_MIN_NS


def listeners(n: int) -> tuple[int, list[socket.socket]]:
    """n consecutive free ports from one base (ranks on one address use base + rank)."""
    for _ in range(50):
        base = random.randrange(20000, 60000)
        socks: list[socket.socket] = []
        try:
            for k in range(n):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                socks.append(s)
                s.bind(("127.0.0.1", base + k))
                s.listen(16)
            return base, socks
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def spmd(n: int, body: Callable[[Comm], Any], timeout: float = 30.0, **kw: Any) -> list[Any]:
    """Run ``body`` on n ranks (threads); re-raise the first failure."""
    base, socks = listeners(n)
    out: list[Any] = [None] * n
    errs: list[BaseException] = []

    def main(r: int) -> None:
        try:
            with Comm(r, n, port=base, job="t", listener=socks[r], connect_timeout=10, **kw) as c:
                out[r] = body(c)
        except BaseException as e:
            errs.append(e)

    ts = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    if errs:
        raise errs[0]
    assert all(not t.is_alive() for t in ts), "a rank hung"
    return out


# ---- frames ---------------------------------------------------------------------


@given(
    st.sampled_from(frame.KINDS),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, frame.MAX_SIZE),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_header_round_trip(kind: int, src: int, tag: int, size: int, ns: int, erl: int) -> None:
    raw = frame.pack(kind, src, tag, size, ns, erl)
    assert len(raw) == frame.HEADER_SIZE == 40
    assert frame.unpack(raw) == frame.Header(kind, src, tag, size, ns, erl)


def test_bad_headers_name_the_field() -> None:
    good = frame.pack(frame.DATA, 1, 0, 10, 0, 0)
    with pytest.raises(MPError, match="magic"):
        frame.unpack(b"XXXX" + good[4:], who="rank 1")
    with pytest.raises(MPError, match="version 9"):
        frame.unpack(good[:4] + bytes([9]) + good[5:])
    with pytest.raises(MPError, match="unknown kind 7"):
        frame.unpack(good[:5] + bytes([7]) + good[6:])
    with pytest.raises(MPError, match="exceeds"):
        frame.unpack(frame.pack(frame.DATA, 1, 0, frame.MAX_SIZE + 1, 0, 0))


# ---- point to point -----------------------------------------------------------------


def test_order_per_sender_and_tag_and_any_source() -> None:
    def body(c: Comm) -> Any:
        if c.rank in (1, 2):
            for k in range(20):
                c.send(0, f"{c.rank}:a{k}".encode(), tag=5)
                c.send(0, f"{c.rank}:b{k}".encode(), tag=6)
            return None
        # tag 6 first, then tag 5: each stream must stay in order
        b1 = [c.recv(1, 6) for _ in range(20)]
        a1 = [c.recv(1, 5) for _ in range(20)]
        rest = [c.recv(ANY_SOURCE, 5) for _ in range(20)] + [c.recv(2, 6) for _ in range(20)]
        return b1, a1, rest

    out = spmd(3, body)
    b1, a1, rest = out[0]
    assert b1 == [f"1:b{k}".encode() for k in range(20)]
    assert a1 == [f"1:a{k}".encode() for k in range(20)]
    assert rest[:20] == [f"2:a{k}".encode() for k in range(20)]
    assert rest[20:] == [f"2:b{k}".encode() for k in range(20)]


def test_nonblocking_and_large_messages() -> None:
    big = os.urandom(3 << 20)

    def body(c: Comm) -> Any:
        peer = 1 - c.rank
        r = c.irecv(peer, 0)
        s = c.isend(peer, big if c.rank == 0 else b"small", 0)
        c.waitall([r, s])
        assert c.test(r) and c.test(s)
        return r.data

    out = spmd(2, body)
    assert out[1] == big and out[0] == b"small"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_collectives_give_the_right_values(n: int) -> None:
    def body(c: Comm) -> Any:
        r = c.rank
        return {
            "bcast": [c.bcast(b"x%d" % root if r == root else b"", root) for root in range(n)],
            "reduce": c.reduce([r, 2.0 * r], "sum", root=n - 1),
            "max": c.allreduce([r, -r], "max"),
            "sum": c.allreduce([1.0, r]),
            "a2a": c.alltoall([b"%d>%d" % (r, j) for j in range(n)]),
            "a2av": c.alltoallv([b"z" * (r + j) for j in range(n)]),
            "stop": c.barrier(stop=r == 0),
        }

    out = spmd(n, body)
    total = sum(range(n))
    for r, res in enumerate(out):
        assert res["bcast"] == [b"x%d" % root for root in range(n)]
        assert res["reduce"] == ([total, 2.0 * total] if r == n - 1 else None)
        assert res["max"] == [n - 1, 0]
        assert res["sum"] == [n, total]
        assert res["a2a"] == [b"%d>%d" % (j, r) for j in range(n)]
        assert res["a2av"] == [b"z" * (j + r) for j in range(n)]
        assert res["stop"] is True


# ---- waiting actions -------------------------------------------------------------------


@pytest.mark.parametrize("action", ["spin", "block", "spinblock"])
def test_waiting_actions_spend_cpu_as_they_should(action: str) -> None:
    late = 0.3
    states: list[int] = []

    def body(c: Comm) -> Any:
        if c.rank == 0:
            c.recv(1, 1)  # the receiver is ready
            time.sleep(late)
            states.append(nicproto.read_flags(c_peer[0].page.mem)[0])
            c.send(1, b"late", 2)
            return None
        c_peer.append(c)
        c.send(0, b"ready", 1)
        w0, t0 = time.monotonic(), time.thread_time()
        c.recv(0, 2)
        return time.thread_time() - t0, time.monotonic() - w0

    c_peer: list[Comm] = []
    out = spmd(2, body, wait=WaitMode(action, "spin", 150.0))
    cpu, wall = out[1]
    assert wall >= late * 0.9
    if action == "spin":
        assert cpu > 0.5 * wall  # busy (another thread shares the GIL, so not ~100 %)
        assert states == [nicproto.WAIT_SPINNING]
    else:  # blocked after (at most) its spin time: almost no CPU for the wait
        assert cpu < 0.2 * wall
        assert states == [nicproto.WAIT_BLOCKED]


def test_wait_mode_from_env_and_errors() -> None:
    m = WaitMode.from_env({"COSCHED_WAIT": "spinblock", "COSCHED_SPIN_US": "200"})
    assert (m.recv, m.send, m.spin_ns(False), m.spin_ns(True)) == (
        "spinblock",
        "spin",
        200_000.0,
        float("inf"),
    )
    assert WaitMode("block", "block").spin_ns(False) == 0.0
    with pytest.raises(MPError, match="COSCHED_SEND_WAIT='x'"):
        WaitMode.from_env({"COSCHED_SEND_WAIT": "x"})
    with pytest.raises(MPError, match="COSCHED_SPIN_US"):
        WaitMode.from_env({"COSCHED_SPIN_US": "fast"})


# ---- userspace link emulation -----------------------------------------------------------


def test_injected_delay_is_within_ten_percent() -> None:
    delay_us = 5000.0

    def body(c: Comm) -> Any:
        times = []
        for _ in range(10):
            if c.rank == 0:
                t0 = time.perf_counter()
                c.send(1, b"ping")
                c.recv(1)
                times.append((time.perf_counter() - t0) / 2)
            else:
                c.recv(0)
                c.send(0, b"pong")
        return sorted(times)[len(times) // 2] if times else None

    base = spmd(2, body)[0]
    delayed = spmd(2, body, link=LinkEmu(delay_us=delay_us))[0]
    added = delayed - base  # the same run's unshaped one-way time is the reference
    assert abs(added * 1e6 - delay_us) <= 0.1 * delay_us, (base, delayed)


def test_link_model_rate_jitter_order_and_loss() -> None:
    rng = random.Random(1)
    emu = LinkEmu(delay_us=100, jitter_us=50, rate_bps=8e6)  # 1 MB/s
    due = emu.due_ns(999_960, send_ns=0, read_ns=0, prev_due_ns=0, rng=rng)
    assert 1.0e9 + 50e3 <= due <= 1.0e9 + 150e3  # 1 s of serialization + 100 +- 50 us
    # never before the previous message from the same sender, never before it was read
    assert emu.due_ns(10, 0, 0, prev_due_ns=5 * 10**9, rng=rng) == 5 * 10**9
    assert emu.due_ns(10, 0, read_ns=7 * 10**9, prev_due_ns=0, rng=rng) == 7 * 10**9
    lossy = LinkEmu(loss_pct=50.0)
    pens = {lossy.loss_penalty_ns(10_000, random.Random(s)) for s in range(30)}
    assert all(p % RTO_MIN_NS == 0 for p in pens) and len(pens) > 1
    assert LinkEmu(delay_us=1).loss_penalty_ns(10**6, rng) == 0
    assert LinkEmu.from_env({}) is None
    assert LinkEmu.from_env({"COSCHED_NET_DELAY_US": "50"}) == LinkEmu(delay_us=50.0)
    with pytest.raises(MPError, match="COSCHED_NET_LOSS_PCT"):
        LinkEmu.from_env({"COSCHED_NET_LOSS_PCT": "100"})


# ---- bad input ------------------------------------------------------------------------


def test_message_to_a_rank_that_does_not_exist() -> None:
    def body(c: Comm) -> Any:
        with pytest.raises(MPError, match=r"cannot send to rank 5: the job has ranks 0\.\.1"):
            c.isend(5, b"x")
        with pytest.raises(MPError, match="cannot receive from rank -3"):
            c.irecv(-3)
        c.barrier()
        return True

    assert spmd(2, body) == [True, True]


def test_a_peer_that_disappears_is_named() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 1:
            c.close()
            return None
        with pytest.raises(MPError, match="lost rank 1"):
            c.recv(1)
        return True

    assert spmd(2, body)[0] is True


def test_a_garbage_frame_fails_this_job_with_a_clear_error() -> None:
    def body(c: Comm) -> Any:
        if c.rank == 1:
            conn = c._conns[0]
            assert conn is not None
            conn.sock.send(b"GARBAGE!" * 10)
            time.sleep(0.2)
            return None
        with pytest.raises(MPError, match="bad frame from rank 1: magic"):
            c.recv(1)
        return True

    assert spmd(2, body)[0] is True


def test_handshake_refuses_a_size_mismatch() -> None:
    base, socks = listeners(2)
    errs: list[str] = []

    def rank(r: int, size: int) -> None:
        try:
            Comm(r, size, port=base, job="t", listener=socks[r], connect_timeout=2).open()
        except MPError as e:
            errs.append(str(e))

    ts = [threading.Thread(target=rank, args=(0, 2)), threading.Thread(target=rank, args=(1, 3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert any("job size mismatch" in e for e in errs), errs


def test_unreachable_rank_is_a_clear_error() -> None:
    base, socks = listeners(1)
    socks[0].close()  # nobody listens at rank 0's port
    c = Comm(1, 2, port=base, job="t", connect_timeout=0.3)
    with pytest.raises(MPError, match=r"cannot reach rank 0 at 127\.0\.0\.1.*is rank 0 running"):
        c.open()
    c.close()


# ---- NIC registration (against a fake agent) -----------------------------------------


def test_registration_sends_page_and_sockets_and_headers_carry_the_erl(tmp_path: Any) -> None:
    path = str(tmp_path / "nic.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(4)
    erl_fd = os.memfd_create("erl")
    os.ftruncate(erl_fd, nicproto.ERL_PAGE_SIZE)
    erl = mmap.mmap(erl_fd, nicproto.ERL_PAGE_SIZE)
    nicproto.write_erl(erl, 4321)
    seen: dict[str, Any] = {}

    def agent() -> None:
        for _ in range(2):
            conn, _ = srv.accept()
            data, fds, _, _ = socket.recv_fds(conn, 65536, 16)
            msg = json.loads(data)
            page = mmap.mmap(fds[0], nicproto.STATE_SIZE, prot=mmap.PROT_READ)
            seen[msg["rank"]] = (msg, len(fds), nicproto.read_state(page).wait)
            socket.send_fds(conn, [json.dumps({"ok": True}).encode()], [erl_fd])
            seen.setdefault("conns", []).append(conn)

    t = threading.Thread(target=agent, daemon=True)
    t.start()

    def body(c: Comm) -> Any:
        assert c.nic is not None
        if c.rank == 0:
            c.send(1, b"x")
            return None
        c.recv(0)
        return c.report()

    out = spmd(2, body, nic_path=path, nic_job="job-7")
    t.join(5)
    msg, nfds, wait = seen[1]
    assert msg["job"] == "job-7" and msg["rank"] == 1 and msg["pid"] == os.getpid()
    assert msg["socks"] == [{"peer": 0, "addr": "127.0.0.1"}] and nfds == 2
    assert wait == nicproto.WAIT_COMPUTING
    assert out[1]["header_erl_max_us"] == 4321 and out[1]["nic"] is True
    srv.close()


def test_no_agent_means_one_warning_and_no_nic(capsys: pytest.CaptureFixture[str]) -> None:
    out = spmd(2, lambda c: c.nic is None, nic_path="/nonexistent/nic.sock")
    assert out == [True, True]
    err = capsys.readouterr().err
    assert err.count("no NIC registration") == 2
