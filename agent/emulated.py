"""Many emulated agents in one process, for driving a controller at 16 to 1,024 nodes.

Each endpoint is a real :class:`agent.daemon.Agent` — the same wire protocol, HMAC
sessions, quantum and time-triggered plan handling, acks, fail-safe and events — so
the controller cannot tell it from a node's agent. What an emulated agent skips
(docs/scale.md):

* **No processes.** A launch creates the job's group and records the ranks, but
  starts nothing: the job runs until it is killed (a kill ends its fake ranks at once,
  exit status -9, and the agent reports the exit like any other). CPU accounting
  reads 0.
* **No kernel.** Each agent has its own small :mod:`common.cgroups.fake` tree (files in
  a temporary directory that play the kernel's freezer, weights and accounting), so a
  freeze or thaw costs a file write and read, not a kernel switch.
* **No metrics endpoint, no SCHED_FIFO, no local scheduler loop**: the controller's
  own exporter works at any size; 1,024 HTTP servers would only cost memory.
* **One thread**: every agent's sockets are in one selector; the loop hands each
  ready socket to its agent, then fires any due time-triggered plan and polls every
  agent's fail-safe, as each agent's own loop would.

    python -m agent.emulated --nodes 256 --base-port 17000 --key-file KEY [--state FILE]

``--state FILE`` writes a cluster state file (the local cluster's format, read by
``python -m controller --cluster-state``) listing the endpoints as nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import selectors
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from agent.daemon import Agent, AgentConfig
from agent.failsafe import Transition
from agent.jobs import Job, job_cgroup
from agent.server import AgentConn
from common.cgroups import Cgroups, Layout
from common.cgroups.fake import FakeCgroupFS, fake_v1
from common.errors import CoschedError, UsageError
from common.keys import read_key

log = logging.getLogger(__name__)

#: File descriptors per emulated node: its listener, one controller connection, spare.
FDS_PER_NODE = 3
#: Measured resident memory per emulated node here (docs/scale.md), with margin.
BYTES_PER_NODE = 400_000
SWEEP_S = 0.01  # every agent's fail-safe is polled this often (its timeout is seconds)
FAKE_PID_BASE = 4_000_000  # above any real pid (pid_max is at most 2^22)


class EmulationError(UsageError):
    """An emulated cluster this host cannot hold."""


def capacity(nodes: int) -> None:
    """Refuse, before anything starts, more nodes than the host's limits allow."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = nodes * FDS_PER_NODE + 64
    if hard != resource.RLIM_INFINITY and need > hard:
        most = max(0, (hard - 64) // FDS_PER_NODE)
        raise EmulationError(
            f"{nodes} emulated nodes need {need} open files; this host allows {hard}"
            f" (RLIMIT_NOFILE), so at most {most} nodes",
            fix=f"raise the hard limit (ulimit -Hn {need}) or ask for at most {most} nodes",
        )
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return
    if nodes * BYTES_PER_NODE * 2 > avail:  # both sides: agents and controller
        most = avail // (BYTES_PER_NODE * 2)
        raise EmulationError(
            f"{nodes} emulated nodes need about {nodes * BYTES_PER_NODE * 2 >> 20} MiB;"
            f" {avail >> 20} MiB are free, so at most {most} nodes",
            fix=f"ask for at most {most} nodes",
        )


def raise_fd_limit(nodes: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = nodes * FDS_PER_NODE + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


class EmulatedDriver(Cgroups):
    """The v1 driver over a fake tree whose "processes" are fake pids.

    A kill makes the job's fake pids leave the tree at once: the real driver would
    signal them (they are above any real pid, so that fails harmlessly) and then wait
    up to 2 s for the group to empty, which a fake group never does; a relay gives
    each agent 2 s to answer, so every kill cost an agent its connection.
    """

    def kill_all(self, path: str) -> None:
        fs = self.fs
        assert isinstance(fs, FakeCgroupFS)
        for pid in self.pids(path):
            fs.exit_pid(pid)


class EmulatedAgent(Agent):
    """An agent whose jobs are groups without processes (module doc)."""

    def reap(self) -> None:
        # A job whose fake pids are gone (killed) has exited: status -9 for every rank.
        for job in list(self.jobs.values()):
            unended = not job.ended and len(job.exit_codes) < len(job.ranks)
            if unended and not self.driver.pids(job.cgroup):
                for rank in job.ranks:
                    job.exit_codes.setdefault(rank, -9)
        super().reap()

    def launch(
        self,
        jid: str,
        d: dict[str, Any],
        ranks: list[int],
        env_extra: dict[str, str],
        weight: int,
        frozen: bool,
    ) -> dict[str, Any]:
        cg = job_cgroup(self.parent, jid)
        self.driver.create(cg)
        self.driver.set_weight(cg, weight)
        job = Job(jid, cg, weight=weight, frozen=frozen, run_dir=self.cfg.run_dir)
        for rank in ranks:
            pid = FAKE_PID_BASE + len(self.jobs) * 64 + rank
            self.driver.add_pid(cg, pid)
            job.ranks[rank] = None
            job.pids[rank] = pid
        if frozen:
            self.driver.freeze(cg)
        with self.lock:
            self.jobs[jid] = job
        return {"job_id": jid, "pids": {str(r): p for r, p in job.pids.items()},
                "cgroup": cg, "frozen": frozen, "run_dir": str(self.cfg.run_dir)}  # fmt: skip


class EmulatedHost:
    """``nodes`` emulated agents on 127.0.0.1 ports ``base_port`` + i, one selector."""

    def __init__(self, nodes: int, base_port: int, key: bytes, failsafe_timeout: float = 2.0):
        capacity(nodes)
        raise_fd_limit(nodes)
        # tmpfs when there is one: the fake tree's file opens are most of an agent's
        # apply (0.47 vs 0.90 ms per apply on /dev/shm vs ext4 /tmp here)
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self._tmp = tempfile.TemporaryDirectory(prefix="cosched-emulated-", dir=shm)
        root = Path(self._tmp.name)
        self.sel = selectors.DefaultSelector()
        self.agents: list[EmulatedAgent] = []
        self.owner: dict[int, EmulatedAgent] = {}
        for i in range(nodes):
            # A tree per agent (14 files): in one shared tree every fake pid move scanned
            # every node's groups (O(N) per launch), and agents' equal fake pids collided.
            fs = fake_v1(root / f"cg{i}")
            fs.freezing_reads = 0  # a freeze is confirmed at once: no kernel to wait for
            drv = EmulatedDriver(
                Layout.v1_at(str(root / f"cg{i}")), fs=fs, freeze_timeout=0.5, poll_interval=1e-5
            )
            cfg = AgentConfig(
                node=f"n{i}",
                listen=("127.0.0.1", base_port + i),
                key=key,
                cgroup_parent=f"cosched/n{i}",
                run_dir=root / "run" / f"n{i}",
                fifo_priority=0,
                leaf_weight=0,  # one process for all: no scheduling change
                failsafe_timeout=failsafe_timeout,
                io_device=False,  # no processes to do I/O (and two threads per node)
                net_meter=False,  # its jobs' pids are made up
            )
            a = EmulatedAgent(cfg, driver=drv, sel=self.sel)
            self.agents.append(a)
        self.by_node = {a.cfg.node: a for a in self.agents}
        self.stopping = False
        self._planned: set[EmulatedAgent] = set()  # agents holding a time-triggered plan
        self._next_sweep = 0.0

    def start(self) -> None:
        for a in self.agents:
            a.start()
            assert a.server.listener is not None
            self.owner[a.server.listener.fileno()] = a

    def nodes_state(self) -> dict[str, Any]:
        """The local cluster's state-file shape (testbed/cluster/state.py), enough for
        ``controller.daemon.nodes_from_cluster``."""
        return {
            "emulated": {"relays": []},  # the state file's table; no relays here
            "nodes": [
                {"name": a.cfg.node, "ctl_ip": a.cfg.listen[0], "agent_port": a.cfg.listen[1],
                 "cpus": "0"}
                for a in self.agents
            ],
        }  # fmt: skip

    def _owner_of(self, key: selectors.SelectorKey) -> EmulatedAgent | None:
        """The agent a ready socket belongs to: a connection names its agent; a listener
        is known by its descriptor. (Not a descriptor -> agent cache: descriptors of
        closed connections are reused by new ones to other agents.)"""
        if isinstance(key.data, AgentConn):
            return self.by_node.get(key.data.session.sender.removeprefix("agent:"))
        return self.owner.get(key.fd)

    def step(self, timeout: float = 0.005) -> None:
        """One turn: dispatch ready sockets, fire due plans, poll fail-safes.

        Only the agents that got frames or hold a plan are visited on every turn;
        the full sweep (every agent's fail-safe) runs every ``SWEEP_S``: visiting all
        1,024 agents per event made a quantum cost O(N^2) here.
        """
        now = time.time()
        wake = min((a.plans.wake_in(now) for a in self._planned), default=timeout)
        ready = self.sel.select(max(0.0, min(timeout, wake)))
        touched: set[EmulatedAgent] = set()
        for key, mask in ready:
            a = self._owner_of(key)
            if a is not None:
                a.server.ready(key.data, mask)
                touched.add(a)
            else:
                # a connection that closed meanwhile: nobody owns it any more
                with contextlib.suppress(KeyError, ValueError):
                    self.sel.unregister(key.fileobj)
        for a in touched | self._planned:
            a._fire_due_plan()
        self._planned = {a for a in touched | self._planned if a.plans.pending is not None}
        mono = time.monotonic()
        if mono >= self._next_sweep:
            self._next_sweep = mono + SWEEP_S
            for a in self.agents:
                if a.failsafe.poll() is Transition.ACTIVATE:
                    a._activate_failsafe()

    def run(self) -> None:
        while not self.stopping:
            self.step()

    def close(self) -> None:
        for a in self.agents:
            with contextlib.suppress(Exception):
                a.server.close()
        self.sel.close()
        self._tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m agent.emulated",
        description="Run N emulated agents in one process (real agent code, no processes, a "
        "fake cgroup tree), listening on 127.0.0.1:BASE_PORT+i, for a controller to drive at "
        "scale (docs/scale.md).",
    )
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--base-port", type=int, default=17000)
    ap.add_argument("--key-file", required=True, help="the controller-agent key (mode 0600)")
    ap.add_argument("--state", default=None, help="write a cluster state file listing the nodes")
    ap.add_argument("--failsafe-timeout", type=float, default=2.0)
    ap.add_argument("--log-level", default="WARNING")
    args = ap.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s emulated: %(message)s")  # fmt: skip
    try:
        if args.nodes < 1:
            raise EmulationError(f"--nodes {args.nodes}", fix="give at least 1 node")
        host = EmulatedHost(args.nodes, args.base_port, read_key(args.key_file),
                            args.failsafe_timeout)  # fmt: skip
        host.start()
    except CoschedError as e:
        print(f"emulated: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"emulated: cannot listen on ports {args.base_port}..: {e.strerror}"
              " — choose another --base-port", file=sys.stderr)  # fmt: skip
        return 1

    def on_term(signum: int, frame: FrameType | None) -> None:
        host.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if args.state:
        Path(args.state).write_text(json.dumps(host.nodes_state()))
    print(f"emulated: {args.nodes} agents on 127.0.0.1:{args.base_port}.."
          f"{args.base_port + args.nodes - 1}", flush=True)  # fmt: skip
    try:
        host.run()
    finally:
        host.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
