"""Jobs run as their user, with a clean environment, and write their output where no
one can plant a link (issue 13; agent/runas.py, docs/security.md). Root, real agent."""

from __future__ import annotations

import os
import pwd
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.client import AgentError
from tests.support.live_agent import (  # noqa: F401  (make_agent is a fixture)
    LiveAgent,
    _start_agent,
    free_port,
    make_agent,
    needs_v1,
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the agent switches users"),
    needs_v1,
]

NOBODY = pwd.getpwnam("nobody")
PROBE = (
    "id -u; id -g; echo HOME=$HOME; echo FOO=$FOO; echo LD=${LD_PRELOAD:-none};"
    " echo SECRET=${AGENT_SECRET:-none};"
    " if touch /root/cosched-lp-probe 2>/dev/null; then echo WROTE; else echo DENIED; fi"
)


def _output(a: LiveAgent, job: str, timeout: float = 10.0) -> str:
    with a.client() as c:
        deadline = time.monotonic() + timeout
        while True:
            jobs = {j["job_id"]: j for j in c.status()["jobs"]}
            if jobs[job]["state"] == "ended":
                break
            assert time.monotonic() < deadline, jobs[job]
            time.sleep(0.05)
    (out,) = (a_run(a)).glob(f"job-{job}.*/rank-0.out")  # one directory per launch
    return out.read_text()


def a_run(a: LiveAgent) -> Path:
    return a.log.parent / f"{a.node}-run"


def test_a_job_runs_as_its_user_with_a_clean_environment(
    make_agent: Callable[..., LiveAgent],  # noqa: F811 (the imported fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_SECRET", "root-only")  # in the agent's environment
    a = make_agent()
    with a.client() as c:
        reply = c.launch(
            a.node, "lp1", ["/bin/sh", "-c", PROBE], start_frozen=False, user="nobody",
            env={"FOO": "bar", "LD_PRELOAD": "/nonexistent/evil.so"},
        )  # fmt: skip
    out = _output(a, "lp1").split()
    assert out[:2] == [str(NOBODY.pw_uid), str(NOBODY.pw_gid)], out
    assert f"HOME={NOBODY.pw_dir}" in out and "FOO=bar" in out
    assert "LD=none" in out  # the loader's variables never reach a job
    assert "SECRET=none" in out  # nor the agent's environment
    assert "DENIED" in out and not os.path.exists("/root/cosched-lp-probe")
    f = Path(reply["run_dir"]) / "rank-0.out"
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert stat.S_IMODE(st.st_mode) == 0o640
    d = f.parent.stat()
    assert d.st_uid == 0 and not d.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert "dropped LD_PRELOAD" in a.log.read_text()


def test_without_a_user_the_job_runs_as_the_agent(
    make_agent: Callable[..., LiveAgent],  # noqa: F811
) -> None:
    a = make_agent()
    with a.client() as c:
        c.launch(a.node, "lp2", ["/bin/sh", "-c", "id -u"], start_frozen=False)
    assert _output(a, "lp2").split() == ["0"]


def test_unknown_user_is_refused_in_one_line(
    make_agent: Callable[..., LiveAgent],  # noqa: F811
) -> None:
    a = make_agent()
    with a.client() as c, pytest.raises(AgentError) as e:
        c.launch(a.node, "lp3", ["true"], user="no-such-user-cosched")
    assert "does not exist on this node" in str(e.value) and "\n" not in str(e.value)
    with a.client() as c:
        assert "lp3" not in {j["job_id"] for j in c.status()["jobs"]}


def test_planted_links_are_refused(
    make_agent: Callable[..., LiveAgent],  # noqa: F811
) -> None:
    a = make_agent()
    run = a_run(a)
    target = run.parent / "victim"
    target.write_text("untouched\n")
    # a job directory that is a link, and a rank file that is a link, where a launch
    # whose instance someone guessed would put its output (agent/jobsecret.py)
    instance = "ab" * 16
    (run / f"job-lp4.{instance[:12]}").symlink_to(run.parent)
    (run / f"job-lp5.{instance[:12]}").mkdir()
    (run / f"job-lp5.{instance[:12]}" / "rank-0.out").symlink_to(target)
    with a.client() as c:
        for job in ("lp4", "lp5"):
            with pytest.raises(AgentError) as e:
                c.launch(a.node, job, ["/bin/sh", "-c", "echo pwned"], start_frozen=False,
                         user="nobody", env={"COSCHED_JOB_INSTANCE": instance})  # fmt: skip
            assert "never reused" in str(e.value), e.value
    assert target.read_text() == "untouched\n"


def test_agent_refuses_a_run_dir_others_can_write(tmp_path: Path) -> None:
    run = tmp_path / "shared-run"
    run.mkdir()
    os.chown(run, NOBODY.pw_uid, NOBODY.pw_gid)  # a user could plant links here
    key = tmp_path / "k"
    key.write_bytes(os.urandom(32).hex().encode())
    key.chmod(0o600)
    log = tmp_path / "agent.log"
    with pytest.raises(RuntimeError, match="agent exited"):
        _start_agent("lp9", free_port(), free_port(), key, "cosched/lp9", run, log, 2.0, [])
    text = log.read_text().strip()
    assert "--run-dir" in text and "belongs to uid" in text and "Traceback" not in text, text
