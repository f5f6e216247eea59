"""The node's shared I/O device (agent/iodevice.py): FIFO service, protocol, limits.

Timing is never asserted against the wall clock here: the queue's arithmetic runs on a
fake clock, the socket tests use zero service times. The live test that two jobs'
I/O really serialises on a node is tests/integration/test_iodevice_live.py.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from agent.iodevice import MAX_SERVICE, DeviceClient, IoDevice, _Request


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_requests_are_served_one_at_a_time_in_arrival_order(tmp_path: Path) -> None:
    clock = FakeClock()
    dev = IoDevice(tmp_path / "d.sock", clock=clock, sleep=clock.sleep)
    # three requests queued at t = 0 before the worker runs: served 0.2 s each, in order
    reqs = [_Request(0.2, 0.0, threading.Event()) for _ in range(3)]
    for r in reqs:
        dev._queue.put(r)
    dev._queue.put(None)
    dev._work()
    assert [r.waited for r in reqs] == pytest.approx([0.0, 0.2, 0.4])
    assert all(r.done.is_set() for r in reqs)
    assert dev.stats.requests == 3
    assert dev.stats.busy_seconds == pytest.approx(0.6)
    assert dev.stats.queued_seconds == pytest.approx(0.6)


def test_socket_protocol_and_limits(tmp_path: Path) -> None:
    path = tmp_path / "iodev.sock"
    dev = IoDevice(path)
    dev.open()
    try:
        assert path.stat().st_mode & 0o777 == 0o666
        c = DeviceClient(str(path), timeout=10.0)
        assert c.request(0.0) >= 0.0
        assert c.request(0.0) >= 0.0
        c.close()
        for bad in (b"abc\n", b"-1\n", f"{MAX_SERVICE + 1}\n".encode(), b"nan\n", b"1" * 200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10.0)
            s.connect(str(path))
            s.sendall(bad if bad.endswith(b"\n") else bad + b"\n")
            reply = s.recv(200)
            assert reply.startswith(b"error"), (bad, reply)
            assert s.recv(10) == b""  # and the device closes the connection
            s.close()
        # a client that vanishes mid-request does not hurt the device
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))
        s.sendall(b"0.01\n")
        s.close()
        c = DeviceClient(str(path), timeout=10.0)
        c.request(0.0)
        c.close()
        assert dev.stats.requests >= 3
    finally:
        dev.close()
    assert not path.exists()


def test_client_reports_a_refusal(tmp_path: Path) -> None:
    dev = IoDevice(tmp_path / "iodev.sock")
    dev.open()
    try:
        c = DeviceClient(str(tmp_path / "iodev.sock"), timeout=10.0)
        with pytest.raises(OSError, match="refused"):
            c.request(MAX_SERVICE * 5)  # the client sends it; the device says no
        c.close()
    finally:
        dev.close()


def test_open_refuses_a_non_socket_in_its_place(tmp_path: Path) -> None:
    p = tmp_path / "iodev.sock"
    p.write_text("not a socket")
    with pytest.raises(OSError, match="not a socket"):
        IoDevice(p).open()


def test_synthetic_needs_the_device_for_device_node() -> None:
    from apps.synthetic import ConfigError, build_parser, config_from

    args = build_parser().parse_args(["--device", "node", "--device-latency", "0.01"])
    with pytest.raises(ConfigError, match="COSCHED_IODEV"):
        config_from(args, {})
    cfg = config_from(args, {"COSCHED_IODEV": "/run/x/iodev.sock"})
    assert cfg.device == "node" and cfg.iodev_path == "/run/x/iodev.sock"
    big = build_parser().parse_args(["--device", "node", "--device-latency", "2"])
    with pytest.raises(ConfigError, match="at most 1 s"):
        config_from(big, {"COSCHED_IODEV": "/x"})


def test_synthetic_io_goes_through_the_device(tmp_path: Path) -> None:
    from apps.synthetic import io_phase

    dev = IoDevice(tmp_path / "iodev.sock")
    dev.open()
    try:
        c = DeviceClient(str(dev.path), timeout=10.0)
        io_phase(tmp_path, "t", 3, b"x" * 100, fsync=False, device_latency=0.001, device=c)
        c.close()
        assert dev.stats.requests == 3
    finally:
        dev.close()
    assert not list(tmp_path.glob("t-*"))  # files unlinked as before
