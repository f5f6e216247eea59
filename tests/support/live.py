"""A real local cluster with a real controller process (root): bring it up, start the
controller, talk to it, and sample the freezer states for two jobs THAWED at once; or
one cluster a module's tests share, each test with a controller of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SPIN = ["python3", "-c", "while True: pass"]


# Compute-bound with a short "barrier" wait each 15 ms: just under 100 % CPU,
# like Wiseman & Feitelson's compute-bound jobs, so paired gang may pair it.
COMPUTE = [
    "python3",
    "-c",
    "import time\nwhile True:\n t=time.perf_counter()\n while time.perf_counter()-t<0.015: pass\n"
    " time.sleep(0.002)",
]


# I/O-bound: a small write + fsync, then waiting for the "device" (a sleep, so
# the job stays I/O-bound even where /tmp is tmpfs and fsync costs nothing).
IO = [
    "python3",
    "-c",
    "import os,tempfile,time\nd=tempfile.mkdtemp()\ni=0\nwhile True:\n"
    " p=os.path.join(d,str(i%8)); f=open(p,'wb'); f.write(b'x'*8192); f.flush();"
    " os.fsync(f.fileno()); f.close(); i+=1; time.sleep(0.01)",
]


class Live:
    """A cluster plus a controller subprocess, with a client."""

    def __init__(self, state_dir: Path, tmp: Path) -> None:
        self.state_dir = state_dir
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.key: bytes = b""
        self.tcp_port = 0
        self.log = tmp / "controller.log"

    def up(
        self,
        cpus_per_node: float | None = 1,
        cgroup: str = "auto",
        link: str = "gige",
        switch: str = "freezer",
    ) -> None:
        from agent.__main__ import read_key
        from testbed.cluster import cluster as cluster_mod
        from testbed.cluster.profiles import parse_profile

        self.env = cluster_mod.Env(state_dir=str(self.state_dir))
        self.st = cluster_mod.up(
            cluster_mod.ClusterConfig(
                nodes=2,
                profile=parse_profile(link),
                cpus_per_node=cpus_per_node,
                cgroup=cgroup,
                switch=switch,
            ),
            self.env,
        )
        assert self.st.key_file is not None
        self.key = read_key(self.st.key_file)

    def start(self, policy: str, *extra: str, quantum: float = 0.05) -> None:
        from common.ports import free_port

        if not self.tcp_port:
            self.tcp_port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "controller",
            "--policy",
            policy,
            "--quantum",
            str(quantum),
            "--cluster-state",
            str(self.state_dir / "cluster.json"),
            "--run-dir",
            str(self.tmp),
            "--checkpoint",
            str(self.tmp / "ck.json"),
            "--listen-tcp",
            f"127.0.0.1:{self.tcp_port}",
            *extra,
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        self._wait_serving()

    def _wait_serving(self, limit: float = 20.0) -> None:
        """Until the controller answers ``status``, ``limit`` seconds at most; at once
        when its process has exited (a refused start is known then, not 20 s later)."""
        from controller.client import ControllerError, ControllerUnavailable

        assert self.proc is not None
        deadline = time.monotonic() + limit
        while True:
            try:
                with self.client(retry=0.5) as c:
                    c.request("status")
                return
            except ControllerUnavailable:
                rc = self.proc.poll()
                if rc is not None:
                    raise ControllerError(
                        f"the controller exited ({rc}) before it served: {self.log_text()[-1000:]}"
                    ) from None
                if time.monotonic() > deadline:
                    raise

    def client(self, retry: float = 20.0) -> Any:
        from controller.client import ControllerClient

        return ControllerClient(str(self.tmp / "controller.sock"), retry=retry)

    def req(self, op: str, **args: Any) -> Any:
        with self.client() as c:
            return c.request(op, **args)

    def wait_exit(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.proc = None

    def down(self) -> None:
        from testbed.cluster import cluster as cluster_mod

        cluster_mod.down(self.env)

    def freezer_states(self) -> dict[tuple[str, str], str]:
        """(node, job group) -> FROZEN/THAWED, v1 or cgroup2 (tests/support/host.py)."""
        from tests.support.host import freezer_states

        out = {}
        for rel, state in freezer_states("cosched/n*/job-*").items():
            parts = rel.split("/")
            out[(parts[-2], parts[-1])] = state
        return out

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def count_violations(live: Live, seconds: float, min_samples: int = 0) -> tuple[int, int]:
    """Samples (>= 2 ms apart) where a node shows two jobs THAWED in two consecutive ones.

    Samples for ``seconds``, and on a busy host that starves the sampler longer, until
    ``min_samples`` are taken (at most four times ``seconds``): the check's strength is
    its sample count, which a fixed duration does not give on a loaded machine."""
    prev: dict[str, set[str]] = {}
    violations = samples = 0
    start = time.monotonic()
    end, limit = start + seconds, start + 4 * seconds
    last = 0.0
    while (now := time.monotonic()) < end or (samples < min_samples and now < limit):
        now = time.monotonic()
        if now - last < 0.002:
            time.sleep(0.002 - (now - last))
            continue
        last = now
        thawed: dict[str, set[str]] = {}
        for (node, job), state in live.freezer_states().items():
            if state == "THAWED":
                thawed.setdefault(node, set()).add(job)
        for node, jobs in thawed.items():
            if len(jobs) > 1 and len(prev.get(node, set()) & jobs) > 1:
                violations += 1
        prev = thawed
        samples += 1
    return violations, samples


class WakeStalls:
    """A reference measured alongside a live test: a thread of the test process
    (SCHED_OTHER, like an unprivileged daemon) sleeps ``period`` at a time and counts
    the wake-ups more than ``late`` seconds late, i.e. how often this host stalled a
    process for longer than a plan's lead while the test ran."""

    def __init__(self, period: float, late: float) -> None:
        self.period, self.late = period, late
        self.stalls = 0
        self.wakeups = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        due = time.monotonic() + self.period
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            now = time.monotonic()
            self.wakeups += 1
            self.stalls += now - due > self.late
            due = max(due + self.period, now)

    def __enter__(self) -> WakeStalls:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def running(
    state: Path, tmp: Path, *, up: bool = True, cores: int = 0, **up_kw: Any
) -> Iterator[Live]:
    """A :class:`Live` cluster for a test's fixture: brought up (unless ``up`` is False,
    for tests that bring it up themselves), stopped and torn down however the test ends.
    Skips when the host has fewer than ``cores`` cores (one per node)."""
    if cores and len(os.sched_getaffinity(0)) < cores:
        pytest.skip(f"needs {cores} cores: one per node")
    lv = Live(state, tmp)
    try:
        if up:
            lv.up(**up_kw)
        yield lv
    finally:
        lv.stop()
        with contextlib.suppress(Exception):
            lv.down()


