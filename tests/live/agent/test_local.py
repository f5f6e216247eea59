"""The agent's NIC emulation and local scheduler against a fake cgroupfs (no root).

A "rank" here is this test process: it registers a socketpair end and a state
page with the agent exactly as the library does (docs/cdc.md), then bytes
written into the other end are arrivals the agent must see without the rank
reading anything.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import nicproto, wire
from agent.client import AgentClient, AgentError
from agent.daemon import Agent
from agent.gossip import pack, unpack
from agent.local import BOOST_WEIGHT, LocalConfig, LocalPolicyError
from agent.nicguard import JobView
from common.cgroups import DEFAULT_WEIGHT
from common.ports import free_port
from tests.support.agent_fakes import KEY, PARENT, make_agent

PEERS = ("127.0.0.1", "127.0.0.1")


def sealed_page() -> int:
    """A state page as the library makes it: a memfd sealed at its size."""
    import fcntl

    fd = os.memfd_create("state", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nicproto.STATE_SIZE)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def mesh_pair(port: int) -> tuple[socket.socket, socket.socket]:
    """Rank 0's end of its mesh connection with rank 1 (accepted on the job's port), and
    rank 1's end: what the library registers, and where test "arrivals" are written."""
    lst = socket.create_server(("127.0.0.1", port))
    far = socket.create_connection(("127.0.0.1", port))
    near, _ = lst.accept()
    lst.close()
    return near, far


class Rank:
    """The library's side of the NIC socket, by hand."""

    def __init__(self, agent: Agent, job: str, rank: int = 0) -> None:
        port = agent.jobs[job].port if job in agent.jobs and agent.jobs[job].port else free_port()
        self.data, self.data_far = mesh_pair(port)
        self.fd = sealed_page()
        self.page = mmap.mmap(self.fd, nicproto.STATE_SIZE)
        nicproto.init_state(self.page)
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.conn.connect(str(agent.cfg.run_dir / "nic.sock"))
        msg = {
            "op": "register",
            "job": job,
            "rank": rank,
            "pid": os.getpid(),
            "socks": [{"peer": 1, "addr": "127.0.0.1"}],
        }
        socket.send_fds(self.conn, [json.dumps(msg).encode()], [self.fd, self.data.fileno()])
        self.agent = agent
        pump(agent)
        self.conn.settimeout(2)
        reply, fds, _, _ = socket.recv_fds(self.conn, 4096, 4)
        self.reply = json.loads(reply)
        self.erl_fd = fds[0] if fds else -1

    def set_wait(self, wait: int) -> None:
        self.page[nicproto.OFF_WAIT : nicproto.OFF_WAIT + 4] = wait.to_bytes(4, "little")

    def close(self) -> None:
        for s in (self.conn, self.data, self.data_far):
            s.close()
        self.page.close()
        os.close(self.fd)
        if self.erl_fd >= 0:
            os.close(self.erl_fd)


def pump(agent: Agent, rounds: int = 5) -> None:
    for _ in range(rounds):
        agent.step(0.01)


def add_job(agent: Agent, jid: str, pid: int) -> None:
    """Job ``jid`` of two ranks on 127.0.0.1, its rank 0 here as ``pid``."""
    from agent.jobs import Job

    cg = f"{PARENT}/job-{jid}"
    agent.driver.create(cg)
    agent.driver.add_pid(cg, pid)
    job = Job(jid, cg, reattached=True, peers=PEERS, port=free_port())
    job.pids = {0: pid}
    agent.jobs[jid] = job


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    a, _fs = make_agent(tmp_path)
    a.local.gossip_port = 0
    a.start()
    add_job(a, "1", os.getpid())  # this test process is job 1's rank
    add_job(a, "2", 999_999)
    yield a
    a.shutdown()


def trust_all(agent: Agent) -> None:
    """Let this one process register as a rank of job 2 too (a pid is in one cgroup only)."""

    def view(job: str) -> JobView:
        me = os.getpid()
        return JobView(job, {0: me}, lambda: [me], PEERS, agent.jobs[job].port)

    agent.local._authorize = view  # type: ignore[method-assign]


