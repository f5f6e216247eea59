"""Finding 4 (issue 28): no local user and no job can stop a daemon.

* JSON nested 100,000 deep on the controller's socket, and as the body of a frame on
  the controller's TCP port and an agent's port (before any MAC could be checked);
* 5,000 connections to each of the controller's socket and TCP port and each agent's
  port, held open, with the daemons' descriptor limit at systemd's default soft 1024:
  an agent's accept raised EMFILE and it exited; the controller's spun;
* under a communication-driven scheme, the NIC socket: nested JSON, a pipe where a
  socket should be, and the ERL page and a state page truncated under the agent's
  mappings (SIGBUS killed it without thawing anything).

After each, every daemon is the same process and answers ``status``, the controller
keeps switching, and no job stays frozen. benchmarks/flood.py measures the flood.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.security import Sec, wait_for
from tests.support.security_measure import StatusProbe, switch_gaps

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]

SPIN = ["/bin/sh", "-c", "while :; do :; done"]
FLOOD = 5000


def _alive_and_same(sec: Sec, before: dict[str, int]) -> None:
    assert sec.agent_pids() == before, "an agent was replaced"
    alive = sec.alive()
    assert all(alive.values()), (alive, sec.live.log_text()[-2000:])


@pytest.mark.timeout(300)
def test_nested_json_stops_no_daemon(sec: Sec) -> None:
    sec.live.start("gang", quantum=0.1)
    before = sec.agent_pids()
    ctl_pid = sec.live.proc.pid  # type: ignore[union-attr]
    r = sec.box.attack(sec.attacker, "deep-unix", sec.sock)
    assert "not JSON" in r["reply"] or "nested" in r["reply"], r
    sec.box.attack(sec.attacker, "deep-tcp", "127.0.0.1", str(sec.live.tcp_port))
    for n in sec.nodes():
        sec.box.attack(sec.attacker, "deep-tcp", n["ctl_ip"], "7070")
    time.sleep(1.0)
    assert sec.live.proc is not None and sec.live.proc.pid == ctl_pid
    _alive_and_same(sec, before)


@pytest.mark.timeout(600)
def test_a_connection_flood_stops_no_daemon(sec: Sec) -> None:
    sec.live.start("gang", quantum=0.1)
    for k in range(2):
        sec.live.req("submit", spec={"size": 2, "argv": SPIN, "name": f"spin{k}"})
    assert wait_for(lambda: any(v == "FROZEN" for v in sec.live.freezer_states().values()), 20)
    before = sec.agent_pids()
    baseline = switch_gaps(sec, 3.0)
    targets = [f"unix:{sec.sock}", f"tcp:127.0.0.1:{sec.live.tcp_port}",
               *(f"tcp:{n['ctl_ip']}:7070" for n in sec.nodes())]  # fmt: skip
    floods = []
    for i, target in enumerate(targets):
        ready = sec.box.drop / f"flood-ready-{i}"
        argv = [sec.box.python, "-m", "secattacks", "flood", str(FLOOD), "12", str(ready), target]
        floods.append((sec.box.popen_as(sec.attacker, argv), ready))
    # from the first connect until the user lets go: the burst of connects and the hold
    with StatusProbe(sec) as probe:
        during = switch_gaps(sec, 300.0, until=lambda: all(p.poll() is not None
                                                           for p, _ in floods))  # fmt: skip
    assert all(r.exists() for _, r in floods), "the flood never got going"
    reports = []
    for proc, _ in floods:
        stdout, stderr = proc.communicate(timeout=120)
        reports.append(stdout.strip() or stderr[-500:])
    print("flood:", *reports, sep="\n  ")
    print(
        f"longest time without a switch: before {baseline}, during {during}; "
        f"slowest status {probe.slowest}; agent connections evicted before the hello"
        f" and retried: {len(probe.evicted)}"
    )
    _alive_and_same(sec, before)
    assert not probe.failed, probe.failed[:5]
    assert all(probe.answers.get(n, 0) > 0 for n in ("controller", "n0", "n1")), probe.answers
    # still switching: no node went much longer without a switch than it did before
    for node, gap in during.items():
        assert gap < max(1.0, 5 * baseline[node]), (node, gap, baseline)
    assert sec.live.req("status")["quanta"] > 0


def _cdc(sec: Sec, boost: str = "freeze") -> None:
    sec.live.start("pb", "--boost", boost, quantum=0.1)
    assert wait_for(lambda: all(sec.agent_status(n["name"])["cdc"]["scheme"] == "pb"
                                for n in sec.nodes()), 20)  # fmt: skip


def _after_attack(sec: Sec, before: dict[str, int], victim: int) -> None:
    time.sleep(1.5)  # several of the agents' ticks read the pages and write the ERL page
    _alive_and_same(sec, before)
    assert wait_for(lambda: not sec.frozen_jobs(), 5), sec.frozen_jobs()
    assert sec.live.req("job", job_id=victim)["state"] in ("running", "frozen")


@pytest.mark.timeout(300)
def test_the_nic_socket_stops_no_agent(sec: Sec) -> None:
    _cdc(sec)
    victim = sec.submit(sec.victim, SPIN, size=2, name="victim")
    before = sec.agent_pids()
    nic = sec.agent_status("n0")["cdc"]
    assert nic["scheme"] == "pb"
    path = Path("/var/lib/cosched/jobs/n0/nic.sock")
    # nested JSON, from a process that is not even a job
    r = sec.box.attack(sec.attacker, "nic-deep", "--path", str(path))
    assert "error" in r["reply"], r
    _after_attack(sec, before, victim)
    # a pipe where a socket should be, from the attacker's own job on both nodes
    j = sec.submit(sec.attacker, sec.box.job_argv("nic-badfd"), size=2, name="badfd")
    rec = sec.wait_job(j, 60)
    assert all('"ok": false' in sec.output(rec, r) for r in (0, 1)), [
        sec.output(rec, r) for r in (0, 1)
    ]
    _after_attack(sec, before, victim)
    # the ERL page and the job's own page truncated under the agent's mappings
    for flags in ([], ["--unsealed"]):
        j = sec.submit(sec.attacker, sec.box.job_argv("nic-truncate", *flags, "--hold", "2"),
                       size=2, name="truncate")  # fmt: skip
        rec = sec.wait_job(j, 60)
        outs = [sec.output(rec, r) for r in (0, 1)]
        print(outs)
        for o in outs:
            assert '"erl_truncated": true' not in o and '"erl_reopened_truncated": true' not in o
        _after_attack(sec, before, victim)
