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

from controller.acks import AckFolder, AckSummary
from controller.jobtable import JobTable
from controller.nodes import NodeInfo, Pool
from controller.telemetry import Switches

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
    # per job with a measured utilization: its demand on every device measured ("cpu";
    # "disk", "net" where every node of the job reported its bytes there), issue 31
    devices: dict[int, dict[str, float]] = field(default_factory=dict)
    switches: Switches = field(default_factory=Switches)


class QuantumRound:
    """Quantum number, what ran in the previous quantum, and which nodes keep failing."""

    def __init__(
        self,
        pool: Pool,
        nodes: Sequence[NodeInfo],
        table: JobTable,
        mono: Callable[[], float],
        device_bps: Callable[[], Mapping[str, float]] = lambda: {},
        measure: Callable[[], Sequence[str] | None] = lambda: None,
    ) -> None:
        self.pool = pool
        self.names = [n.name for n in nodes]
        self.capacity = {n.name: n.capacity for n in nodes}
        self.table = table
        self.mono = mono
        # each I/O device's capacity on a node, bytes/s (operator settings disk_bps, net_bps)
        self.device_bps = device_bps
        # the I/O devices whose bytes the acks should carry (None: every one the agents
        # can read); the policy's, so agents do not read what nothing uses (issue 32)
        self.measure = measure
        self.q = 0
        self._prev_runnable: dict[int, list[str]] = {}  # job -> nodes, previous quantum
        self.folder = AckFolder(self.capacity)  # the acks of a pool that returns them all
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
        # A pool over relays gets one summary per relay (controller/relaypool.py); the
        # agents' acks, straight from them, are folded here into the same summary.
        summarize = getattr(self.pool, "quantum_summary", None)
        measure = self.measure()
        if summarize is not None:
            summary, failed = summarize(self.q, commands, at, measure=measure)
        else:
            results = self.pool.quantum(self.q, commands, at, measure=measure)
            failed = {n: str(r.error) for n, r in results.items() if r.ack is None}
            summary = self.folder.fold(commands, {n: r.ack for n, r in results.items()})
        report = self._account(summary, failed, commands)
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

    def _account(
        self, s: AckSummary, failed: Mapping[str, str], commands: Mapping[str, Any]
    ) -> RoundReport:
        """CPU time per job, utilization, skew, cluster utilization."""
        report = RoundReport(self.q)
        sw = report.switches
        for node, error in failed.items():
            sw.failed += 1
            self._warn_failed(node, error)
        if self._failing:
            for node in [n for n in self._failing if n in commands and n not in failed]:
                n, _, _ = self._failing.pop(node)
                log.info("quantum %d: %s answers again after %d failed quanta", self.q, node, n)
        jobs = self.table.jobs
        for jid, ns in s.cpu_ns.items():
            job = jobs.get(jid)
            if job is not None:
                job.cpu_ns += ns
        for node, errors in s.ack_errors.items():
            log.warning("quantum %d on %s: %s", self.q, node, errors)
        sw.freeze_confirms = s.freeze_confirms
        sw.lateness = s.lateness
        sw.late = len(s.late)
        for node in s.late:
            log.info("quantum %d: the plan reached %s after its instant (late)", self.q, node)
        report.utilization = s.utilization(self._prev_runnable)
        report.devices = {j: {"cpu": u} for j, u in report.utilization.items()}
        for dev, bps in self.device_bps().items():
            for j, share in s.device_demand(dev, self._prev_runnable, bps).items():
                if j in report.devices:
                    report.devices[j][dev] = share
        sw.skew = s.skew_s(s.applied)
        sw.thaw_skew = s.skew_s(s.thawed)
        if s.offered_total_ns > 0:
            sw.utilization = min(1.0, s.cpu_total_ns / s.offered_total_ns)
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