def configure(agent: Agent, scheme: str, tick_ms: float = 1000.0) -> None:
    agent.local.configure(
        LocalConfig.from_request(
            {
                "scheme": scheme,
                "mpl": 5,
                "tick_ms": tick_ms,
                "peers": {
                    "u0": {"ctl": "127.0.0.1", "data": "10.0.0.1"},
                    "u1": {"ctl": "127.0.0.1", "data": "10.0.0.2"},
                },
            }
        )
    )


def weight(agent: Agent, jid: str) -> int:
    return agent.driver.get_weight(agent.jobs[jid].cgroup) or DEFAULT_WEIGHT


def test_registration_hands_back_the_erl_page_and_env(agent: Agent) -> None:
    configure(agent, "cc-b")
    env = agent.local.job_env()
    assert env["COSCHED_WAIT"] == "block" and env["COSCHED_SEND_WAIT"] == "block"
    assert env["COSCHED_NIC_SOCK"].endswith("nic.sock")
    r = Rank(agent, "1")
    try:
        assert r.reply["ok"] is True and r.reply["scheme"] == "cc-b"
        agent.local.nic.set_erl(1234)  # type: ignore[union-attr]
        page = mmap.mmap(r.erl_fd, nicproto.ERL_PAGE_SIZE, prot=mmap.PROT_READ)
        assert nicproto.read_erl(page) == 1234
        page.close()
        assert agent.local.status()["registered"] == 1
    finally:
        r.close()
    pump(agent)
    assert agent.local.status()["registered"] == 0  # closing the socket unregisters


def test_registration_of_a_stranger_is_refused(agent: Agent) -> None:
    configure(agent, "dcs")
    r = Rank(agent, "no-such-job")
    try:
        assert r.reply["ok"] is False and "no running job" in r.reply["error"]
        assert agent.local.status()["registered"] == 0
        assert agent.local.status()["nic_refused"] == 1
    finally:
        r.close()
    # a process outside the job's cgroup is refused too
    agent.driver.create(f"{PARENT}/job-3")
    from agent.jobs import Job

    agent.jobs["3"] = Job("3", f"{PARENT}/job-3", reattached=True, peers=PEERS, port=free_port())
    agent.jobs["3"].pids = {0: 1}
    r = Rank(agent, "3")
    try:
        assert r.reply["ok"] is False and "not in job" in r.reply["error"]
    finally:
        r.close()


def test_garbage_registration_is_refused_and_the_agent_goes_on(agent: Agent) -> None:
    configure(agent, "dcs")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(str(agent.cfg.run_dir / "nic.sock"))
    c.send(b"\xff not json")
    pump(agent)
    c.settimeout(2)
    assert b"error" in c.recv(4096)
    c.close()
    r = Rank(agent, "1")  # the next one is served
    try:
        assert r.reply["ok"] is True
    finally:
        r.close()


def test_dcs_arrival_for_a_non_running_process_raises_its_weight(agent: Agent) -> None:
    configure(agent, "dcs")
    r = Rank(agent, "1")
    try:
        assert weight(agent, "1") == DEFAULT_WEIGHT
        r.data_far.send(b"x" * 100)  # an arrival; the rank reads nothing
        pump(agent)
        assert weight(agent, "1") == BOOST_WEIGHT
        st = agent.local.status()
        assert st["holder"] == "1/0" and st["arrival_events"] >= 1
        r.data.recv(100)  # consumed: the boost goes at the next decision point
        agent.local.next_tick = 0.0
        pump(agent)
        assert weight(agent, "1") == DEFAULT_WEIGHT
    finally:
        r.close()


def test_two_pending_processes_count_a_boost_conflict(agent: Agent) -> None:
    trust_all(agent)
    configure(agent, "pb")
    r1, r2 = Rank(agent, "1"), Rank(agent, "2")
    try:
        agent.local.next_tick = 0.0
        pump(agent, 1)
        before = agent.local.status()
        assert before["conflicts"] == 0
        r1.data_far.send(b"a")
        r2.data_far.send(b"b")
        pump(agent)
        agent.local.next_tick = 0.0
        pump(agent, 1)
        st = agent.local.status()
        assert st["decisions"] > before["decisions"]
        assert st["conflicts"] == 1
        assert st["holder"] in ("1/0", "2/0") and st["enp"] == 2
    finally:
        r1.close()
        r2.close()


