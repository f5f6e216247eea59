"""Starting, checking and stopping the per-node agents.

An agent runs inside its node's network namespace and inside the node's
cgroups (the leaf ``cosched/<node>/agent`` in every hierarchy: cgroup v2 puts
processes only in leaves), entered between fork and exec,
so the agent and everything it launches start confined to the node. PIDs are
recorded with their start time; we only ever signal a PID whose start time
still matches (PID reuse would otherwise make us kill a stranger). Agents
start isolated from the caller's directory and environment (common/daemons.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil

from common.daemons import DAEMON_CWD, daemon_env, python_argv
from common.names import AGENT_PORT, METRICS_PORT
from common.private import append_private

from .netns import NetnsEnterer
from .state import AgentRecord

START_GRACE_S = 0.5
STOP_POLL_S = 0.02


def agent_command(
    node: str,
    ctl_ip: str,
    key_file: str,
    cgroup_parent: str,
    python: str = sys.executable,
    listen_port: int = AGENT_PORT,
    metrics_port: int = METRICS_PORT,
    cgroup_version: str = "auto",
    switch: str = "freezer",
    decision_interval_ms: float | None = None,
) -> list[str]:
    """The command line that starts one node's agent. The single place to adjust flags."""
    extra = (
        []
        if decision_interval_ms is None
        else ["--decision-interval-ms", f"{decision_interval_ms:g}"]
    )
    return python_argv(
        "agent",
        "--node",
        node,
        "--listen",
        f"{ctl_ip}:{listen_port}",
        "--metrics",
        f"{ctl_ip}:{metrics_port}",
        "--key-file",
        os.path.abspath(key_file),  # the agent starts in /
        "--cgroup-parent",
        cgroup_parent,
        "--backend",
        cgroup_version,
        "--switch",
        switch,
        "--hostname",  # its own name: jobs (MPI's runtime) can tell the nodes apart
        node,
        *extra,
        python=python,
    )


def agent_available() -> bool:
    """True when ``python -m agent`` can run (the package has a ``__main__``)."""
    try:
        return importlib.util.find_spec("agent.__main__") is not None
    except (ImportError, ValueError):
        return False


def spawn_agent(
    node: str, netns: str, cmd: list[str], cgroup_procs: list[str], log_path: str
) -> AgentRecord:
    """Start ``cmd`` in ``netns`` and the given cgroups; :func:`await_agents` checks it
    is still there after its first moments."""
    enter = NetnsEnterer(netns, [(p, "") for p in cgroup_procs])
    try:
        with append_private(log_path) as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=enter,
                start_new_session=True,  # survives the CLI's terminal going away
                close_fds=True,
                cwd=DAEMON_CWD,  # never import from the caller's directory
                env=daemon_env(),
            )
    finally:
        enter.close()
    start = psutil.Process(proc.pid).create_time()
    return AgentRecord(node=node, pid=proc.pid, start_time=start, cmd=cmd, log=log_path)


def await_agents(recs: list[AgentRecord], grace_s: float = START_GRACE_S) -> None:
    """Fail if any agent died in its first ``grace_s`` (a bad key, a port in use).

    One grace for all of them: the agents start side by side, so a cluster of N nodes
    waits one grace rather than N (2 nodes came up 0.5 s sooner).
    """
    time.sleep(grace_s)
    for rec in recs:
        if not same_process(rec.pid, rec.start_time):
            how = "exited"
            with contextlib.suppress(ChildProcessError, OSError):
                pid, status = os.waitpid(rec.pid, os.WNOHANG)  # our child: reap it
                if pid:
                    how = f"exited with status {os.waitstatus_to_exitcode(status)}"
            raise RuntimeError(f"agent for {rec.node} {how}; see {rec.log}:\n" + log_tail(rec.log))


def start_agent(
    node: str,
    netns: str,
    cmd: list[str],
    cgroup_procs: list[str],
    log_path: str,
    grace_s: float = START_GRACE_S,
) -> AgentRecord:
    """One agent: :func:`spawn_agent`, then :func:`await_agents` on it."""
    rec = spawn_agent(node, netns, cmd, cgroup_procs, log_path)
    await_agents([rec], grace_s)
    return rec


def log_tail(path: str, nbytes: int = 2000) -> str:
    """The last ``nbytes`` of a log file ("" if unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - nbytes))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def same_process(pid: int, start_time: float) -> bool:
    """True if ``pid`` is still the process we started (start time matches)."""
    try:
        p = psutil.Process(pid)
        return bool(abs(p.create_time() - start_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_agent(rec: AgentRecord, timeout_s: float = 3.0) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``. Returns True if it was running."""
    return bool(stop_agents([rec], timeout_s))


def stop_agents(recs: list[AgentRecord], timeout_s: float = 3.0) -> list[AgentRecord]:
    """SIGTERM every agent still running, wait for all of them together, SIGKILL those
    left after ``timeout_s``. Returns the ones that were running.

    Side by side, not one after another: each agent's exit (thaw its jobs, stop its
    servers) overlaps the others'.
    """
    running = [r for r in recs if same_process(r.pid, r.start_time)]
    for rec in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    left = list(running)
    while left and time.monotonic() < deadline:
        time.sleep(STOP_POLL_S)
        left = [r for r in left if same_process(r.pid, r.start_time)]
    for rec in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGKILL)
    # Reap our own children (``up`` rolling back); otherwise init reaps them.
    for rec in running:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(rec.pid, os.WNOHANG)
    return running


def probe_metrics(ip: str, port: int = METRICS_PORT, timeout_s: float = 1.0) -> str:
    """GET /metrics from the host over the control network: "ok", or why not."""
    url = f"http://{ip}:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return "ok" if resp.status == 200 else f"HTTP {resp.status}"
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return f"no answer ({reason})"
