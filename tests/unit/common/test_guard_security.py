"""The pieces of issue 28 one at a time, without root: bounded JSON, connection admission,
accept at EMFILE, operator uids and rights, job secrets, the mesh and mpilaunch
handshakes against an impostor, the NIC's descriptor and claim checks, refusals not
signed with the cluster key. tests/security performs the attacks on a real cluster."""

from __future__ import annotations

import fcntl
import json
import mmap
import os
from typing import Any

import pytest

from agent import nicguard, nicproto, wire
from agent.jobsecret import INSTANCE_ENV, instance_of, job_secret, rank_env
from apps.mp import auth
from common import guard, safejson
from controller import rights
from controller.jobs import SpecError
from controller.operator import OperatorConfig

KEY = b"k" * 32


# ---- bounded JSON ------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [0, 1, 5, 31, 32])
def test_documents_within_the_limit_parse(depth: int) -> None:
    v: Any = 1
    for i in range(depth):
        v = [v] if i % 2 else {"k": v, "s": '[[[{{{\\"]]'}
    assert safejson.depth(json.dumps(v).encode()) == depth
    assert safejson.loads(json.dumps(v)) == v


@pytest.mark.parametrize("doc", [b"[" * 100_000, b"[" * 40 + b"]" * 40, b'{"a":' * 50 + b"1"
                                 + b"}" * 50])  # fmt: skip
def test_deeper_documents_are_a_value_error_not_a_recursion_error(doc: bytes) -> None:
    with pytest.raises(safejson.TooDeep):
        safejson.loads(doc)
    with pytest.raises(ValueError):
        safejson.loads(doc)


def test_brackets_inside_strings_do_not_count() -> None:
    doc = json.dumps({"argv": ["[" * 1000, "{" * 1000 + '"\\'], "env": {}}).encode()
    assert safejson.depth(doc) == 2 and safejson.loads(doc)["argv"][0] == "[" * 1000


# ---- admission and accept --------------------------------------------------------------------
class _C:
    def __init__(self, n: int) -> None:
        self.n = n


def test_unauthenticated_connections_are_capped_per_source_oldest_first() -> None:
    now = [0.0]
    a = guard.Admission(guard.Limits(pending_per_peer=3, pending_total=5, handshake_s=5.0),
                        clock=lambda: now[0])  # fmt: skip
    conns = [_C(i) for i in range(6)]
    dropped: list[Any] = []
    for c in conns[:4]:
        dropped += a.admit_pending(c, "10.0.0.1")
    assert dropped == [conns[0]]  # the oldest from that address went
    a.authenticated(conns[3])  # its hello came: no longer pending, never evicted
    for c in conns[4:]:
        dropped += a.admit_pending(c, "10.0.0.1")
    assert dropped == [conns[0], conns[1]]
    now[0] = 6.0
    assert set(a.expired()) == {c for c in conns if a.is_pending(c)}  # no hello in time


def test_a_unix_user_holds_a_bounded_number_of_connections_root_any() -> None:
    a = guard.Admission(guard.Limits(open_per_user=2))
    assert a.admit_user(_C(1), 1000) and a.admit_user(_C(2), 1000)
    assert not a.admit_user(_C(3), 1000)
    assert all(a.admit_user(_C(10 + i), 0) for i in range(10))
    assert a.admit_user(_C(4), 1001)


# ---- operators and rights --------------------------------------------------------------------
def test_operators_are_uids_resolved_at_start() -> None:
    uids = rights.operator_uids(["root"], daemon_uid=4242)
    assert uids == frozenset({0, 4242})
    with pytest.raises(ValueError, match="no-such-user-x"):
        rights.operator_uids(["no-such-user-x"])


def test_benchmark_class_and_queue_limit() -> None:
    cfg = OperatorConfig(queue_limit=2)
    with pytest.raises(SpecError, match="operators only"):
        rights.check_submit({"class": "benchmark"}, "alice", False, {}, cfg)
    rights.check_submit({"class": "benchmark"}, "root", True, {}, cfg)
    with pytest.raises(rights.RightsError):
        rights.check_class("benchmark", False)
    rights.check_class("benchmark", True)
    assert OperatorConfig().queue_limit == 100