def test_ib_boosts_only_a_blocked_receiver(agent: Agent) -> None:
    configure(agent, "ib")
    r = Rank(agent, "1")
    try:
        r.set_wait(nicproto.WAIT_SPINNING)
        r.data_far.send(b"x")
        pump(agent)
        assert weight(agent, "1") == DEFAULT_WEIGHT
        r.data.recv(10)
        agent.local.next_tick = 0.0
        pump(agent)  # drained: the socket is re-armed
        r.set_wait(nicproto.WAIT_BLOCKED)
        r.data_far.send(b"y")
        pump(agent)
        assert weight(agent, "1") == BOOST_WEIGHT
    finally:
        r.close()


def test_hybrid_boosts_on_collective_events(agent: Agent) -> None:
    trust_all(agent)
    configure(agent, "hybrid")
    r = Rank(agent, "2")
    try:
        flag = slice(nicproto.OFF_IN_COLLECTIVE, nicproto.OFF_IN_COLLECTIVE + 4)
        r.page[flag] = (1).to_bytes(4, "little")
        r.conn.send(json.dumps({"op": "coll", "on": True}).encode())
        pump(agent)
        assert weight(agent, "2") == BOOST_WEIGHT
        r.page[flag] = bytes(4)
        r.conn.send(json.dumps({"op": "coll", "on": False}).encode())
        pump(agent)
        assert weight(agent, "2") == DEFAULT_WEIGHT
    finally:
        r.close()


def test_quantum_weights_are_ignored_while_a_scheme_owns_them(agent: Agent) -> None:
    configure(agent, "dcs")
    agent.apply({"1": 5000, "2": 100})
    assert weight(agent, "1") == DEFAULT_WEIGHT
    agent.local.configure(LocalConfig.from_request({"scheme": "none"}))
    agent.apply({"1": 5000, "2": 100})
    assert weight(agent, "1") == 5000


def test_md_histogram_comes_from_the_pages(agent: Agent) -> None:
    configure(agent, "local")
    r = Rank(agent, "1")
    try:
        import struct

        struct.pack_into("<QQ", r.page, nicproto.OFF_MD_COUNT, 3, 3_000_000)
        struct.pack_into("<Q", r.page, nicproto.OFF_MD_BUCKETS + 8 * 6, 3)
        st = agent.local.status()
        assert st["md_count"] == 3 and st["md_sum_s"] == pytest.approx(0.003)
        assert st["md_buckets"][6] == 3
    finally:
        r.close()
    pump(agent)
    assert agent.local.status()["md_count"] == 3  # kept after the rank left


def test_local_policy_request_over_the_wire(agent: Agent) -> None:
    port = agent.listener.getsockname()[1]  # type: ignore[union-attr]
    import threading

    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            agent.step(0.01)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        with AgentClient(("127.0.0.1", port), KEY, timeout=5) as c:
            with pytest.raises(AgentError) as e:
                c.request(wire.LOCAL_POLICY, {"node": "u0", "scheme": "fifo"})
            assert "valid schemes" in str(e.value)
            rep = c.request(wire.LOCAL_POLICY, {"node": "u0", "scheme": "sb", "spin_us": 150}).data
            assert rep["scheme"] == "sb" and rep["cost_switch_us"] > 0
            st = c.request(wire.STATUS, {}).data
            assert st["cdc"]["scheme"] == "sb"
    finally:
        stop.set()
        t.join()


def test_config_validation() -> None:
    for bad in (
        {"scheme": "x"},
        {"scheme": "dcs", "mpl": 0},
        {"scheme": "dcs", "tick_ms": 0.05},
        {"scheme": "dcs", "tick_ms": True},
        {"scheme": "dcs", "boost": "magic"},
        {"scheme": "dcs", "peers": {"n": 1}},
    ):
        with pytest.raises(LocalPolicyError):
            LocalConfig.from_request(bad)
    # no tick_ms: the node's own decision interval (the cluster's option)
    assert LocalConfig.from_request({"scheme": "dcs"}, default_tick_ms=2.0).tick_s == 0.002
    assert LocalConfig.from_request({"scheme": "dcs", "tick_ms": 0.1}).tick_s == pytest.approx(1e-4)
    with pytest.raises(LocalPolicyError, match=r"decision interval\) must be in 0.1..1000 ms"):
        LocalConfig.from_request({"scheme": "dcs", "tick_ms": 0.01})


