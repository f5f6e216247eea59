"""Finding 6 (issue 28): a job never gets another job's output. Job ids start at 1 again
on a fresh controller; the agent reopened ``job-1/rank-0.out`` for append and chowned
it to the new job's user, who could then read the earlier job's output. Each launch
now gets a directory of its own that must not exist yet (agent/runas.py)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from tests.support.security import Sec

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]


@pytest.mark.timeout(300)
def test_a_new_job_gets_none_of_an_old_ones_output(sec: Sec) -> None:
    secret = secrets.token_hex(8)
    sec.live.start("gang", quantum=0.1)
    v = sec.submit(sec.victim, ["/bin/sh", "-c", f"echo victim-{secret}"], name="victim")
    vrec = sec.wait_job(v)
    assert vrec["state"] == "done" and secret in sec.output(vrec)
    vfile = Path(vrec["ranks"][0]["stdout"])
    # a fresh controller (no --restore): job ids start at 1 again
    sec.live.stop()
    sec.live.start("gang", quantum=0.1)
    a = sec.submit(sec.attacker, ["/bin/sh", "-c", "echo attacker"], name="attacker")
    assert a == v, "a fresh controller numbers its jobs from 1 again"
    arec = sec.wait_job(a)
    assert arec["state"] == "done"
    afile = arec["ranks"][0]["stdout"]
    got = sec.box.attack(sec.attacker, "read", afile)
    assert got["ok"] and "attacker" in got["text"], got
    assert secret not in got["text"], f"the attacker's {afile} holds the victim's output"
    st = vfile.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (sec.victim.uid, 0o640), (vfile, st)
    assert secret in vfile.read_text() and "attacker" not in vfile.read_text()
