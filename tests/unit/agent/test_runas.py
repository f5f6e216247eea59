"""agent/runas.py: who a job runs as, its environment, its output directory (issue 13).
The real switch of user is tests/integration/test_least_privilege.py."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from agent.runas import RunAs, RunAsError, ensure_root, job_env, open_output, output_dir, resolve

ME = pwd.getpwuid(os.geteuid())
USER = RunAs("alice", 1234, 1234, (1234, 27), "/home/alice", "/bin/bash")


def test_environment_is_an_allow_list_plus_the_spec_without_the_loader() -> None:
    agent_env = {"PATH": "/venv/bin:/usr/bin", "LC_ALL": "C.UTF-8", "AWS_SECRET": "x",
                 "LD_LIBRARY_PATH": "/opt", "SUDO_USER": "root"}  # fmt: skip
    env, dropped = job_env(
        USER, {"FOO": "1", "LD_PRELOAD": "/tmp/evil.so", "LD_AUDIT": "x"}, agent_env
    )
    assert env == {
        "PATH": "/venv/bin:/usr/bin", "LC_ALL": "C.UTF-8", "HOME": "/home/alice",
        "USER": "alice", "LOGNAME": "alice", "SHELL": "/bin/bash", "FOO": "1",
    }  # fmt: skip
    assert dropped == ["LD_AUDIT", "LD_PRELOAD"]


def test_a_path_is_always_set() -> None:
    env, _ = job_env(USER, {}, {})
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_resolve_names_the_missing_user() -> None:
    with pytest.raises(RunAsError, match="'no-such-user-x' does not exist"):
        resolve("no-such-user-x")
    me = resolve(None)
    assert me.uid == os.geteuid() and me.is_self and me.name == ME.pw_name


I1, I2 = "a" * 32, "b" * 32  # two launches' instances (agent/jobsecret.py)


def test_output_dir_is_made_afresh_and_never_reused(tmp_path: Path) -> None:
    d = output_dir(tmp_path / "run" / "n0", "7", I1)
    assert d == tmp_path / "run" / "n0" / "job-7.aaaaaaaaaaaa" and d.is_dir()
    assert d.stat().st_mode & 0o777 == 0o755
    # issue 28: a job 7 of a later controller gets a directory of its own
    assert output_dir(tmp_path / "run" / "n0", "7", I2) != d
    with pytest.raises(RunAsError, match="never reused"):
        output_dir(tmp_path / "run" / "n0", "7", I1)


@pytest.mark.parametrize(
    ("plant", "needle"),
    [
        (lambda root: root.chmod(0o777), "writable by others"),
        (lambda root: root.chmod(0o1777), "shared sticky directory"),
    ],
)
def test_a_run_dir_others_can_write_is_refused(tmp_path: Path, plant, needle: str) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "run"
    root.mkdir()
    plant(root)
    with pytest.raises(RunAsError, match=needle):
        ensure_root(root)


def test_links_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(RunAsError, match="not a directory"):
        ensure_root(tmp_path / "link" / "n0")
    root = ensure_root(tmp_path / "run")
    (root / f"job-1.{I1[:12]}").symlink_to(real)
    with pytest.raises(RunAsError, match="never reused"):
        output_dir(root, "1", I1)
    d = output_dir(root, "2", I1)
    victim = tmp_path / "victim"
    victim.write_text("x")
    (d / "rank-0.out").symlink_to(victim)
    with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP
        open_output(d / "rank-0.out", resolve(None))
    os.link(victim, d / "rank-1.out")
    with pytest.raises(RunAsError, match="not a plain file"):
        open_output(d / "rank-1.out", resolve(None))
    assert victim.read_text() == "x"


def test_output_files_are_0640_and_append(tmp_path: Path) -> None:
    d = output_dir(tmp_path / "run", "3", I1)
    for text in (b"a", b"b"):
        fd = open_output(d / "rank-0.out", resolve(None))
        os.write(fd, text)
        os.close(fd)
    assert (d / "rank-0.out").read_bytes() == b"ab"
    assert (d / "rank-0.out").stat().st_mode & 0o777 == 0o640