def test_gossip_frames_authenticate() -> None:
    data = pack(KEY, "n1", 4200, 7)
    assert unpack(KEY, data) == ("n1", 4200, 7)
    with pytest.raises(ValueError):
        unpack(b"another-key-0123456789", data)
    with pytest.raises(ValueError):
        unpack(KEY, data[:-1] + bytes([data[-1] ^ 1]))


def test_gossip_between_two_schedulers(tmp_path: Path) -> None:
    from agent.gossip import ErlGossip

    a = ErlGossip("n0", KEY, ("127.0.0.1", 0), {})
    b = ErlGossip("n1", KEY, ("127.0.0.1", 0), {})
    try:
        a.peers = {"n1": b.sock.getsockname()}
        b.peers = {"n0": a.sock.getsockname()}
        assert a.maybe_send(5000.0)
        assert not a.maybe_send(5010.0)  # < 5 % change within the refresh time
        assert a.maybe_send(9000.0)
        deadline = time.monotonic() + 2
        while b.erl_of("n0") != 9000.0 and time.monotonic() < deadline:
            b.readable()
            time.sleep(0.01)
        assert b.erl_of("n0") == 9000.0
        b.sock.sendto(b"ERL1 forged", a.sock.getsockname())
        time.sleep(0.05)
        a.readable()
        assert a.rejected == 1 and a.erl_of("n1") == 0.0
    finally:
        a.close()
        b.close()


def test_exporter_shows_bcr_counters_and_md_histogram(agent: Agent) -> None:
    from prometheus_client import generate_latest

    trust_all(agent)
    configure(agent, "pb")
    r1, r2 = Rank(agent, "1"), Rank(agent, "2")
    try:
        import struct

        struct.pack_into("<QQ", r1.page, nicproto.OFF_MD_COUNT, 2, 4_000_000)
        struct.pack_into("<Q", r1.page, nicproto.OFF_MD_BUCKETS + 8 * 7, 2)
        r1.data_far.send(b"a")
        r2.data_far.send(b"b")
        pump(agent)
        agent.local.next_tick = 0.0
        pump(agent, 1)
        agent.local.refresh_status()
        text = generate_latest(agent.metrics.registry).decode()
    finally:
        r1.close()
        r2.close()
    lab = '{node="u0",policy="pb"}'
    assert f"cosched_cdc_boost_conflicts_total{lab} 1.0" in text
    assert "cosched_cdc_decision_points_total" + lab in text
    assert 'cosched_message_delay_seconds_bucket{le="0.0025",node="u0",policy="pb"} 2.0' in text
    assert 'cosched_message_delay_seconds_bucket{le="0.001",node="u0",policy="pb"} 0.0' in text
    assert f"cosched_message_delay_seconds_count{lab} 2.0" in text
    assert f"cosched_message_delay_seconds_sum{lab} 0.004" in text


def test_freeze_boost_stops_competitors_for_a_bounded_time_and_thaws_them(agent: Agent) -> None:
    from agent.local import FREEZE_MAX_TICKS

    agent.local.configure(LocalConfig.from_request({"scheme": "dcs", "boost": "freeze"}))
    agent.local.next_tick = float("inf")
    r = Rank(agent, "1")
    try:
        r.data_far.send(b"x")
        pump(agent)
        assert weight(agent, "1") == BOOST_WEIGHT
        assert agent.local.boost_frozen == {"2"}
        assert not agent.driver.is_thawed(agent.jobs["2"].cgroup)
        assert agent.jobs["2"].frozen is False  # the controller's view is untouched
        # still pending: the freeze holds, but never more than FREEZE_MAX_TICKS ticks
        for _ in range(FREEZE_MAX_TICKS):
            agent.local.next_tick = 0.0
            pump(agent, 1)
        assert agent.local.boost_frozen == {"2"}
        agent.local.next_tick = 0.0
        pump(agent, 1)
        assert agent.local.boost_frozen == set()
        assert agent.driver.is_thawed(agent.jobs["2"].cgroup)
        assert weight(agent, "1") == BOOST_WEIGHT  # the holder keeps its weight
        r.data.recv(10)  # consumed
        agent.local.next_tick = 0.0
        pump(agent, 1)
        assert agent.local.boost_frozen == set()
        assert agent.driver.is_thawed(agent.jobs["2"].cgroup)
        # and a scheme change never leaves a job frozen
        agent.local.next_tick = 0.0
        pump(agent, 1)  # drained sockets are re-armed at a tick
        r.data_far.send(b"y")
        pump(agent)
        assert agent.local.boost_frozen == {"2"}
        agent.local.configure(LocalConfig.from_request({"scheme": "none"}))
        assert agent.driver.is_thawed(agent.jobs["2"].cgroup)
    finally:
        r.close()


