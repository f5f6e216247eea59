"""Who a job runs as, with what environment, and where its output goes (issue 13).

The agent is root; a job must not be. A launch names the submitting user (the
controller decides it: ``SO_PEERCRED`` on its unix socket), and every rank runs
with that user's uid, primary gid and supplementary groups, a clean environment
and output files it owns in a directory nobody else can plant links in
(docs/security.md).

Environment: the agent's own environment is *not* inherited. A rank gets

* from the agent, only :data:`INHERITED` (the search paths and locale that let a
  ``python3 -m apps...`` job start the same way everywhere),
* from the user's passwd entry ``HOME``, ``USER``, ``LOGNAME`` and ``SHELL``,
* what the job's spec set, except the dynamic loader's variables (``LD_*``: the
  controller refuses them in a spec; the agent drops them again here, in case a
  caller that is not our controller sent them),
* the ``COSCHED_*`` variables of the job.

A launch that names no user runs as the agent's own user (the key holder is trusted
with the node: docs/security.md); a non-root agent can only run jobs as itself.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

#: Variables a rank takes from the agent's environment (issue 13: an allow-list).
INHERITED = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR")
#: Prefixes taken from the agent's environment too (locale).
INHERITED_PREFIXES = ("LC_",)
#: What the dynamic loader reads: never from a submitter (an LD_PRELOAD in a root
#: job was a local root escalation).
FORBIDDEN_PREFIXES = ("LD_",)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


class RunAsError(ValueError):
    """The job's user or output directory is not acceptable (the launch is refused)."""


@dataclass(frozen=True)
class RunAs:
    """A user a rank runs as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str

    @property
    def is_self(self) -> bool:
        """The agent's own user: no switch needed."""
        return self.uid == os.geteuid()


def resolve(name: str | None) -> RunAs:
    """The user ``name`` from this node's passwd and group databases (None: the agent's)."""
    try:
        pw = pwd.getpwuid(os.geteuid()) if name is None else pwd.getpwnam(name)
    except KeyError:
        raise RunAsError(f"user {name!r} does not exist on this node") from None
    if pw.pw_uid != os.geteuid() and os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid()).pw_name
        raise RunAsError(
            f"the agent runs as {me!r} and cannot run jobs as {pw.pw_name!r} (run it as root)"
        )
    try:
        groups = tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        groups = (pw.pw_gid,)
    return RunAs(pw.pw_name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir, pw.pw_shell)


def forbidden(name: str) -> bool:
    return name.startswith(FORBIDDEN_PREFIXES)


def job_env(
    user: RunAs, submitted: dict[str, str], agent_env: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """A rank's environment (module doc) and the submitted names that were dropped."""
    src = os.environ if agent_env is None else agent_env
    env = {k: v for k, v in src.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}
    env.setdefault("PATH", SAFE_PATH)
    env.update(HOME=user.home, USER=user.name, LOGNAME=user.name, SHELL=user.shell)
    dropped = sorted(k for k in submitted if forbidden(k))
    env.update({k: v for k, v in submitted.items() if not forbidden(k)})
    return env, dropped


def _check_dir(path: Path) -> None:
    """``path`` is a real directory owned by root (or us) that others cannot write."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise RunAsError(f"{path} is not a directory (a link?); remove it")
    if st.st_uid not in (0, os.geteuid()):
        raise RunAsError(f"{path} belongs to uid {st.st_uid}, not to the agent; remove it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise RunAsError(f"{path} is writable by others; chmod go-w it")


def ensure_root(root: Path) -> Path:
    """Make the agent's output directory ``root`` safely and return it (absolute).

    ``root`` and every directory above it must be real directories that only root
    (or the agent's user) can write, or sticky ones like /tmp above it: then nobody
    can plant a link inside. Missing parts are created 0755.
    """
    root = Path(os.path.abspath(root))
    for part in [*reversed(root.parents), root]:
        if not part.exists() and not part.is_symlink():
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755)
        _check_dir(part)
    if root.stat().st_mode & stat.S_ISVTX:
        raise RunAsError(f"{root} is a shared sticky directory; give the agent its own --run-dir")
    return root


def output_dir(root: Path, job_id: str, instance: str) -> Path:
    """Make ``root``/job-``job_id``.``instance`` afresh (:func:`ensure_root`) and return it.

    It must not exist yet (issue 28): job ids start at 1 again on a fresh
    controller, and reopening an earlier job's directory gave the new job's
    user the old one's output. The instance is the launch's
    (agent/jobsecret.py), the first 12 hex digits of it in the name.
    """
    d = ensure_root(root) / f"job-{job_id}.{instance[:12]}"
    try:
        os.mkdir(d, 0o755)
    except FileExistsError:
        raise RunAsError(f"{d} exists: an output directory is never reused") from None
    _check_dir(d)
    return d


def open_output(path: Path, user: RunAs) -> int:
    """Open a rank's output file for appending, never through a link, owned by ``user``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise RunAsError(f"{path} is not a plain file; remove it")
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (user.uid, user.gid):
            os.fchown(fd, user.uid, user.gid)
    except BaseException:
        os.close(fd)
        raise
    return fd
