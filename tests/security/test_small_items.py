"""Finding 7 (issue 28), the smaller items, each as the attacker would try it:

* the ``benchmark`` class (it pre-empts everyone) is the operators';
* a user has at most ``queue_limit`` (default 100) jobs queued;
* a job's working directory is entered as the job's user: not behind a directory only
  root can pass, and the outcome does not tell whether a root-only path exists;
* ``cosched remote`` says loudly when it accepts a host key it does not know;
* ``--user-keys``: a key file another user owns is refused, not only one others can read;
* a peer that has not authenticated never gets a frame signed with the cluster key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.client import ControllerError
from tests.support.security import Sec, wait_for
from tests.support.security_sandbox import Sandbox, root_env

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster"),
]


@pytest.mark.timeout(300)
def test_benchmark_class_and_queue_limit_are_the_operators(sec: Sec) -> None:
    sec.live.start("fcfs", quantum=0.1)
    r = sec.request(sec.attacker, "submit", spec={"size": 1, "argv": ["true"],
                                                   "class": "benchmark"})  # fmt: skip
    assert not r["ok"] and "operators" in r["error"], r
    # the whole cluster busy for a while: everything after it queues
    sec.live.req("submit", spec={"size": 2, "argv": ["sleep", "60"], "name": "busy"})
    mine = sec.submit(sec.attacker, ["true"], name="mine")
    r = sec.request(sec.attacker, "class", job_id=mine, **{"class": "benchmark"})
    assert not r["ok"] and "operators" in r["error"], r
    spec = json.dumps({"size": 1, "argv": ["true"], "name": "q"})
    got = sec.box.attack(sec.attacker, "submit-many", sec.sock, spec, "150")
    assert got["refused"] > 0 and "queued" in got["first_error"], got
    limit = sec.live.req("config")["queue_limit"]
    assert 1 + got["accepted"] == limit, (got, limit)
    # an operator is not held to it
    assert sec.live.req("submit", spec={"size": 1, "argv": ["true"], "class": "benchmark"})


@pytest.mark.timeout(300)
def test_a_job_enters_its_directory_as_its_user(sec: Sec) -> None:
    private = sec.box.root / "private"
    (private / "exists").mkdir(parents=True)
    private.chmod(0o700)  # root's: nobody else may pass
    sec.live.start("gang", quantum=0.1)
    recs = {}
    for name in ("exists", "missing"):
        j = sec.submit(sec.attacker, ["/bin/pwd"], cwd=str(private / name), name=name)
        recs[name] = sec.wait_job(j)
    shown = {k: (r["state"], r["exit_code"], sec.output(r),
                 sec.output(r, 0, "stderr").replace(k, "X")) for k, r in recs.items()}  # fmt: skip
    assert str(private) not in shown["exists"][2], ("the job ran behind a 0700 directory", shown)
    assert shown["exists"][0] == "failed", shown
    # the same outcome for a path that exists and one that does not
    assert shown["exists"] == shown["missing"], shown


def _mac_ok(key: bytes, frame_hex: str) -> bool:
    raw = bytes.fromhex(frame_hex)
    if len(raw) < 8 + 32:
        return False
    length = int.from_bytes(raw[4:8], "big")
    header, body, mac = raw[:8], raw[8 : 8 + length], raw[8 + length : 8 + length + 32]
    return hmac.compare_digest(mac, hmac.new(key, header + body, hashlib.sha256).digest())


@pytest.mark.timeout(300)
def test_refusals_to_unauthenticated_peers_are_not_signed_with_the_cluster_key(
    sec: Sec,
) -> None:
    sec.live.start("gang", quantum=0.1)
    where = [("127.0.0.1", sec.live.tcp_port), *((n["ctl_ip"], 7070) for n in sec.nodes())]
    for host, port in where:
        got = sec.box.attack(sec.attacker, "unsigned-error", host, str(port))
        assert got["frame"], (host, port, got)
        assert not _mac_ok(sec.live.key, got["frame"]), f"{host}:{port} signed it with the key"
        assert _mac_ok(b"", got["frame"]), (host, port, got)  # readable by anyone


@pytest.mark.timeout(300)
def test_user_keys_owned_by_another_user_are_refused(sec: Sec) -> None:
    keys = sec.box.root / "userkeys"
    keys.mkdir(mode=0o755)
    mine = keys / "root.key"  # the attacker's own file, named for root
    mine.write_text("a" * 64)
    mine.chmod(0o600)
    os.chown(mine, sec.attacker.uid, sec.attacker.gid)
    copy = sec.attacker.home / "k"
    copy.write_text("a" * 64)
    os.chown(copy, sec.attacker.uid, sec.attacker.gid)
    copy.chmod(0o600)
    try:
        sec.live.start("gang", "--user-keys", str(keys), quantum=0.1)
        started = True
    except ControllerError:
        started = False
    if started:
        spec = {"spec": {"size": 1, "argv": ["/bin/sh", "-c", "id -u"]}}
        got = sec.box.attack(sec.attacker, "tcp-request", "127.0.0.1", str(sec.live.tcp_port),
                             str(copy), "root", "submit", json.dumps(spec))  # fmt: skip
        jobs = sec.live.req("jobs", all=True)
        pytest.fail(f"the controller took a key {sec.attacker.name} owns as root's: {got} {jobs}")
    assert wait_for(lambda: sec.live.proc is not None and sec.live.proc.poll() is not None, 10)
    last = sec.live.log_text().strip().splitlines()[-1]
    assert str(mine) in last and "owned" in last, last


@pytest.mark.timeout(300)
def test_remote_says_loudly_when_it_accepts_an_unknown_host_key(root_cluster_env: Path) -> None:
    from testbed.cluster import sshd as sshd_mod

    problem = sshd_mod.sshd_available()
    assert problem is None, f"sshd is needed (scripts/bootstrap.sh installs it): {problem}"
    state = root_cluster_env
    cli = [sys.executable, "-m", "testbed.cli"]
    env = root_env()
    box = Sandbox()
    try:
        up = subprocess.run([*cli, "cluster", "up", "--nodes", "2", "--ssh", "--no-agents"],
                            capture_output=True, text=True, timeout=180, env=env)  # fmt: skip
        assert up.returncode == 0, up.stderr
        inv = yaml.safe_load((state / "inventory.yml").read_text())
        empty = box.root / "known_hosts"
        empty.write_text("")
        for checking in ("no", "accept-new"):
            inv["all"]["vars"]["ansible_ssh_common_args"] = (
                f"-o StrictHostKeyChecking={checking} -o UserKnownHostsFile={empty}"
            )
            path = box.root / f"inventory-{checking}.yml"
            path.write_text(yaml.safe_dump(inv))
            empty.write_text("")
            r = subprocess.run([*cli, "remote", "status", "-i", str(path), "--limit", "n0",
                                "--timeout", "5"], capture_output=True, text=True, timeout=120,
                               env=env)  # fmt: skip
            said = r.stderr + r.stdout
            assert "n0 (" in said and "WARNING" in said and "host key" in said, (checking, said)
            assert f"StrictHostKeyChecking={checking}" in said, said
    finally:
        subprocess.run([*cli, "cluster", "down"], capture_output=True, timeout=120, env=env)
        box.close()
