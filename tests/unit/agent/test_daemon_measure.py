"""Acks carry the I/O devices' bytes the quantum asks for, and the agent reads no others
(issue 32 item 2: the reads cost the jobs' cores at every switch)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from agent.api import Refused, _measure
from agent.netuse import NetMeter
from common.cgroups.iostat import IoBytes
from tests.support.agent_fakes import PARENT, add_fake_job, make_agent


class Reads:
    """Counting stand-ins for the cgroup's block I/O and the sockets' TCP bytes."""

    def __init__(self) -> None:
        self.io = self.net = 0
        self.bytes = 0

    def io_bytes(self, cgroup: str) -> IoBytes:
        self.io += 1
        return IoBytes(read=self.bytes, write=0)

    def sockets_of(self, pids: Iterable[int]) -> dict[int, tuple[int, int]]:
        self.net += 1
        return {1: (1, 3)}

    def tcp(self, pid: int, fd: int) -> tuple[int, int]:
        return self.bytes, 0


def _agent(tmp_path: Path) -> tuple[object, Reads]:
    agent, _ = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b", frozen=True)
    r = Reads()
    agent.io_unavailable = None
    agent.driver.io_bytes = r.io_bytes  # type: ignore[method-assign]
    agent.netmeter = NetMeter(r.tcp, r.sockets_of)
    return agent, r


def test_a_quantum_that_asks_for_no_device_reads_none(tmp_path: Path) -> None:
    agent, r = _agent(tmp_path)
    ack = agent.apply({"a": 100}, frozenset())  # type: ignore[attr-defined]
    assert "io_bytes" not in ack and "net_bytes" not in ack
    assert (r.io, r.net) == (0, 0)
    assert set(ack["cpu_ns"]) == {"a", "b"}  # the CPU is always read


def test_an_old_controller_gets_every_device(tmp_path: Path) -> None:
    agent, r = _agent(tmp_path)
    r.bytes = 500
    ack = agent.apply({"a": 100})  # type: ignore[attr-defined]
    assert ack["io_bytes"]["a"] == [500, 0] and ack["net_bytes"]["a"] == [500, 0]
    assert r.io == 2 and r.net == 2  # both jobs, both devices


def test_a_device_asked_again_counts_from_its_renewal(tmp_path: Path) -> None:
    agent, r = _agent(tmp_path)
    r.bytes = 100
    agent.apply({"a": 100}, frozenset({"disk"}))  # type: ignore[attr-defined]
    r.bytes = 300
    ack = agent.apply({"b": 100}, frozenset())  # type: ignore[attr-defined]
    assert "io_bytes" not in ack and r.io == 2  # not read while not asked
    r.bytes = 1000
    ack = agent.apply({"a": 100}, frozenset({"disk", "net"}))  # type: ignore[attr-defined]
    # asked again after a quantum without: its bases were stale, so this read renews them
    assert "io_bytes" not in ack and "net_bytes" not in ack and r.io == 4 and r.net == 2
    r.bytes = 1250
    ack = agent.apply({"b": 100}, frozenset({"disk", "net"}))  # type: ignore[attr-defined]
    assert ack["io_bytes"]["a"] == [250, 0] and ack["net_bytes"]["a"] == [250, 0]


def test_the_wire_key() -> None:
    assert _measure(None, 1) is None
    assert _measure(["net"], 1) == frozenset({"net"})
    with pytest.raises(Refused, match="measure must be a list"):
        _measure("net", 1)


def test_the_client_sends_measure_only_when_given() -> None:
    from agent.client import AgentClient

    c = AgentClient.__new__(AgentClient)  # the message only; no connection
    assert "measure" not in c.quantum_message("n0", 1, {"a": 100}, 0.0)
    assert c.quantum_message("n0", 1, {}, 0.0, measure=["net", "disk"])["measure"] == [
        "disk",
        "net",
    ]
