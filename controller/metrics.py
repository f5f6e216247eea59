"""Prometheus exporter of the controller (docs/monitoring.md: the metric names are a contract).

One registry per process (never the global default, so tests can build
several controllers in one interpreter). Gauges are refreshed from the
scheduler by the daemon thread between quanta (:meth:`ControllerMetrics.update`),
never read from the HTTP thread, so the scrape needs no lock on the job table.

Matching success ratio and per-slot ratios follow Wiseman & Feitelson 2003 §4.1.2 (Fig. 7):
paired quanta / quanta, and the fraction of quanta each matrix row ran in.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from common.serverstop import stop_server
from controller.jobs import CLASSES, STATES
from controller.jobtable import JobTable
from controller.telemetry import Telemetry

SKEW_BUCKETS = (
    1e-5,
    2e-5,
    5e-5,
    1e-4,
    2e-4,
    5e-4,
    1e-3,
    2e-3,
    5e-3,
    1e-2,
    2e-2,
    5e-2,
    1e-1,
)


class Source(Protocol):
    """What the exporter reads from the scheduler (controller/scheduler.py)."""

    @property
    def table(self) -> JobTable: ...

    @property
    def telemetry(self) -> Telemetry: ...

    def queue_length(self) -> int: ...


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.jobs = Gauge(
            "cosched_controller_jobs", "Jobs by state and class", ["state", "class"], registry=r
        )
        self.queue = Gauge(
            "cosched_controller_queue_length", "Jobs submitted, not yet placed", registry=r
        )
        self.matching = Gauge(
            "cosched_controller_matching_success_ratio",
            "Quanta run with a partner row / quanta (paired gang, Wiseman & Feitelson 2003 §4.1.2)",
            registry=r,
        )
        self.slot_matched = Gauge(
            "cosched_controller_slot_matched_ratio",
            "Fraction of quanta in which the matrix row was the matched partner (Wiseman & "
            "Feitelson 2003 Fig. 7)",
            ["slot"],
            registry=r,
        )
        self.skew = Histogram(
            "cosched_controller_quantum_skew_seconds",
            "Spread of the quantum command's apply instants over the nodes",
            buckets=SKEW_BUCKETS,
            registry=r,
        )
        self.thaw_skew = Histogram(
            "cosched_controller_thaw_skew_seconds",
            "Spread of the agents' thaw instants (CLOCK_REALTIME) of one quantum over the nodes",
            buckets=SKEW_BUCKETS,
            registry=r,
        )
        self.late_plans = Counter(
            "cosched_controller_late_plans",
            "Node plans whose instant had passed when the agent got them (time-triggered)",
            registry=r,
        )
        self.utilization = Gauge(
            "cosched_controller_cluster_cpu_utilization_ratio",
            "CPU used / CPU offered over all nodes in the last quantum",
            registry=r,
        )
        self.quanta = Counter(
            "cosched_controller_quanta", "Quanta run by the controller", registry=r
        )
        self._quanta_seen = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def serve(self, host: str, port: int) -> None:
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)

    def shutdown(self) -> None:
        if self._server is not None:
            stop_server(self._server)
            self._server = None

    def update(self, s: Source) -> None:
        counts = s.table.job_counts()
        for state in STATES:
            for cls in CLASSES:
                self.jobs.labels(state=state, **{"class": cls}).set(counts.get((state, cls), 0))
        self.queue.set(s.queue_length())
        t = s.telemetry
        self.matching.set(t.matching_success_ratio())
        for slot, ratio in t.slot_matched_ratio().items():
            self.slot_matched.labels(slot=str(slot)).set(ratio)
        fresh = t.drain()
        for v in fresh.skews:
            self.skew.observe(v)
        for v in fresh.thaw_skews:
            self.thaw_skew.observe(v)
        if fresh.late_plans:
            self.late_plans.inc(fresh.late_plans)
        c = t.counters
        self.utilization.set(c.utilization)
        new = c.quanta - self._quanta_seen
        if new > 0:
            self.quanta.inc(new)
            self._quanta_seen = c.quanta
