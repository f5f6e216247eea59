"""The security suite's world (tests/security): :class:`Sec` is the cluster
(tests/support/live.py Live), a sandbox with a victim and an attacker user
(tests/support/security_sandbox.py), and helpers to wait for jobs and to ask the
daemons whether they still answer; tests/security/conftest.py's ``sec`` makes one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import Live
from tests.support.security_sandbox import Sandbox, User

ENDED = ("done", "failed", "killed")


class Sec:
    """One test's world: cluster, controller (started by the test), sandbox, users."""

    def __init__(self, live: Live, box: Sandbox) -> None:
        self.live = live
        self.box = box
        self.victim: User = box.add_user("victim")
        self.attacker: User = box.add_user("attacker")

    @property
    def sock(self) -> str:
        return str(self.live.tmp / "controller.sock")

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.live.st.nodes)

    def node(self, name: str) -> dict[str, Any]:
        return next(n for n in self.live.st.nodes if n["name"] == name)

    # ---- as a user -------------------------------------------------------------------------
    def request(self, user: User, op: str, **args: Any) -> dict[str, Any]:
        return self.box.attack(user, "request", self.sock, op, json.dumps(args))

    def submit(self, user: User, argv: list[str], size: int = 1, **spec: Any) -> int:
        spec = {"size": size, "argv": argv, "env": self.box.job_env(), **spec}
        reply = self.request(user, "submit", spec=spec)
        assert reply.get("ok"), reply
        return int(reply["result"]["job_id"])

    # ---- as root ----------------------------------------------------------------------------
    def wait_job(self, job_id: int, timeout: float = 120) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            rec = self.live.req("job", job_id=job_id)
            if rec["state"] in ENDED:
                return dict(rec)
            assert time.monotonic() < end, (rec, self.live.log_text()[-3000:])
            time.sleep(0.2)

    def output(self, rec: dict[str, Any], rank: int = 0, stream: str = "stdout") -> str:
        path = rec["ranks"][rank][stream]
        return Path(path).read_text(errors="replace") if path else ""

    def agent_status(self, node: str, timeout: float = 5.0) -> dict[str, Any]:
        from agent.client import AgentClient

        n = self.node(node)
        with AgentClient((n["ctl_ip"], 7070), self.live.key, sender="tool", timeout=timeout) as c:
            return c.status()

    def agent_pids(self) -> dict[str, int]:
        return {a.node: a.pid for a in self.live.st.agents}

    def alive(self) -> dict[str, bool]:
        """Whether each daemon process still runs and answers status."""
        import psutil

        out: dict[str, bool] = {}
        for node, pid in self.agent_pids().items():
            ok = psutil.pid_exists(pid)
            if ok:
                try:
                    self.agent_status(node)
                except Exception:
                    ok = False
            out[node] = ok
        proc = self.live.proc
        ok = proc is not None and proc.poll() is None
        if ok:
            try:
                with self.live.client(retry=5.0) as c:
                    c.request("status")
            except Exception:
                ok = False
        out["controller"] = ok
        return out

    def frozen_jobs(self) -> list[str]:
        return sorted(f"{n}/{g}" for (n, g), v in self.live.freezer_states().items()
                      if v != "THAWED")  # fmt: skip


#: systemd's default soft limit on open files (LimitNOFILE=1024:524288): the daemons
#: run with it here, as a service would, whatever this shell allows.
DAEMON_NOFILE = 1024


def wait_for(cond: Any, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def skip_unless_root() -> Any:
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a real local cluster")
