"""Issue 4 end to end: the real controller process driving real agents on a 2-node cluster.

* strict gang: sampling the freezer states (v1 or cgroup2) every ~2 ms never shows two jobs
  THAWED on one node across two consecutive samples (Wiseman & Feitelson 2003 §2.1);
* a forged TCP submission is refused and the controller keeps serving;
* SIGKILL of the controller: the agents thaw every job within their fail-safe;
* paired gang: an I/O-bound job paired with a compute-bound one, both advance
  (Wiseman & Feitelson 2003 §2.4, §4.1);
* checkpoint + shutdown + ``--restore`` in the middle of a run loses no job
  and records the one that ended meanwhile (Gorda & Brooks 1991 §3.1).

Every test stops its controller and tears the cluster down even on failure
(the fixture then checks that no namespace, link or cgroup is left).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import COMPUTE, IO, SPIN, Live, count_violations, running


@pytest.fixture
def live(root_cluster_env: Path, tmp_path: Path) -> Iterator[Live]:
    with running(root_cluster_env, tmp_path, cores=2) as lv:
        yield lv


@pytest.mark.root
def test_strict_gang_forged_tcp_and_failsafe(live: Live) -> None:
    live.start("gang", quantum=0.05)
    a = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "a"})["job_id"]
    b = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "b"})["job_id"]
    c = live.req("submit", spec={"size": 1, "argv": SPIN, "name": "c"})["job_id"]
    time.sleep(0.5)
    violations, samples = count_violations(live, 3.0, min_samples=301)
    assert samples > 300, samples
    assert violations == 0, f"{violations} of {samples} samples had two jobs THAWED on a node"
    recs = {j["job_id"]: j for j in live.req("jobs")}
    assert {a, b, c} <= set(recs)
    for j in (a, b):
        assert recs[j]["cpu_s"] > 0.3, recs[j]  # each gets a share of the 3.5 s
    status = live.req("status")
    assert status["quanta"] > 50 and all(status["agents"].values())
    # bad input: one clear error, the controller keeps running
    from controller.client import ControllerClient, ControllerError

    with pytest.raises(ControllerError, match="exceeds the cluster"):
        live.req("submit", spec={"size": 5, "argv": SPIN})
    # forged TCP submission: wrong key -> refused
    with pytest.raises(ControllerError, match="refused"):
        ControllerClient(
            tcp=("127.0.0.1", live.tcp_port), key=b"f" * 32, user="root", retry=1
        ).request("submit", spec={"size": 1, "argv": SPIN})
    # the genuine key works over TCP
    with ControllerClient(
        tcp=("127.0.0.1", live.tcp_port), key=live.key, user="root", retry=5
    ) as cl:
        assert len(cl.request("jobs")) == 3
    assert len(live.req("jobs")) == 3  # nothing was added by the forgery
    # SIGKILL: within the 2 s fail-safe (+ margin) every job is THAWED
    assert any(s == "FROZEN" for s in live.freezer_states().values())
    assert live.req("checkpoint")["path"]  # so a successor can adopt the jobs
    assert live.proc is not None
    live.proc.send_signal(signal.SIGKILL)
    live.proc.wait(5)
    live.proc = None
    deadline = time.monotonic() + 4.0
    states = live.freezer_states()
    while time.monotonic() < deadline:
        states = live.freezer_states()
        if states and all(s == "THAWED" for s in states.values()):
            break
        time.sleep(0.05)
    assert states and all(s == "THAWED" for s in states.values()), states
    # leave no job behind: a new controller adopts and kills them
    live.start("gang", "--restore", quantum=0.05)
    for j in (a, b, c):
        live.req("kill", job_id=j)


@pytest.mark.root
def test_paired_gang_io_job_paired_with_compute(live: Live) -> None:
    live.start("paired-gang", quantum=0.1)
    comp = live.req("submit", spec={"size": 2, "argv": COMPUTE, "name": "comp"})["job_id"]
    io = live.req("submit", spec={"size": 2, "argv": IO, "name": "io"})["job_id"]
    time.sleep(2.0)  # the predictor needs a few measured quanta of each
    before = {j["job_id"]: j["cpu_s"] for j in live.req("jobs")}
    # How often each job is runnable: strict gang would thaw each of the two rows
    # at most half the time; paired gang runs the compute row with the I/O row
    # beside it. Sampling the freezer does not depend on how busy the host is.
    thawed = {comp: 0, io: 0}
    samples = 0
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        states = live.freezer_states()
        for j in (comp, io):
            if states.get(("n0", f"job-{j}")) == "THAWED":
                thawed[j] += 1
        samples += 1
        time.sleep(0.005)
    after = {j["job_id"]: j["cpu_s"] for j in live.req("jobs")}
    status = live.req("status")
    m = live.req("matrix")
    assert status["matching_success_ratio"] > 0.5, (status, m)
    assert thawed[comp] / samples > 0.6, (thawed, samples, status)
    assert thawed[io] / samples > 0.6, (thawed, samples, status)
    # both make progress
    assert after[comp] > before[comp] and after[io] > before[io], (before, after)
    for j in (comp, io):
        live.req("kill", job_id=j)


@pytest.mark.root
def test_checkpoint_restore_mid_run_loses_no_job(live: Live) -> None:
    live.start("gang", quantum=0.05)
    long_ = live.req("submit", spec={"size": 2, "argv": SPIN, "name": "long"})["job_id"]
    short = live.req(
        "submit", spec={"size": 1, "argv": ["sh", "-c", "sleep 2.5"], "name": "short"}
    )["job_id"]
    queued_spec = {"size": 2, "argv": SPIN, "name": "late"}
    live.req("set", max_slots=2)
    queued = live.req("submit", spec=queued_spec)["job_id"]
    time.sleep(0.5)
    before = {j["job_id"]: j for j in live.req("jobs")}
    path = live.req("shutdown")["path"]
    assert path == str(live.tmp / "ck.json")
    assert live.wait_exit() == 0
    # While no controller runs: a request waits (client retry), the short job ends.
    import threading

    submitted: dict[str, Any] = {}

    def submit_meanwhile() -> None:
        submitted.update(live.req("submit", spec={"size": 1, "argv": SPIN, "name": "meanwhile"}))

    t = threading.Thread(target=submit_meanwhile)
    t.start()
    time.sleep(3.0)
    live.start("gang", "--restore", quantum=0.05)
    t.join(30)
    assert "job_id" in submitted, "the request made during the restart was lost"
    after = {j["job_id"]: j for j in live.req("jobs", all=True)}
    assert set(before) <= set(after)
    assert after[short]["state"] == "done" and after[short]["exit_code"] == 0, after[short]
    assert after[long_]["state"] in ("running", "frozen")
    assert after[long_]["cpu_s"] >= before[long_]["cpu_s"]
    assert after[queued]["state"] in ("queued", "running", "frozen")
    assert live.req("config")["max_slots"] == 2
    status = live.req("status")
    assert long_ in status["reconcile"]["adopted"]
    time.sleep(0.5)
    violations, samples = count_violations(live, 1.5, min_samples=101)
    assert violations == 0 and samples > 100
    # a corrupt checkpoint is refused with the reason and left in place
    live.req("shutdown")
    live.wait_exit()
    ck = Path(path)
    ck.write_bytes(ck.read_bytes()[:100])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "--policy",
            "gang",
            "--cluster-state",
            str(live.state_dir / "cluster.json"),
            "--run-dir",
            str(live.tmp),
            "--checkpoint",
            path,
            "--restore",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode != 0 and "truncated or not JSON" in out.stderr, out.stderr
    assert len(ck.read_bytes()) == 100
    # the previous good checkpoint still restores; then clean up the jobs
    os.replace(path + ".prev", path)
    live.start("gang", "--restore", quantum=0.05)
    for j in live.req("jobs"):
        live.req("kill", job_id=j["job_id"])


@pytest.mark.root
def test_an_operator_runs_a_job_as_another_user(live: Live) -> None:
    """``run_as`` (cosched submit --as): root, an operator, runs a job as nobody; the
    rank's own uid says so. A non-operator asking is refused (unit test)."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    live.start("gang", quantum=0.1)
    probe = ["/bin/sh", "-c", "id -u; id -g"]
    jid = live.req("submit", spec={"size": 1, "argv": probe, "run_as": "nobody"})["job_id"]
    end = time.monotonic() + 30
    while (rec := live.req("job", job_id=jid))["state"] not in ("done", "failed", "killed"):
        assert time.monotonic() < end, rec
        time.sleep(0.1)
    assert rec["state"] == "done" and rec["user"] == "root" and rec["run_as"] == "nobody", rec
    out = Path(rec["ranks"][0]["stdout"]).read_text().split()
    assert out[-2:] == [str(nobody.pw_uid), str(nobody.pw_gid)], out


