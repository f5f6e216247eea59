"""A fake agent pool for controller unit tests: records commands, scripts CPU use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.client import AgentError
from controller.nodes import NodeInfo, OnConnect, QuantumResult
from controller.scheduler import Scheduler


class FakePool:
    """Agents in memory: every runnable job uses ``busy[job]`` of the quantum."""

    def __init__(self, n: int = 2, capacity: float = 1.0, quantum_ns: int = 100_000_000) -> None:
        self.nodes = [
            NodeInfo(f"n{i}", ("127.0.0.1", 7070 + i), f"10.0.0.{i + 1}", capacity)
            for i in range(n)
        ]
        self.capacity = capacity
        self.quantum_ns = quantum_ns
        self.t_ns = 1_000_000_000
        self.launched: list[dict[str, Any]] = []
        self.killed: list[tuple[str, str]] = []
        self.commands: list[dict[str, dict[str, int]]] = []
        self.ats: list[float | None] = []  # each quantum's instant (time-triggered) or None
        # each quantum's devices to measure (None: all), honoured as agents do (agent/daemon.py)
        self.measures: list[list[str] | None] = []
        self.lateness_s = 0.0  # what a time-triggered ack reports
        self.late = False  # ... and whether its instant had passed on arrival
        self.busy: dict[str, float] = {}  # job id -> fraction of the node it uses when thawed
        # job id -> block I/O bytes per second it moves when thawed (None: no io_bytes in acks)
        self.disk_bps: dict[str, float] | None = None
        self.net_bps: dict[str, float] | None = None  # the same for TCP bytes (net_bytes)
        self.skew_ns = 0
        self.runnable: dict[str, dict[str, int]] = {}  # node -> last command
        self.live: dict[str, set[str]] = {n.name: set() for n in self.nodes}
        self._events: list[dict[str, Any]] = []
        self.fail_launch_on: str | None = None
        self.up = {n.name: True for n in self.nodes}
        self.on_connect: OnConnect | None = None
        self.local_requests: list[dict[str, Any]] = []  # every local_policy sent
        self.refuse_local: str | None = None  # an agent error code to answer local_policy with
        self.cdc_status: dict[str, dict[str, Any]] = {}  # node -> the status' "cdc" block
        self.pids = {n.name: 4000 + i for i, n in enumerate(self.nodes)}

    def connected(self) -> dict[str, bool]:
        return dict(self.up)

    def quantum(
        self,
        q: int,
        commands: dict[str, dict[str, int]],
        at: float | None = None,
        *,
        measure: Sequence[str] | None = None,
    ) -> dict[str, QuantumResult]:
        self.commands.append({k: dict(v) for k, v in commands.items()})
        self.ats.append(at)
        self.measures.append(None if measure is None else list(measure))
        self.t_ns += self.quantum_ns
        out = {}
        for i, (node, jobs) in enumerate(commands.items()):
            prev = self.runnable.get(node, {})
            cpu = {
                j: int(self.busy.get(j, 1.0) * self.quantum_ns * self.capacity / max(1, len(prev)))
                for j in prev
                if j in self.live[node]
            }
            for j in self.live[node]:
                cpu.setdefault(j, 0)
            self.runnable[node] = dict(jobs)
            io = None
            if self.disk_bps is not None and (measure is None or "disk" in measure):
                io = {j: [0, int(self.disk_bps.get(j, 0.0) * self.quantum_ns / 1e9)] for j in cpu}
            ack: dict[str, Any] = {
                "q": q,
                "node": node,
                "cpu_ns": cpu,
                "applied_monotonic_ns": self.t_ns + i * self.skew_ns,
                "thawed_realtime_ns": self.t_ns + i * self.skew_ns,
                "freeze_confirm_s": 0.0002,
                "errors": {},
            }
            if io is not None:
                ack["io_bytes"] = io
            if self.net_bps is not None and (measure is None or "net" in measure):
                ack["net_bytes"] = {
                    j: [int(self.net_bps.get(j, 0.0) * self.quantum_ns / 1e9), 0] for j in cpu
                }
            if at is not None:
                ack.update(
                    mode="time-triggered",
                    at=at,
                    late=self.late,
                    lateness_s=self.lateness_s,
                )
            out[node] = QuantumResult(node, ack)
        return out

    def launch(
        self,
        node: str,
        job_id: str,
        argv: list[str],
        *,
        rank: int,
        size: int,
        env: dict[str, str],
        start_frozen: bool,
        cwd: str | None,
        user: str | None = None,
    ) -> dict[str, Any]:
        if self.fail_launch_on == node:
            raise ConnectionError(f"agent {node} is not connected")
        self.launched.append(
            {"node": node, "job_id": job_id, "rank": rank, "env": env,
             "start_frozen": start_frozen, "user": user}
        )  # fmt: skip
        self.live[node].add(job_id)
        return {
            "job_id": job_id,
            "pids": {str(rank): 1000 + rank},
            "run_dir": f"/tmp/{node}/job-{job_id}",
        }

    def kill(self, node: str, job_id: str) -> dict[str, Any]:
        self.killed.append((node, job_id))
        if job_id in self.live[node]:
            self.live[node].discard(job_id)
            self._events.append(
                {"node": node, "job_id": job_id, "event": "exit", "exit_code": -9, "exit_codes": {}}
            )
        return {"job_id": job_id, "ended": True}

    def status(self, node: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {
            "node": node,
            "jobs": [{"job_id": j, "state": "running"} for j in self.live[node]],
        }
        if node in self.cdc_status:
            out["cdc"] = self.cdc_status[node]
        return out

    def local_policy(self, node: str, data: dict[str, Any]) -> dict[str, Any]:
        self.local_requests.append(dict(data))
        if not self.up[node]:
            raise ConnectionError(f"agent {node} is not connected")
        if self.refuse_local is not None:
            raise AgentError(self.refuse_local, f"unknown message type {'local_policy'!r}")
        self.cdc_status[node] = {"scheme": data["scheme"], "mpl": data["mpl"]}
        return {"scheme": data["scheme"], "cost_switch_us": 3.0, "erl_us": 0.0}

    def agent_info(self, node: str) -> dict[str, Any]:
        return {"node": node, "pid": self.pids[node]} if self.up[node] else {}

    def reconnect(self, node: str, restarted: bool = False) -> None:
        """The agent on ``node`` comes back (as another process if ``restarted``)."""
        if restarted:
            self.pids[node] += 100
            self.cdc_status.pop(node, None)
        self.up[node] = True
        if self.on_connect is not None:
            self.on_connect(node, self.agent_info(node))

    def exit(self, job_id: int, code: int = 0, nodes: list[str] | None = None) -> None:
        for node in nodes or [n.name for n in self.nodes]:
            if str(job_id) in self.live[node]:
                self.live[node].discard(str(job_id))
                self._events.append(
                    {
                        "node": node,
                        "job_id": str(job_id),
                        "event": "exit",
                        "exit_code": code,
                        "exit_codes": {},
                    }
                )

    def events(self) -> list[dict[str, Any]]:
        out, self._events = self._events, []
        return out

    def maintain(self) -> None:
        pass

    def running_on(self, node: str) -> set[int]:
        return {int(j) for j in self.runnable.get(node, {})}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def make(
    policy: str = "gang", n: int = 2, params: dict[str, object] | None = None, **kw: object
) -> tuple[Scheduler, FakePool, Clock]:
    pool = FakePool(n, **kw)  # type: ignore[arg-type]
    clock = Clock()
    s = Scheduler(policy, params or {}, pool, wall=clock, mono=clock)
    return s, pool, clock


def step(s: Scheduler, clock: Clock, n: int = 1, dt: float = 0.1) -> None:
    for _ in range(n):
        clock.t += dt
        s.tick()


BUSY = {"size": 2, "argv": ["python3", "-c", "pass"]}
