"""Finding 5 (issue 28): a job cannot buy CPU through the NIC socket.

Under periodic boost (Yu & Byun 2011's PB: each tick the boost goes to a process
with pending messages) a job that registered as any rank it liked, as often as it
liked, with sockets of its own making and a state page claiming 1,000 unconsumed
messages it never received, held the boost. Registrations are now one per rank the
agent launched on that node, from that rank's process, with the job's own mesh
sockets; a claimed backlog counts only within what the rank's sockets delivered
(agent/nicguard.py)."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.security import Sec, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]


def _pb(sec: Sec) -> None:
    sec.live.start("pb", quantum=0.1)
    assert wait_for(lambda: all(sec.agent_status(n["name"])["cdc"]["scheme"] == "pb"
                                for n in sec.nodes()), 20)  # fmt: skip


@pytest.mark.timeout(300)
def test_one_registration_per_rank_with_its_own_sockets(sec: Sec) -> None:
    _pb(sec)
    j = sec.submit(sec.attacker, sec.box.job_argv("nic-register-many", "1"), size=2,
                   name="many")  # fmt: skip
    rec = sec.wait_job(j, 60)
    for r in (0, 1):
        lines = [x for x in sec.output(rec, r).splitlines() if x.startswith("{")]
        assert lines, (sec.output(rec, r), sec.output(rec, r, "stderr"))
        attempts = json.loads(lines[-1])["attempts"]
        taken = [a for a in attempts if a["ok"]]
        # its own rank, once; not again, not another rank, not a socket of its making
        assert len(taken) == 1 and taken[0]["rank"] == r and "sock" not in taken[0], attempts


@pytest.mark.timeout(300)
def test_made_up_pending_messages_buy_no_boost(sec: Sec) -> None:
    _pb(sec)
    j = sec.submit(sec.attacker, sec.box.job_argv("nic-fake-pending", "8"), name="fake")
    assert wait_for(lambda: sec.live.req("job", job_id=j)["state"] == "running", 20)
    node = sec.live.req("job", job_id=j)["nodes"][0]
    key = f"{j}/0"
    holders: list[object] = []
    registered = False
    end = time.monotonic() + 6
    while time.monotonic() < end:
        cdc = sec.agent_status(node)["cdc"]
        registered = registered or cdc["registered"] > 0
        holders.append(cdc["holder"])
        time.sleep(0.05)
    rec = sec.wait_job(j, 60)
    assert registered, ("the job never registered", sec.output(rec), sec.output(rec, 0, "stderr"))
    assert key not in holders, f"{key} held the boost in {holders.count(key)} of {len(holders)}"
    assert sec.agent_status(node)["cdc"]["nic_claims_rejected"] > 0
