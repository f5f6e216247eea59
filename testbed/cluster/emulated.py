"""An emulated cluster: hundreds of agents without namespaces (issue 15; docs/scale.md).

``cosched cluster up --emulated-nodes N`` starts ``python -m agent.emulated`` (N real
agents in one process over a fake cgroup tree, no job processes) on
127.0.0.1:BASE..BASE+N-1 and, with ``--relays``, relay processes
(controller/relay.py) in front of them, and records it all in the ordinary state
file: the nodes with their own ``agent_port``, the processes as agent records (so
``cosched cluster down`` and ``cosched clean`` stop them by recorded PID), and the
relays under ``emulated.relays`` (the controller then uses controller/relaypool.py).
A scheduler can then be tried against a large cluster on a laptop with the usual
commands (``cosched controller start``, ``gangster``, ``cosched matrix``).

What the emulated agents skip is in agent/emulated.py: jobs start no processes and
run until killed, and CPU use reads 0.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from agent.emulated import EmulationError, capacity
from common.daemons import DAEMON_CWD, daemon_env, python_argv
from common.private import append_private
from testbed.cluster import agents as agent_mod
from testbed.cluster import state as state_mod
from testbed.cluster.cluster import Env, describe_existing, teardown
from testbed.cluster.errors import ClusterError
from testbed.cluster.state import AgentRecord, ClusterState

DEFAULT_BASE_PORT = 17000
START_TIMEOUT_S = 120.0


def relay_count(spec: str, n: int) -> int:
    """``0`` none, ``auto`` about sqrt(N) (each relay and the controller then see about
    as many peers), or a number from 1 to N."""
    if spec == "auto":
        return max(2, round(math.sqrt(n))) if n >= 64 else 0
    try:
        r = int(spec)
    except ValueError:
        raise ClusterError(
            f"--relays {spec!r} is not a number", fix="give 0, auto or a relay count"
        ) from None
    if not 0 <= r <= n:
        raise ClusterError(f"--relays {r} for {n} nodes", fix=f"give 0..{n} or auto")
    return r


def up(n: int, relays: str = "auto", base_port: int = DEFAULT_BASE_PORT,
       env: Env | None = None) -> ClusterState:  # fmt: skip
    """Start the emulated agents (and relays); on failure stop what started and raise."""
    env = env or Env()
    existing = describe_existing(env)
    if existing:
        raise ClusterError(
            f"a cluster is already up ({'; '.join(existing)})",
            fix="`cosched cluster down` first",
        )
    if n < 1:
        raise ClusterError(f"--emulated-nodes {n}", fix="give at least 1 node")
    try:
        capacity(n)  # open files and memory, before anything starts
    except EmulationError as e:
        raise ClusterError(e.message, fix=e.fix) from None
    r = relay_count(relays, n)
    if base_port < 1024 or base_port + n + r + 1 > 65535:
        raise ClusterError(
            f"ports {base_port}..{base_port + n + r} do not fit",
            fix="give --base-port between 1024 and 65535 - nodes - relays",
        )
    sdir = env.sdir()
    os.makedirs(sdir, mode=0o700, exist_ok=True)
    st = ClusterState(status="creating")
    st.key_file = state_mod.write_key(sdir)
    nodes_file = os.path.join(sdir, "emulated-nodes.json")
    try:
        host_log = os.path.join(sdir, "emulated.log")
        st.agents.append(
            _start(
                "emulated",
                python_argv("agent.emulated", "--nodes", str(n), "--base-port",
                            str(base_port), "--key-file", os.path.abspath(st.key_file),
                            "--state", os.path.abspath(nodes_file)),
                host_log,
                ready=lambda: os.path.exists(nodes_file),
            )
        )  # fmt: skip
        with open(nodes_file) as f:
            st.nodes = json.load(f)["nodes"]
        per = math.ceil(n / r) if r else 0
        infos: list[dict[str, Any]] = []
        for i in range(r):
            names = [x["name"] for x in st.nodes[i * per : (i + 1) * per]]
            if not names:
                break
            port = base_port + n + 1 + i
            argv = python_argv("controller.relay", "--name", f"r{i}", "--listen",
                               f"127.0.0.1:{port}", "--state", os.path.abspath(nodes_file),
                               "--slice", f"{i * per}:{i * per + len(names)}", "--key-file",
                               os.path.abspath(st.key_file))  # fmt: skip
            log = os.path.join(sdir, f"relay-r{i}.log")
            st.agents.append(_start(f"relay:r{i}", argv, log, ready=_banner(log, f"relay r{i}:")))
            infos.append({"name": f"r{i}", "ctl_ip": "127.0.0.1", "port": port, "nodes": names})
        st.emulated = {
            "nodes": n,
            "base_port": base_port,
            "relays": infos,
            "nodes_file": nodes_file,
        }
        st.addresses = {"host_ctl_ip": "127.0.0.1"}
    except BaseException as err:
        problems = teardown(st, env)
        _unlink(nodes_file)
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        extra = f" (cleanup problems: {'; '.join(problems)})" if problems else ""
        raise ClusterError(f"emulated cluster up failed: {err}; rolled back{extra}") from err
    st.status = "up"
    state_mod.save(st, sdir)
    return st


def _banner(log: str, text: str) -> Any:
    def ready() -> bool:
        try:
            return text in Path(log).read_text(errors="replace")
        except OSError:
            return False

    return ready


def _start(name: str, argv: list[str], log: str, ready: Any) -> AgentRecord:
    with append_private(log) as f:
        # from /, isolated from the caller's directory and environment (common/daemons.py)
        proc = subprocess.Popen(argv, cwd=DAEMON_CWD, env=daemon_env(),
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)  # fmt: skip
    rec = AgentRecord(
        node=name, pid=proc.pid, start_time=psutil.Process(proc.pid).create_time(),
        cmd=argv, log=log,
    )  # fmt: skip
    end = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            tail = Path(log).read_text(errors="replace").strip().splitlines()[-1:]
            raise RuntimeError(f"{name} exited with status {proc.returncode}: "
                               f"{tail[0] if tail else 'no output'} (see {log})")  # fmt: skip
        if time.monotonic() > end:
            agent_mod.stop_agent(rec)
            raise RuntimeError(f"{name} did not start within {START_TIMEOUT_S:g} s (see {log})")
        time.sleep(0.05)
    return rec


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def status(st: ClusterState) -> dict[str, Any]:
    """The emulated cluster's processes as they are now."""
    procs = [
        {"name": a.node, "pid": a.pid, "alive": agent_mod.same_process(a.pid, a.start_time),
         "log": a.log}
        for a in st.agents
    ]  # fmt: skip
    em = st.emulated or {}
    return {
        "emulated": True,
        "status": st.status,
        "state_file": state_mod.state_path(),
        "key_file": st.key_file,
        "nodes": len(st.nodes),
        "ports": f"127.0.0.1:{em.get('base_port')}..{em.get('base_port', 0) + len(st.nodes) - 1}",
        "relays": [
            {k: r[k] for k in ("name", "port")} | {"nodes": len(r["nodes"])}
            for r in em.get("relays", [])
        ],
        "processes": procs,
    }


def format_status(report: dict[str, Any]) -> str:
    lines = [
        f"cluster: {report['status']}, emulated (state {report['state_file']})",
        f"  {report['nodes']} agents in one process on {report['ports']} "
        "(agent/emulated.py: no job processes, fake cgroups; docs/scale.md)",
    ]
    if report["relays"]:
        lines.append(
            f"  {len(report['relays'])} relays (controller/relay.py), "
            + ", ".join(f"{r['name']} :{r['port']} ({r['nodes']} nodes)" for r in report["relays"])
        )
    else:
        lines.append("  no relays: the controller talks to every agent")
    lines.append(f"shared key: {report['key_file']}")
    for p in report["processes"]:
        lines.append(f"  {p['name']}: pid {p['pid']} {'alive' if p['alive'] else 'DEAD'}"
                     f"  log {p['log']}")  # fmt: skip
    return "\n".join(lines)
