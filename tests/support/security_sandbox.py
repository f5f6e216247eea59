"""Unprivileged users and a place they can work, for the attacks of tests/security.

A :class:`Sandbox` is a world-traversable directory under /tmp holding

* ``src/``: a copy of cosched's stdlib-only packages (``agent``, ``apps``,
  ``common``) and of tests/support/security_attacks.py as ``secattacks.py``, so the
  test users can run them wherever the checkout lives (CI's may be under a
  0700 home);
* ``drop/``: a sticky, world-writable directory (as /tmp is);
* ``run/``: the controller's run directory, 0711 as docs/security.md says an
  operator opens /run/cosched for local users;
* ``home-NAME``: each test user's home.

Users are made with ``useradd`` and removed with ``userdel`` when the sandbox
closes. :meth:`Sandbox.run_as` runs a command as one of them: their uid, gid and
no other group, a clean environment, from their home.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "apps", "common")


def root_env(**extra: str) -> dict[str, str]:
    """Our environment with this checkout first on PYTHONPATH (for the cosched command)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path


def _python_for(user: User, candidates: list[str]) -> str | None:
    for exe in candidates:
        if not exe or not os.path.exists(exe):
            continue
        try:
            done = subprocess.run(
                [exe, "-c", "import sys; assert sys.version_info >= (3, 10)"],
                user=user.uid, group=user.gid, extra_groups=[], env={"PATH": "/usr/bin:/bin"},
                cwd="/", capture_output=True, timeout=30,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return exe
    return None


class Sandbox:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cosched-sec-", dir="/tmp"))
        self.root.chmod(0o755)
        self.src = self.root / "src"
        for pkg in PACKAGES:
            shutil.copytree(REPO / pkg, self.src / pkg,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
        shutil.copy(Path(__file__).with_name("security_attacks.py"), self.src / "secattacks.py")
        for path in self.src.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        self.src.chmod(0o755)
        self.drop = self.root / "drop"
        self.drop.mkdir(mode=0o1777)
        self.drop.chmod(0o1777)
        self.run = self.root / "run"
        self.run.mkdir()
        self.run.chmod(0o711)
        self.users: list[User] = []
        self._python: str | None = None

    # ---- users -------------------------------------------------------------------------
    def add_user(self, role: str) -> User:
        name = f"cs{role[:4]}{secrets.token_hex(3)}"
        home = self.root / f"home-{name}"
        subprocess.run(
            ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/sh",
             "--user-group", name],
            check=True, capture_output=True,
        )  # fmt: skip
        pw = pwd.getpwnam(name)
        user = User(name, pw.pw_uid, pw.pw_gid, home)
        self.users.append(user)
        return user

    @property
    def python(self) -> str:
        """An interpreter every test user can run (the first one found)."""
        if self._python is None:
            assert self.users, "add a user first"
            real = os.path.realpath(sys.executable)
            found = _python_for(self.users[0], [sys.executable, real, "/usr/bin/python3",
                                                shutil.which("python3") or ""])  # fmt: skip
            assert found, "no Python interpreter an unprivileged user can run on this host"
            self._python = found
        return self._python

    def env(self, user: User, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(user.home),
            "USER": user.name,
            "LOGNAME": user.name,
            "PYTHONPATH": str(self.src),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra or {})
        return env

    def run_as(self, user: User, argv: list[str], timeout: float = 120,
               check: bool = False) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return subprocess.run(
            argv, user=user.uid, group=user.gid, extra_groups=[], env=self.env(user),
            cwd=str(user.home), capture_output=True, text=True, timeout=timeout, check=check,
        )  # fmt: skip

    def popen_as(self, user: User, argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, user=user.uid, group=user.gid, extra_groups=[], env=self.env(user),
            cwd=str(user.home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def attack(self, user: User, *args: str, timeout: float = 120) -> dict[str, Any]:
        """``secattacks`` as ``user``; its JSON answer (the last line it printed)."""
        done = self.run_as(user, [self.python, "-m", "secattacks", *args], timeout=timeout)
        lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
        assert lines, (args, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
        return dict(json.loads(lines[-1]))

    def job_argv(self, *args: str) -> list[str]:
        """A job command running ``secattacks`` (give it :meth:`job_env` too)."""
        return [self.python, "-m", "secattacks", *args]

    def job_env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.src), "PYTHONDONTWRITEBYTECODE": "1"}

    # ---- cleanup ---------------------------------------------------------------------------
    def close(self) -> None:
        import psutil

        uids = {u.uid for u in self.users}
        for proc in psutil.process_iter(["uids"]):  # the test users' processes, by pid
            with contextlib.suppress(psutil.Error):
                if proc.info["uids"] and proc.info["uids"].real in uids:
                    proc.kill()
        for user in self.users:
            subprocess.run(["userdel", "--force", "--remove", user.name], capture_output=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root)
