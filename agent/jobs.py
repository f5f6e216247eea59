"""Job processes of one node: launching into cgroups, reaping, reattaching.

How a child gets into its cgroups before it runs any job code: it is started
as ``sh -c 'read _ || exit 127; exec </dev/null; exec "$@"'`` with the read end
of a pipe as its stdin (the job itself then gets /dev/null).
The shell blocks on the pipe; the agent moves its pid into every job cgroup
(and lowers its scheduling policy to SCHED_OTHER), then writes one byte; only
then does the shell exec the real argv, which therefore starts (and forks)
inside the cgroups. If the agent fails before the byte, the pipe closes, the
read fails and the shell exits 127 without running the job. A pipe + shell is
used instead of fork()+preexec code because the agent is multi-threaded (the
metrics server), where running Python between fork and exec can deadlock.

The gate also enters the job's working directory, after the switch to the job's
user (issue 28): ``subprocess``'s ``cwd`` is entered before the uid changes, so a
job could start behind a directory only root may pass, and the launch error
told whether a root-only path existed. A directory the user cannot enter ends
the rank with status 126 and the same one line whatever the reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.runas import RunAs, open_output, resolve
from common.cgroups import DEFAULT_WEIGHT, CgroupError
from common.cgroups import Cgroups as CgroupDriver

log = logging.getLogger("agent.jobs")

JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# $1 is the working directory ("" = stay), entered as the job's user; then the job's argv.
_GATE = (
    "read _ || exit 127; exec </dev/null; "
    'if [ -n "$1" ]; then cd -- "$1" 2>/dev/null || '
    '{ echo "cosched: cannot enter the working directory $1 as $(id -un)" >&2; exit 126; }; fi; '
    'shift; exec "$@"'
)


class JobError(RuntimeError):
    pass


@dataclass
class Job:
    job_id: str
    cgroup: str
    ranks: dict[int, subprocess.Popen[bytes] | None] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)  # rank -> pid
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    weight: int = DEFAULT_WEIGHT
    # Monotonic instant the job was last frozen while it has stayed frozen since,
    # else None: kept by __setattr__ below, so every place that sets ``frozen``
    # keeps it right (the exporter's cosched_agent_job_frozen_seconds).
    frozen_since: float | None = field(default=None, init=False, repr=False, compare=False)
    frozen: bool = False
    reattached: bool = False  # found after an agent restart: not our children
    ended: bool = False
    exit_code: int | None = None
    end_reason: str = ""
    usage_base_ns: int = 0  # usage at the previous quantum ack
    final_usage_ns: int | None = None
    # block I/O bytes (read, write) at the previous ack and at the end (issue 31); None
    # where the group's statistics cannot be read
    io_base: tuple[int, int] | None = None
    final_io: tuple[int, int] | None = None
    run_dir: Path | None = None
    net_delay_s: float = 0.0  # userspace link delay the library applies (NIC view waits too)
    ended_at: float = 0.0  # monotonic; the agent forgets ended jobs after a while
    user: str = ""  # who the ranks run as (agent/runas.py); "" = unknown (reattached)
    # where the job's ranks are (COSCHED_PEERS, COSCHED_PORT): the NIC checks sockets by it
    peers: tuple[str, ...] = ()
    port: int = 0

    def __setattr__(self, name: str, value: object) -> None:
        if name == "frozen":
            if not value:
                object.__setattr__(self, "frozen_since", None)
            elif not self.__dict__.get("frozen", False):
                object.__setattr__(self, "frozen_since", time.monotonic())
        object.__setattr__(self, name, value)

    def frozen_for(self, now: float | None = None) -> float:
        """Seconds the job has been frozen without a break (0 while it runs)."""
        if not self.frozen or self.frozen_since is None:
            return 0.0
        return max(0.0, (time.monotonic() if now is None else now) - self.frozen_since)

    def summary(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "state": "ended" if self.ended else ("frozen" if self.frozen else "running"),
            "pids": {str(r): p for r, p in self.pids.items()},
            "exit_code": self.exit_code,
            "exit_codes": {str(r): c for r, c in self.exit_codes.items()},
            "weight": self.weight,
            "reattached": self.reattached,
            "user": self.user,
        }


def job_cgroup(parent: str, job_id: str) -> str:
    return f"{parent.strip('/')}/job-{job_id}"


def check_job_id(job_id: str) -> str:
    if not JOB_ID_RE.match(job_id):
        raise JobError(f"bad job id {job_id!r} (want [A-Za-z0-9_.-], at most 64)")
    return job_id


def spawn_rank(
    driver: CgroupDriver,
    cgroup: str,
    argv: list[str],
    env: dict[str, str],
    out_dir: Path,
    rank: int,
    cwd: str | None = None,
    user: RunAs | None = None,
) -> subprocess.Popen[bytes]:
    """Start one rank gated on a pipe, place it in the cgroup, then release it.

    ``out_dir`` comes from :func:`agent.runas.output_dir`; the rank's output files are
    opened without following links and belong to ``user``, whose uid, gid and groups
    the rank runs with (None: the agent's own user; agent/runas.py).
    """
    ids: dict[str, Any] = {}
    if user is not None and not user.is_self:
        ids = {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}
    owner = user or resolve(None)
    r, w = os.pipe()
    fds: list[int] = []
    try:
        fds.append(open_output(out_dir / f"rank-{rank}.out", owner))
        fds.append(open_output(out_dir / f"rank-{rank}.err", owner))
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _GATE, argv[0], cwd or "", *argv],
            stdin=r,
            stdout=fds[0],
            stderr=fds[1],
            env=env,
            cwd="/",  # the job's own directory is entered by the gate, as the job's user
            start_new_session=True,  # a Ctrl-C to the agent must not hit the jobs
            umask=0o022,
            **ids,
        )
    except BaseException:
        for fd in fds:
            os.close(fd)
        os.close(r)
        os.close(w)
        raise
    os.close(r)
    for fd in fds:
        os.close(fd)
    try:
        driver.add_pid(cgroup, proc.pid)
        _lower_policy(proc.pid)
        os.write(w, b"go\n")
    except BaseException:
        os.close(w)  # the gate's read fails -> exit 127 without running the job
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        raise
    os.close(w)
    return proc


def _lower_policy(pid: int) -> None:
    # The agent may run SCHED_FIFO or a short slice; jobs must not (SCHED_RESET_ON_FORK covers
    # this too, this is belt and braces for agents started without it).
    try:
        if os.sched_getscheduler(pid) != os.SCHED_OTHER:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except OSError as e:
        log.warning("could not reset scheduling policy of pid %d: %s", pid, e)


def kill_job(driver: CgroupDriver, job: Job) -> None:
    if job.ended:
        return
    try:
        driver.kill_all(job.cgroup)
    except (CgroupError, OSError) as e:
        log.warning("kill of job %s via cgroup failed (%s); signalling pids", job.job_id, e)
        for pid in job.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
