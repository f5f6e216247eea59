"""Finding 1 (issue 28): another user's job cannot act as an MPI job's user or pose as a
rank. Every job on a node shares its address and a job's ports are predictable, so the
attacker's job connects to the victim's ranks: to mpilaunch's remote shell (it ran the
attacker's command as the victim) and to the mesh (it was taken for rank 1). With the
job's secret (agent/jobsecret.py, apps/mp/auth.py) both are refused, and the victim's
jobs still run and verify."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from controller.launchenv import job_port
from tests.support.security import Sec, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]


def _running(sec: Sec, job: int) -> bool:
    return sec.live.req("job", job_id=job)["state"] in ("running", "frozen")


@pytest.mark.timeout(300)
def test_another_users_job_cannot_run_commands_through_mpilaunch(sec: Sec) -> None:
    assert shutil.which("mpirun"), "Open MPI's mpirun is needed (scripts/bootstrap.sh installs it)"
    sec.live.start("gang", quantum=0.1)
    py = sec.box.python
    # rank 0 calls mpirun late, as a slow start would: rank 1 waits for its call meanwhile
    victim = sec.submit(
        sec.victim,
        ["/bin/sh", "-c", 'if [ "$COSCHED_RANK" = 0 ]; then sleep 6; fi; '
         'exec "$0" -m apps.mpilaunch -- /bin/sh -c "echo mpi-ok"', py],
        size=2, name="victim-mpi",
    )  # fmt: skip
    assert wait_for(lambda: _running(sec, victim), 30)
    rec = sec.live.req("job", job_id=victim)
    data = {n["name"]: n["data_ip"] for n in sec.nodes()}
    rank1_addr, port = data[rec["nodes"][1]], job_port(victim) + 1
    pwned = sec.box.drop / "pwned"
    attacker = sec.submit(
        sec.attacker,
        sec.box.job_argv("rsh-hijack", rank1_addr, str(port), f"id -u > {pwned}; id -u", "10"),
        size=2, name="hijack",
    )  # fmt: skip
    a = sec.wait_job(attacker, 60)
    v = sec.wait_job(victim, 120)
    tries = [sec.output(a, r) for r in (0, 1)]
    assert not pwned.exists(), (
        f"the attacker's command ran as uid {pwned.read_text().strip()} "
        f"(victim {sec.victim.uid}): {tries}"
    )
    assert '"served": true' not in "".join(tries), tries
    assert any('"connected": true' in t for t in tries), ("the attack never connected", tries)
    out = sec.output(v)
    assert v["state"] == "done" and out.count("mpi-ok") == 2, (v, out, sec.output(v, 1, "stderr"))


@pytest.mark.timeout(300)
def test_another_users_job_cannot_pose_as_a_rank(sec: Sec) -> None:
    sec.live.start("gang", quantum=0.1)
    # rank 1 connects 4 s late: the impostor is there first
    victim = sec.submit(sec.victim, sec.box.job_argv("mesh-victim", "4", "30"), size=2,
                        name="victim-mesh")  # fmt: skip
    assert wait_for(lambda: _running(sec, victim), 30)
    rec = sec.live.req("job", job_id=victim)
    data = {n["name"]: n["data_ip"] for n in sec.nodes()}
    t0 = time.monotonic()
    attacker = sec.submit(
        sec.attacker,
        sec.box.job_argv("mesh-impostor", data[rec["nodes"][0]], str(job_port(victim)),
                         str(victim), "2", "1", "forged", "10"),
        name="impostor",
    )  # fmt: skip
    a = sec.wait_job(attacker, 60)
    v = sec.wait_job(victim, 120)
    assert time.monotonic() - t0 < 120
    tried = sec.output(a)
    assert '"connected": true' in tried, ("the impostor never reached rank 0", tried)
    out = sec.output(v)
    assert "forged" not in out, ("rank 0 took the impostor's message", out, tried)
    assert v["state"] == "done" and '"got": "genuine"' in out, (v, out, sec.output(v, 0, "stderr"))
    # the refusal is said where the victim can see it
    assert "cannot prove it belongs to this job" in sec.output(v, 0, "stderr"), tried