@pytest.mark.root
def test_dhc_on_the_live_cluster(live: Live) -> None:
    """Feitelson & Rudolph 1996 live: the controller maps gangs into power-of-two node blocks and
    turns
    the tree's waves into quantum commands; never two jobs thawed on a node; every job
    ends done; `cosched matrix` shows the tree and its active front."""
    from testbed.views import render_matrix

    live.start("dhc", "--param", "round_quanta=4", quantum=0.05)
    burn = [sys.executable, "-c", "x = 0\nfor i in range(4_000_000): x += i"]
    ids = [live.req("submit", spec={"size": s, "argv": burn, "name": f"d{k}"})["job_id"]
           for k, s in enumerate((2, 1, 1, 2))]  # fmt: skip
    time.sleep(0.3)
    m = live.req("matrix")
    assert m["policy"] == "dhc" and m["tree"]["controllers"], m
    text = render_matrix(m)
    assert "DHC tree" in text and "level 1 #0" in text, text
    _never_two_thawed_then_all_done(live, ids)


@pytest.mark.root
def test_buddy_placement_on_the_live_cluster(live: Live) -> None:
    """The matrix's buddy placement (controller/policies/matrix.py) driving real agents: two
    1-rank gangs share row 0 (1 takes the free buddy of 0), a 2-rank gang opens row 1;
    never two jobs thawed on a node; every job ends done."""
    live.start("gang", "--param", "placement=buddy", quantum=0.05)
    burn = [sys.executable, "-c", "x = 0\nfor i in range(4_000_000): x += i"]
    ids = [live.req("submit", spec={"size": s, "argv": burn, "name": f"b{k}"})["job_id"]
           for k, s in enumerate((1, 1, 2))]  # fmt: skip
    time.sleep(0.3)
    slots = live.req("matrix")["slots"]
    assert slots[:2] == [[ids[0], ids[1]], [ids[2], ids[2]]], slots
    _never_two_thawed_then_all_done(live, ids)


def _never_two_thawed_then_all_done(live: Live, ids: list[int]) -> None:
    """No node shows two jobs THAWED (over 100 samples or more); then every job ends done."""
    violations, samples = count_violations(live, 1.5, min_samples=101)
    assert samples > 100 and violations == 0, (violations, samples)
    end = time.monotonic() + 90
    while True:
        recs = {r["job_id"]: r for r in live.req("jobs", all=True)}
        if all(recs[j]["state"] in ("done", "failed", "killed") for j in ids):
            break
        assert time.monotonic() < end, recs
        time.sleep(0.2)
    assert all(recs[j]["state"] == "done" for j in ids), recs
