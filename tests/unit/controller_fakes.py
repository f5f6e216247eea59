"""A fake agent pool for controller unit tests: records commands, scripts CPU use."""

from __future__ import annotations

from typing import Any

from controller.nodes import NodeInfo, QuantumResult


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
        self.busy: dict[str, float] = {}  # job id -> fraction of the node it uses when thawed
        self.skew_ns = 0
        self.runnable: dict[str, dict[str, int]] = {}  # node -> last command
        self.live: dict[str, set[str]] = {n.name: set() for n in self.nodes}
        self._events: list[dict[str, Any]] = []
        self.fail_launch_on: str | None = None
        self.up = {n.name: True for n in self.nodes}

    def connected(self) -> dict[str, bool]:
        return dict(self.up)

    def quantum(self, q: int, commands: dict[str, dict[str, int]]) -> dict[str, QuantumResult]:
        self.commands.append({k: dict(v) for k, v in commands.items()})
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
            out[node] = QuantumResult(
                node,
                {
                    "q": q,
                    "node": node,
                    "cpu_ns": cpu,
                    "applied_monotonic_ns": self.t_ns + i * self.skew_ns,
                    "errors": {},
                },
            )
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
    ) -> dict[str, Any]:
        if self.fail_launch_on == node:
            raise ConnectionError(f"agent {node} is not connected")
        self.launched.append(
            {"node": node, "job_id": job_id, "rank": rank, "env": env, "start_frozen": start_frozen}
        )
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
        return {"node": node, "jobs": [{"job_id": j, "state": "running"} for j in self.live[node]]}

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
