"""One quantum round: the plan as one command per node, the acks, the accounting.

The runnable set becomes a ``{job_id: weight}`` command per node, sent to every
agent before any ack is awaited (Wiseman & Feitelson 2003 §3.1, Fig. 5); the
acks' CPU times are charged to the jobs and turned into each job's utilization
(:func:`job_utilization`), which the scheduler feeds back to the policy
(§3.2). docs/controller.md has the normalisation, the skew figures and the
time-triggered mode.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.jobtable import JobTable
from controller.nodes import NodeInfo, Pool, QuantumResult
from controller.telemetry import Switches, command_skew_s

log = logging.getLogger("controller.quantum")

WARN_EVERY_S = 30.0  # a node that keeps failing is reported this often, with a count


def job_utilization(
    cpu_ns: Mapping[str, Mapping[int, int]],
    elapsed_ns: Mapping[str, int],
    capacity: Mapping[str, float],
    placement: Mapping[int, list[str]],
) -> dict[int, float]:
    """Utilization per job (docs/controller.md): CPU used / CPU the nodes offered.

    ``cpu_ns[node][job]`` is the job's CPU time on the node in the quantum,
    ``elapsed_ns[node]`` the quantum's length there. Jobs with a node lacking
    data are left out rather than under-reported.
    """
    out: dict[int, float] = {}
    for job, nodes in placement.items():
        used = 0
        offered = 0.0
        ok = bool(nodes)
        for n in nodes:
            if n not in elapsed_ns or job not in cpu_ns.get(n, {}) or elapsed_ns[n] <= 0:
                ok = False
                break
            used += cpu_ns[n][job]
            offered += elapsed_ns[n] * capacity.get(n, 1.0)
        if ok and offered > 0:
            out[job] = min(1.0, max(0.0, used / offered))
    return out


@dataclass
class RoundReport:
    """What one round brought back: per-job utilization (for the policy) and the figures."""

    q: int
    utilization: dict[int, float] = field(default_factory=dict)
    switches: Switches = field(default_factory=Switches)


class QuantumRound:
    """Quantum number, what ran in the previous quantum, and which nodes keep failing."""

    def __init__(
        self, pool: Pool, nodes: Sequence[NodeInfo], table: JobTable, mono: Callable[[], float]
    ) -> None:
        self.pool = pool
        self.names = [n.name for n in nodes]
        self.capacity = {n.name: n.capacity for n in nodes}
        self.table = table
        self.mono = mono
        self.q = 0
        self._prev_runnable: dict[int, list[str]] = {}  # job -> nodes, previous quantum
        self._prev_applied: dict[str, int] = {}
        self._failing: dict[str, tuple[int, float, str]] = {}  # node -> count, last log, error

    def run(
        self, runnable: dict[int, list[str]], weights: Mapping[int, int], at: float | None
    ) -> RoundReport:
        """Send the commands (applied at ``at``, CLOCK_REALTIME, or on arrival), account
        the acks, mark the jobs runnable or not."""
        commands: dict[str, dict[str, int]] = {n: {} for n in self.names}
        for jid, nodes in runnable.items():
            for n in nodes:
                commands[n][str(jid)] = weights.get(jid, 100)
        self.q += 1
        results = self.pool.quantum(self.q, commands, at)
        report = self._account(results)
        for job in self.table.jobs.values():
            job.set_runnable(job.job_id in runnable)
        self._prev_runnable = runnable
        return report

    def forget(self, job_id: int) -> None:
        """An ended job: no utilization for it from the next acks."""
        self._prev_runnable.pop(job_id, None)

    def unreachable(self) -> list[str]:
        """Nodes whose agent is not connected or failed its last quantum command."""
        down = {n for n, ok in self.pool.connected().items() if not ok}
        return sorted(down | set(self._failing))

    def _account(self, results: Mapping[str, QuantumResult]) -> RoundReport:
        """CPU time per job, utilization, skew, cluster utilization."""
        report = RoundReport(self.q)
        sw = report.switches
        jobs = self.table.jobs
        cpu: dict[str, dict[int, int]] = {}
        elapsed: dict[str, int] = {}
        applied: dict[str, int] = {}
        thawed: dict[str, int] = {}
        for node, res in results.items():
            if res.ack is None:
                sw.failed += 1
                self._warn_failed(node, str(res.error))
                continue
            if node in self._failing:
                n, _, _ = self._failing.pop(node)
                log.info("quantum %d: %s answers again after %d failed quanta", self.q, node, n)
            ack = res.ack
            per: dict[int, int] = {}
            for k, v in (ack.get("cpu_ns") or {}).items():
                try:
                    per[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue
            cpu[node] = per
            for jid, ns in per.items():
                job = jobs.get(jid)
                if job is not None:
                    job.cpu_ns += ns
            if ack.get("errors"):
                log.warning("quantum %d on %s: %s", self.q, node, ack["errors"])
            self._switch_figures(node, ack, thawed, sw)
            t = ack.get("applied_monotonic_ns")
            if isinstance(t, int):
                applied[node] = t
                prev = self._prev_applied.get(node)
                if prev is not None:
                    elapsed[node] = t - prev
        capacity = self.capacity
        report.utilization = job_utilization(cpu, elapsed, capacity, self._prev_runnable)
        sw.skew = command_skew_s(applied)
        sw.thaw_skew = command_skew_s(thawed)
        total_cpu = sum(sum(per.values()) for per in cpu.values())
        offered = sum(elapsed[n] * capacity.get(n, 1.0) for n in elapsed)
        if offered > 0:
            sw.utilization = min(1.0, total_cpu / offered)
        self._prev_applied.update(applied)
        for node in results:
            if node not in applied:
                self._prev_applied.pop(node, None)
        return report

    def _warn_failed(self, node: str, error: str) -> None:
        """Log a node's failed command once, then once per WARN_EVERY_S with a count.

        A controller whose agents are gone logged every node every quantum (816 lines in
        80 s at 0.1 s quanta, issue 13); ``failed_commands`` still counts every one.
        """
        now = self.mono()
        n, last, last_error = self._failing.get(node, (0, -math.inf, ""))
        n += 1
        if error != last_error or now - last >= WARN_EVERY_S:
            more = (
                f" ({n} failed quanta so far; next report in {WARN_EVERY_S:g} s)" if n > 1 else ""
            )
            log.warning("quantum %d on %s: %s%s", self.q, node, error, more)
            last, last_error = now, error
        self._failing[node] = (n, last, last_error)

    def _switch_figures(
        self, node: str, ack: Mapping[str, Any], thawed: dict[str, int], sw: Switches
    ) -> None:
        """The thaw instant, lateness, late flag and freeze confirmation of one ack."""
        t = ack.get("thawed_realtime_ns")
        if isinstance(t, int):
            thawed[node] = t
        fc = ack.get("freeze_confirm_s")
        if isinstance(fc, int | float):
            sw.freeze_confirms.append(float(fc))
        if ack.get("mode") != "time-triggered":
            return
        lat = ack.get("lateness_s")
        if isinstance(lat, int | float):
            sw.lateness.append(float(lat))
        if ack.get("late"):
            sw.late += 1
            log.info(
                "quantum %d: the plan reached %s after its instant (applied late)", self.q, node
            )