class StepClock:
    """The local scheduler's clock, moved by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def rest_setup(agent: Agent, scheme: str) -> tuple[StepClock, Rank]:
    clock = StepClock(100.0)
    agent.local.clock = clock
    configure(agent, scheme, tick_ms=10.0)
    r = Rank(agent, "1")  # the tick at 100.00 was evaluated before it registered
    assert agent.local.status()["decisions"] == 1
    clock.t = 100.01
    agent.local.poll()  # the tick at 100.01: nothing pending, so the node rests
    return clock, r


def test_an_idle_node_rests_and_counts_the_ticks_it_does_not_evaluate(agent: Agent) -> None:
    clock, r = rest_setup(agent, "cc-s")
    try:
        local = agent.local
        assert local.status()["decisions"] == 2
        assert local.timeout() == pytest.approx(0.1)  # not 10 ms: the next tick it evaluates
        assert local._epoll_watched  # the kernel wakes it at an arrival, even for CC-S
        clock.t = 100.06
        local.poll()
        assert local.status()["decisions"] == 2  # not due, nothing stirred: not evaluated
        clock.t = 100.111
        local.poll()
        st = local.status()
        # the ticks at 100.02 ... 100.10 counted (nine), the one at 100.11 evaluated
        assert st["decisions"] == 12 and st["ticks"] == 12 and st["conflicts"] == 0
        assert local.timeout() == pytest.approx(0.099)  # and rests again, on the grid
    finally:
        r.close()


def test_an_arrival_wakes_a_resting_node_onto_its_tick_grid(agent: Agent) -> None:
    clock, r = rest_setup(agent, "cc-s")
    try:
        local = agent.local
        clock.t = 100.045
        r.data_far.send(b"x")  # an arrival for a process that is not running
        for _ in range(50):
            agent.step(0.01)
            if not local._epoll_watched:
                break
        assert not local._epoll_watched  # CC-S does not react to arrivals: unwatched again
        st = local.status()
        # 100.02, 100.03, 100.04 counted; the arrival is decided at the next grid tick
        assert st["decisions"] == 5 and st["holder"] is None
        assert local.next_tick == pytest.approx(100.05)
        clock.t = 100.051
        local.poll()
        st = local.status()
        assert st["decisions"] == 6 and st["holder"] == "1/0" and st["enp"] == 1
        assert local.timeout() == pytest.approx(0.009)  # a pending node does not rest
        assert weight(agent, "1") == BOOST_WEIGHT
    finally:
        r.close()


def test_a_node_with_a_pending_message_ticks_every_interval(agent: Agent) -> None:
    clock, r = rest_setup(agent, "cc-b")
    try:
        r.data_far.send(b"x")
        for _ in range(50):
            agent.step(0.01)
            if agent.local.status()["holder"] == "1/0":
                break
        assert agent.local.status()["holder"] == "1/0"  # CC-B: decided at the arrival
        clock.t = 100.2
        agent.local.poll()
        assert agent.local.timeout() == pytest.approx(0.01)
        r.data.recv(10)  # consumed: the next tick finds nothing and the node rests again
        clock.t = 100.211
        agent.local.poll()
        assert agent.local.status()["holder"] is None
        assert agent.local.timeout() == pytest.approx(0.099)
    finally:
        r.close()