# ---- job secrets -----------------------------------------------------------------------------
def test_the_secret_depends_on_key_job_and_instance() -> None:
    a = job_secret(KEY, "7", "ab" * 16)
    assert a == job_secret(KEY, "7", "ab" * 16) and len(a) == 64
    assert len({a, job_secret(KEY, "8", "ab" * 16), job_secret(KEY, "7", "cd" * 16),
                job_secret(b"x" * 32, "7", "ab" * 16)}) == 4  # fmt: skip
    assert instance_of({INSTANCE_ENV: "ab" * 16}) == "ab" * 16
    assert instance_of({INSTANCE_ENV: "../x"}) != instance_of({INSTANCE_ENV: "../x"})
    assert set(rank_env(KEY, "7", "ab" * 16)) == {INSTANCE_ENV, auth.SECRET_ENV}


# ---- the NIC ---------------------------------------------------------------------------------
def _memfd(seal: bool, size: int = nicproto.STATE_SIZE) -> int:
    fd = os.memfd_create("p", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def test_state_pages_must_be_sealed_memfds_of_a_page() -> None:
    fds = [_memfd(True), _memfd(False), _memfd(True, 100)]
    r, w = os.pipe()
    try:
        nicguard.check_state_fd(fds[0])
        for bad in (fds[1], fds[2], r):
            with pytest.raises(nicguard.Refused):
                nicguard.check_state_fd(bad)
    finally:
        for fd in (*fds, r, w):
            os.close(fd)


def test_the_erl_page_cannot_be_shrunk_or_written_by_jobs() -> None:
    page = nicguard.erl_page()
    try:
        nicproto.write_erl(page.mem, 77)  # the agent still writes
        with pytest.raises(OSError):
            os.ftruncate(page.ro_fd, 0)
        again = os.open(f"/proc/self/fd/{page.ro_fd}", os.O_RDWR)
        try:
            with pytest.raises(OSError):
                os.ftruncate(again, 0)
            with pytest.raises(OSError):
                mmap.mmap(again, nicproto.ERL_PAGE_SIZE)  # no new writable mapping
        finally:
            os.close(again)
        ro = mmap.mmap(page.ro_fd, nicproto.ERL_PAGE_SIZE, prot=mmap.PROT_READ)
        assert nicproto.read_erl(ro) == 77
        ro.close()
    finally:
        page.close()


def test_registrations_and_events_are_parsed_within_bounds() -> None:
    assert nicguard.parse_register(json.dumps(
        {"op": "register", "job": "1", "rank": 0, "socks": [{"peer": 1}]}).encode()) == (
        "1", 0, [1])  # fmt: skip
    for bad in (b"[" * 60_000, b"x" * (nicguard.MAX_REGISTER + 1), b'{"op":"register"}',
                json.dumps({"op": "register", "job": "1", "rank": 0,
                            "socks": [{"peer": [[[[1]]]]}]}).encode()):  # fmt: skip
        with pytest.raises(nicguard.Refused):
            nicguard.parse_register(bad)
    assert nicguard.parse_event(b'{"op": "coll", "on": true}') is True
    assert nicguard.parse_event(b'{"op":"coll","on":false}') is False
    assert nicguard.parse_event(b"[" * 60) is None and nicguard.parse_event(b"{}") is None


# ---- the wire --------------------------------------------------------------------------------
def test_refusals_to_strangers_carry_no_cluster_key_signature() -> None:
    frame_ = wire.public_error("agent:n0", "bad_mac", "no")
    with pytest.raises(wire.PeerRefused) as e:
        wire.FrameDecoder(KEY).feed(frame_)
    assert e.value.code == "bad_mac"
    msg = wire.decode_one(wire.PUBLIC_KEY, frame_)
    assert msg.type == wire.ERROR


def test_a_servers_first_frame_is_small_and_shallow() -> None:
    dec = wire.FrameDecoder(KEY, first_max=wire.HELLO_MAX_BODY)
    with pytest.raises(wire.FrameTooLarge):
        dec.feed(wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.HELLO_MAX_BODY + 1))
    body = b"[" * 3000
    pre = wire.FrameDecoder(KEY, key_for=lambda s: KEY, first_max=wire.HELLO_MAX_BODY)
    with pytest.raises(wire.Malformed):  # parsed before its MAC: bounded, not a RecursionError
        pre.feed(wire.HEADER.pack(wire.MAGIC, wire.VERSION, len(body)) + body + b"\0" * 32)
