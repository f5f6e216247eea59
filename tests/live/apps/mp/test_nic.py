"""The rank's side of the NIC socket (apps/mp/nic.py, docs/cdc.md "NIC socket") against a
tiny fake agent: the register datagram and its fds, the state page layout, the ERL page
copied into every header, the collective events, and running on without an agent."""

from __future__ import annotations

import json
import mmap
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from agent import nicproto
from apps.mp import Comm
from tests.support.mp_helpers import spmd

ERL_US = 4321


class FakeAgent:
    """Accepts registrations on a SEQPACKET socket, checks them, answers with an ERL page."""

    def __init__(self, path: str, ranks: int) -> None:
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(path)
        self.srv.listen(8)
        self.erl_fd = os.memfd_create("erl")
        os.ftruncate(self.erl_fd, nicproto.ERL_PAGE_SIZE)
        self.erl = mmap.mmap(self.erl_fd, nicproto.ERL_PAGE_SIZE)
        nicproto.write_erl(self.erl, ERL_US)
        self.regs: dict[int, dict[str, Any]] = {}
        self.events: dict[int, list[dict[str, Any]]] = {}
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self.serve, daemon=True) for _ in range(ranks)]
        for t in self.threads:
            t.start()

    def serve(self) -> None:
        conn, _ = self.srv.accept()
        data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 16)
        msg = json.loads(data)
        rank = msg["rank"]
        page_fd = fds[0]
        size = os.fstat(page_fd).st_size
        page = mmap.mmap(page_fd, nicproto.STATE_SIZE, prot=mmap.PROT_READ)
        # the duplicated data sockets: connected to the peers the datagram names, in order
        peers = []
        for fd in fds[1:]:
            s = socket.socket(fileno=fd)
            peers.append(s.getpeername()[0])
            s.detach()
            os.close(fd)
        os.close(page_fd)
        self.regs[rank] = {
            "msg": msg,
            "nfds": len(fds),
            "page_size": size,
            "state": nicproto.read_state(page),  # checks magic and version
            "page": page,
            "sock_peers": peers,
        }
        socket.send_fds(conn, [json.dumps({"ok": True, "scheme": "cc-b"}).encode()], [self.erl_fd])
        events = self.events.setdefault(rank, [])
        while True:
            raw = conn.recv(4096)
            if not raw:
                break
            events.append(json.loads(raw))
        conn.close()

    def close(self) -> None:
        for t in self.threads:
            t.join(5)
        self.srv.close()


def test_registration_page_erl_and_collective_events(tmp_path: Path) -> None:
    path = str(tmp_path / "nic.sock")
    agent = FakeAgent(path, 3)

    def body(c: Comm) -> Any:
        assert c.nic is not None
        if c.rank == 0:
            c.send(1, b"x", 5)
        elif c.rank == 1:
            c.recv(0, 5)
        c.barrier()
        return c.report()

    out = spmd(3, body, nic_path=path, nic_job="job-7")
    agent.close()
    for r in range(3):
        reg = agent.regs[r]
        msg = reg["msg"]
        assert msg["op"] == "register" and msg["job"] == "job-7" and msg["rank"] == r
        assert msg["pid"] == os.getpid()
        others = [p for p in range(3) if p != r]
        assert msg["socks"] == [{"peer": p, "addr": "127.0.0.1"} for p in others]
        assert reg["nfds"] == 1 + len(others) and reg["sock_peers"] == ["127.0.0.1"] * 2
        assert reg["page_size"] == nicproto.STATE_SIZE
        st = reg["state"]
        assert (st.wait, st.in_collective, st.unexpected, st.consumed, st.md_count) == (0,) * 5
        # the same page after the run, through the agent's read-only mapping
        after = nicproto.read_state(reg["page"])
        assert after.consumed == after.md_count == out[r]["md_count"] > 0
        assert sum(after.md_buckets) == after.md_count
        assert after.wait == nicproto.WAIT_COMPUTING and after.in_collective == 0
        assert agent.events[r] == [{"op": "coll", "on": True}, {"op": "coll", "on": False}]
        assert out[r]["nic"] is True
    # every header carried the agent's ERL: rank 1 received a message and the release
    assert out[1]["header_erl_max_us"] == ERL_US and out[1]["header_erl_mean_us"] == ERL_US


def test_a_refusing_agent_means_one_warning_and_no_nic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "nic.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(4)

    def refuse() -> None:
        for _ in range(2):
            conn, _ = srv.accept()
            _data, fds, _, _ = socket.recv_fds(conn, 65536, 16)
            for f in fds:
                os.close(f)
            conn.send(json.dumps({"ok": False, "error": "pid 1 is not in job 9"}).encode())
            conn.close()

    t = threading.Thread(target=refuse, daemon=True)
    t.start()
    assert spmd(2, lambda c: (c.nic is None, c.barrier()), nic_path=path) == [(True, False)] * 2
    t.join(5)
    srv.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("pid 1 is not in job 9" in line for line in err), err


def test_no_agent_means_one_warning_and_no_nic(capsys: pytest.CaptureFixture[str]) -> None:
    out = spmd(2, lambda c: c.nic is None, nic_path="/nonexistent/nic.sock")
    assert out == [True, True]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("mp: rank ") for line in err), err
    assert "no NIC registration" in err[0]


def test_without_cosched_nic_sock_nothing_is_tried_or_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = Comm.from_env({})
    with c:
        assert c.nic is None
    assert capsys.readouterr().err == ""
