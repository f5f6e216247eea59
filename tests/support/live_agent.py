"""A real agent process on this host's cgroups (root), started and stopped by a fixture
that kills its jobs and removes every group it made, however the test ends."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.client import AgentClient
from common.cgroups import Cgroups, V1Driver, V2Driver
from common.ports import free_port
from tests.support.host import cgroup_mounts

REPO = Path(__file__).resolve().parents[2]


BUSY = [sys.executable, "-c", "while True: pass"]


BUSY_ON_CPU1 = [sys.executable, "-c", "import os\nos.sched_setaffinity(0, {1})\nwhile True: pass"]


_V1, UNIFIED = cgroup_mounts()
needs_v1 = pytest.mark.skipif(
    os.geteuid() != 0 or not {"freezer", "cpu", "cpuacct"} <= set(_V1),
    reason="needs the cgroup v1 hierarchies (freezer, cpu, cpuacct) and root",
)


# The backend a test agent uses by default: v1 where its freezer, cpu and cpuacct
# hierarchies are mounted (this machine kind as it is), else cgroup2 (a v2-only host,
# as real nodes are, and CI's v2-only stage), as `cluster up --cgroup auto` picks.
HOST_BACKEND = (
    "v1" if {"freezer", "cpu", "cpuacct"} <= set(_V1) else "v2" if UNIFIED is not None else None
)
needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or HOST_BACKEND is None,
    reason="needs root and cgroups: the v1 freezer, cpu and cpuacct, or a cgroup2 mount",
)


needs_v2 = pytest.mark.skipif(
    os.geteuid() != 0 or UNIFIED is None,
    reason="needs root and a cgroup2 mount",
)


def remove_tree(drv: Cgroups, parent: str) -> None:
    """Kill and remove every job group under parent, then parent and empty ancestors."""
    for name in drv.children(parent):
        cg = f"{parent}/{name}"
        with contextlib.suppress(Exception):
            drv.kill_all(cg)
        for _ in range(200):
            try:
                drv.remove(cg)
                break
            except Exception:
                time.sleep(0.02)
    comps = parent.split("/")
    for i in range(len(comps), 0, -1):
        with contextlib.suppress(Exception):
            drv.remove("/".join(comps[:i]))


@dataclass
class LiveAgent:
    node: str
    addr: tuple[str, int]
    metrics: tuple[str, int]
    key: bytes
    parent: str
    proc: subprocess.Popen[bytes]
    log: Path
    start: Callable[[], subprocess.Popen[bytes]]
    driver: Cgroups

    def client(self, timeout: float = 5.0) -> AgentClient:
        c = AgentClient(self.addr, self.key, timeout=timeout)
        c.connect()
        return c

    def usage(self, job: str) -> int:
        return self.driver.cpu_usage_ns(f"{self.parent}/job-{job}")

    def metric(self, name: str) -> float | None:
        host, port = self.metrics
        text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None


def _start_agent(
    node: str,
    port: int,
    mport: int,
    keyfile: Path,
    parent: str,
    run: Path,
    log: Path,
    fst: float,
    extra: list[str],
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "agent", "--node", node,
        "--listen", f"127.0.0.1:{port}", "--metrics", f"127.0.0.1:{mport}",
        "--key-file", str(keyfile), "--cgroup-parent", parent, "--run-dir", str(run),
        "--failsafe-timeout", str(fst), *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agent exited: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("agent did not start listening")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[Callable[..., LiveAgent]]:
    made: list[LiveAgent] = []

    def make(
        failsafe: float = 5.0, backend: str | None = None, switch: str = "freezer"
    ) -> LiveAgent:
        backend = backend or HOST_BACKEND
        node = f"it{len(made)}"
        parent = f"cosched/itest-{os.getpid()}-{secrets.token_hex(3)}"
        key = secrets.token_hex(32).encode()
        keyfile = tmp_path / f"{node}.key"
        keyfile.write_bytes(key)
        keyfile.chmod(0o600)  # the agent refuses a key others can read
        port, mport = free_port(), free_port()
        log = tmp_path / f"{node}.log"
        run = tmp_path / f"{node}-run"

        def start() -> subprocess.Popen[bytes]:
            return _start_agent(node, port, mport, keyfile, parent, run, log, failsafe, extra)

        if backend == "v2":
            assert UNIFIED is not None
            extra = ["--backend", "v2", "--cgroup-root", UNIFIED]
            drv: Cgroups = V2Driver(UNIFIED)
        else:
            extra, drv = ["--backend", "v1"], V1Driver()
        extra += ["--switch", switch]
        a = LiveAgent(
            node, ("127.0.0.1", port), ("127.0.0.1", mport), key, parent, start(), log, start, drv
        )
        made.append(a)
        return a

    try:
        yield make
    finally:
        for a in made:
            _stop(a.proc)
            remove_tree(a.driver, a.parent)