@contextlib.contextmanager
def shared_cluster(tmp_path_factory: pytest.TempPathFactory, **up_kw: Any) -> Iterator[Live]:
    """A cluster for a module-scoped fixture: up once for the module's tests, each of
    which runs its own controller on it (:func:`own_controller`), as an operator
    restarts the controller on long-lived agents. Skips where ``root_cluster_env``
    would; afterwards ``clean`` finds nothing to do and nothing of cosched is left."""
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod
    from tests.support.host import EMPTY_FOOTPRINT, cluster_skip_reason, cosched_footprint

    reason = cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    if cosched_footprint() != EMPTY_FOOTPRINT:
        pytest.skip(f"host already has cosched objects: {cosched_footprint()}")
    tmp = tmp_path_factory.mktemp("cluster")
    state = tmp / "state"
    try:
        with running(state, tmp, **up_kw) as lv:
            yield lv
    finally:
        rep = clean_mod.clean(cluster_mod.Env(state_dir=str(state)))
        assert not rep.problems, rep.format()
        assert cosched_footprint() == EMPTY_FOOTPRINT


ENDED = ("done", "failed", "killed")


@contextlib.contextmanager
def own_controller(cluster: Live, tmp: Path) -> Iterator[Live]:
    """One test's :class:`Live` on a :func:`shared_cluster`: its own controller (run
    directory, log and checkpoint under ``tmp``; job ids from 1). Afterwards its jobs
    that have not ended are killed and waited for (a failed test leaves the next one
    no job) and the controller is stopped; the cluster stays up."""
    lv = Live(cluster.state_dir, tmp)
    lv.env, lv.st, lv.key = cluster.env, cluster.st, cluster.key
    try:
        yield lv
    finally:
        if lv.proc is not None and lv.proc.poll() is None:
            with contextlib.suppress(Exception):
                left = [j["job_id"] for j in lv.req("jobs", all=True) if j["state"] not in ENDED]
                for job_id in left:
                    lv.req("kill", job_id=job_id)
                deadline = time.monotonic() + 20
                while left and time.monotonic() < deadline:
                    time.sleep(0.1)
                    recs = {j["job_id"]: j["state"] for j in lv.req("jobs", all=True)}
                    left = [j for j in left if recs.get(j) not in ENDED]
        lv.stop()
