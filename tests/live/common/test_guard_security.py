"""The tests of tests/unit/common/test_guard_security.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import json
import os
import resource
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from agent import nicguard, nicproto
from apps.mp import auth, frame, mesh
from common import guard
from common.daemons import daemon_env, isolation_flags, python_argv
from common.ports import free_port


def test_accept_sheds_instead_of_raising_when_out_of_descriptors() -> None:
    lst = socket.create_server(("127.0.0.1", 0))
    lst.setblocking(False)
    acc = guard.Acceptor(lst)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    clients = [socket.create_connection(lst.getsockname()) for _ in range(3)]
    hog: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        while True:  # use every descriptor there is
            try:
                hog.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        assert acc.accept() is None and acc.shed == 1  # EMFILE: shed, not raised
    finally:
        for fd in hog:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    got = acc.accept()
    assert got is not None
    got[0].close()
    assert clients[0].recv(1) == b""  # the shed one was closed at once
    for c in clients:
        c.close()
    acc.close()
    lst.close()


# ---- the mesh and the remote shell against an impostor --------------------------------------
def _mesh(secret: bytes, port: int, result: dict[str, Any]) -> None:
    hs = mesh.Handshake(0, 2, ["127.0.0.1"] * 2, port, "9", 8.0, secret)
    lst = mesh.listen(0, hs.peers, port, 2)
    try:
        links = hs.connect_all(lst)
        result["peer"] = links[0].sock.recv(7)
        for link in links:
            link.sock.close()
    except Exception as e:  # reported to the test
        result["error"] = str(e)
    finally:
        lst.close()


def test_the_mesh_refuses_a_connection_that_cannot_prove_the_secret() -> None:
    port = free_port()
    result: dict[str, Any] = {}
    t = threading.Thread(target=_mesh, args=(b"s3cret", port, result))
    t.start()
    # an impostor: a perfect HELLO for rank 1, nonce and all, and no secret
    imp = mesh.connect_once(("127.0.0.1", port), 5) if _wait_port(port) else None
    assert imp is not None
    job = b"9" + os.urandom(auth.NONCE_SIZE)
    imp.sendall(frame.pack(frame.HELLO, 1, 2, len(job), 0, 0) + job)
    imp.recv(4096)  # rank 0's HELLO
    imp.sendall(os.urandom(auth.PROOF_SIZE))
    imp.settimeout(5)
    assert imp.recv(100) == b""  # dropped without a proof of its own
    imp.close()
    # the real rank 1 gets in
    real = mesh.Handshake(1, 2, ["127.0.0.1"] * 2, port, "9", 8.0, b"s3cret")
    (link,) = real.connect_all(None)
    link.sock.sendall(b"genuine")
    t.join(10)
    link.sock.close()
    assert result == {"peer": b"genuine"}, result


def _wait_port(port: int) -> bool:
    import time

    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.01)
    return False


def test_mpilaunch_runs_nothing_for_a_caller_without_the_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from apps import mpilaunch

    port = free_port()
    monkeypatch.setenv(auth.SECRET_ENV, "s3cret")
    monkeypatch.setattr(mpilaunch, "ACCEPT_TIMEOUT_S", 3.0)
    done: dict[str, int] = {}
    t = threading.Thread(target=lambda: done.update(code=mpilaunch.serve(1, ["127.0.0.1"] * 2,
                                                                          port - 1)))  # fmt: skip
    t.start()
    assert _wait_port(port)
    marker = tmp_path / "ran"
    with socket.create_connection(("127.0.0.1", port)) as s:
        body = json.dumps({"cmd": f"touch {marker}"}).encode()
        s.sendall(mpilaunch._LEN.pack(len(body)) + body)
        s.settimeout(5)
        with pytest.raises(OSError):  # a nonce, then the door closes
            while s.recv(4096):
                pass
            raise OSError
    t.join(10)
    assert not marker.exists() and done["code"] == 1  # waited for mpirun, which never came


def test_mesh_sockets_are_checked_against_the_jobs_ranks_and_ports() -> None:
    port = free_port()
    view = nicguard.JobView("5", {0: os.getpid()}, lambda: [os.getpid()],
                            ("127.0.0.1", "127.0.0.1"), port)  # fmt: skip
    lst = socket.create_server(("127.0.0.1", port))
    far = socket.create_connection(("127.0.0.1", port))
    near, _ = lst.accept()
    other = socket.create_server(("127.0.0.1", 0))
    stray = socket.create_connection(other.getsockname())
    r, w = os.pipe()
    try:
        s, addr = nicguard.mesh_socket(near.fileno(), view, 0, 1)
        assert addr == "127.0.0.1"
        s.close()
        for fd, peer in ((near.fileno(), 0), (near.fileno(), 5), (stray.fileno(), 1), (r, 1)):
            with pytest.raises(nicguard.Refused):
                nicguard.mesh_socket(fd, view, 0, peer)
        with pytest.raises(nicguard.Refused, match="does not run on this node"):
            nicguard.check_rank(view, 1, os.getpid())
        with pytest.raises(nicguard.Refused, match="not in job"):
            nicguard.check_rank(nicguard.JobView("5", {0: 1}, lambda: [1]), 0, os.getpid())
    finally:
        for x in (lst, far, near, other, stray):
            x.close()
        os.close(r)
        os.close(w)


def test_a_claimed_backlog_counts_only_within_what_the_sockets_delivered() -> None:
    lst = socket.create_server(("127.0.0.1", 0))
    far = socket.create_connection(lst.getsockname())
    near, _ = lst.accept()
    check = nicguard.ClaimCheck()
    try:
        assert not check.honour(0, 5, [near], os.getpid())  # nothing received yet
        far.sendall(b"x" * (5 * nicproto.FRAME_HEADER_SIZE))
        near.recv(4096)
        assert check.honour(0, 5, [near], os.getpid())
        assert not check.honour(0, 6, [near], os.getpid())  # more than was delivered
        assert check.honour(2, 3, [near], os.getpid())
        assert not check.honour(1, 3, [near], os.getpid())  # consumed went down
        assert check.rejected == 3
    finally:
        for s in (lst, far, near):
            s.close()


# ---- how daemons start -----------------------------------------------------------------------
def test_daemons_never_import_from_the_callers_directory() -> None:
    argv = python_argv("agent", "--node", "n0")
    assert argv[1] in ("-I", "-P") and argv[2:] == ["-m", "agent", "--node", "n0"]
    assert isolation_flags("/no/such/python") == ("-P",)
    env = daemon_env(source={"PATH": "/bin", "LOGNAME": "mallory", "USER": "mallory",
                             "COSCHED_RUN_DIR": "/r", "LD_PRELOAD": "x"})  # fmt: skip
    assert "LOGNAME" not in env and "USER" not in env and "LD_PRELOAD" not in env
    assert env["COSCHED_RUN_DIR"] == "/r" and env["PYTHONPATH"]
