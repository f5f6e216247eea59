"""Prometheus exporter of one agent process.

Counters and histograms are updated by the agent loop; values that exist in the
kernel (job CPU time, node utilization) or are a function of time (heartbeat
age) are read at scrape time by a custom collector, so they are never stale.
Each agent gets its own registry: several agents can live in one test process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from common.serverstop import stop_server

# 50 us .. 100 ms: v1 freezes measure 0.1-0.8 ms at SCHED_FIFO, tens of ms without.
LATENCY_BUCKETS = (
    50e-6,
    100e-6,
    250e-6,
    500e-6,
    1e-3,
    2.5e-3,
    5e-3,
    10e-3,
    25e-3,
    50e-3,
    100e-3,
)

# 10 us .. 10 ms: a time-triggered thaw lands tens of us after its instant at SCHED_FIFO.
LATENESS_BUCKETS = (10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3)


@dataclass
class Snapshot:
    """What the collector needs, copied out of the agent under its lock."""

    node: str
    job_cpu_ns: dict[str, int] = field(default_factory=dict)
    job_frozen_s: dict[str, float] = field(default_factory=dict)  # 0 while the job runs
    node_cpu_ns: int | None = None  # usage of the node's parent cgroup
    capacity_cpus: float = 1.0
    heartbeat_age_s: float = 0.0
    failsafe_active: bool = False
    cdc: dict[str, Any] | None = None  # LocalScheduler.status() while a scheme runs


class _AgentCollector(Collector):
    def __init__(self, source: Callable[[], Snapshot]) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._prev: tuple[float, int] | None = None  # (monotonic, node cpu ns)

    def collect(self) -> Iterator[Metric]:
        t0 = time.perf_counter()
        ok = 1.0
        try:
            snap = self._source()
        except Exception:
            snap = None
            ok = 0.0
        if snap is not None:
            yield from self._metrics(snap)
        yield GaugeMetricFamily(
            "cosched_agent_scrape_success",
            "1 if the agent's state could be read at scrape time",
            value=ok,
        )
        yield GaugeMetricFamily(
            "cosched_agent_scrape_duration_seconds",
            "Time spent reading the agent's state for this scrape",
            value=time.perf_counter() - t0,
        )

    def _metrics(self, snap: Snapshot) -> Iterator[Metric]:
        util = GaugeMetricFamily(
            "cosched_agent_node_cpu_utilization_ratio",
            "CPU used by this node's jobs since the previous scrape / node CPU capacity",
            labels=["node"],
        )
        now = time.monotonic()
        with self._lock:
            prev, value = self._prev, None
            if snap.node_cpu_ns is not None:
                if prev is not None and now > prev[0] and snap.node_cpu_ns >= prev[1]:
                    used = (snap.node_cpu_ns - prev[1]) / 1e9
                    value = min(1.0, used / ((now - prev[0]) * max(snap.capacity_cpus, 1e-9)))
                self._prev = (now, snap.node_cpu_ns)
        if value is not None:
            util.add_metric([snap.node], value)
        yield util
        cpu = CounterMetricFamily(
            "cosched_agent_job_cpu_seconds",
            "CPU time used by a job's processes on this node",
            labels=["node", "job_id"],
        )
        for jid, ns in sorted(snap.job_cpu_ns.items()):
            cpu.add_metric([snap.node, jid], ns / 1e9)
        yield cpu
        frozen = GaugeMetricFamily(
            "cosched_agent_job_frozen_seconds",
            "Seconds a job has been frozen on this node without a break (0 while it runs)",
            labels=["node", "job_id"],
        )
        for jid, secs in sorted(snap.job_frozen_s.items()):
            frozen.add_metric([snap.node, jid], secs)
        yield frozen
        yield GaugeMetricFamily(
            "cosched_agent_controller_heartbeat_age_seconds",
            "Seconds since the controller was last heard",
            value=snap.heartbeat_age_s,
        )
        yield GaugeMetricFamily(
            "cosched_agent_failsafe_active",
            "1 while the agent runs in fail-safe (local scheduling) mode",
            value=1.0 if snap.failsafe_active else 0.0,
        )
        if snap.cdc is not None:
            yield from _cdc_metrics(snap.node, snap.cdc)


def _cdc_metrics(node: str, st: dict[str, Any]) -> Iterator[Metric]:
    """Yu & Byun's metrics: BCR as a ratio of two counters, MD as a histogram (docs/cdc.md)."""
    labels, values = ["node", "policy"], [node, str(st["scheme"])]

    def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
        m = CounterMetricFamily(name, doc, labels=labels)
        m.add_metric(values, value)
        return m

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        m = GaugeMetricFamily(name, doc, labels=labels)
        m.add_metric(values, value)
        return m

    yield counter(
        "cosched_cdc_decision_points",
        "Local scheduling decision points (ticks and evaluated arrivals/collective events)",
        st["decisions"],
    )
    yield counter(
        "cosched_cdc_boost_conflicts",
        "Decision points at which two or more local processes had pending messages",
        st["conflicts"],
    )
    yield counter("cosched_cdc_boosts", "Times a process was given the boost", st["boosts"])
    yield counter(
        "cosched_nic_arrival_events",
        "Arrivals the kernel reported on the duplicated job sockets",
        st["arrival_events"],
    )
    bounds = list(st["md_bounds_s"])
    counts = list(st["md_buckets"])
    buckets: list[tuple[str, float]] = []
    acc = 0
    for i, c in enumerate(counts):
        acc += c
        le = repr(float(bounds[i])) if i < len(bounds) else "+Inf"
        buckets.append((le, acc))
    if not buckets or buckets[-1][0] != "+Inf":
        buckets.append(("+Inf", acc))
    md = HistogramMetricFamily(
        "cosched_message_delay_seconds",
        "From the start of a wait for a message to the completion of the receive",
        labels=labels,
    )
    md.add_metric(values, buckets, sum_value=st["md_sum_s"])
    yield md
    yield gauge(
        "cosched_cdc_erl_seconds",
        "This node's expected rescheduling latency (Yu & Byun 2011 eq. 1)",
        st["erl_us"] / 1e6,
    )
    yield gauge(
        "cosched_cdc_pending_processes",
        "Local processes with pending messages at the last tick (ENP)",
        st["enp"],
    )
    yield gauge(
        "cosched_cdc_registered_processes",
        "Ranks registered with this agent's NIC emulation",
        st["registered"],
    )
    if st.get("cost_switch_us") is not None:
        yield gauge(
            "cosched_cdc_cost_switch_seconds",
            "Context switch cost measured at agent start (Cost_switch of eq. 1)",
            st["cost_switch_us"] / 1e6,
        )


class AgentMetrics:
    def __init__(
        self, source: Callable[[], Snapshot], registry: CollectorRegistry | None = None
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.freeze_latency = Histogram(
            "cosched_agent_freeze_latency_seconds",
            "From writing the freeze request to the kernel confirming the group frozen",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.thaw_latency = Histogram(
            "cosched_agent_thaw_latency_seconds",
            "From writing the thaw request to the kernel confirming the group thawed",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.quanta_applied = Counter(
            "cosched_agent_quanta_applied",
            "Quantum commands applied",
            registry=self.registry,
        )
        self.failsafe_activations = Counter(
            "cosched_agent_failsafe_activations",
            "Times the agent lost its controller and fell back to local scheduling",
            registry=self.registry,
        )
        # Time-triggered switches (agent/plan.py, docs/cluster.md).
        self.tt_plans = Counter(
            "cosched_agent_tt_plans",
            "Quantum plans received with an instant to apply them at",
            registry=self.registry,
        )
        self.tt_late = Counter(
            "cosched_agent_tt_late_plans",
            "Plans whose instant had passed on arrival (applied at once)",
            registry=self.registry,
        )
        self.tt_replaced = Counter(
            "cosched_agent_tt_replaced_plans",
            "Pending plans replaced by a newer command before their instant",
            registry=self.registry,
        )
        self.tt_refused = Counter(
            "cosched_agent_tt_refused_plans",
            "Plans refused because their instant was beyond the fail-safe timeout",
            registry=self.registry,
        )
        self.tt_lateness = Histogram(
            "cosched_agent_tt_lateness_seconds",
            "From a plan's instant to the agent's thaw writes done (CLOCK_REALTIME)",
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_AgentCollector(source))
        self._server: object | None = None

    def serve(self, host: str, port: int) -> None:
        """Start the HTTP endpoint (a daemon thread) on host:port."""
        self._server = start_http_server(port, addr=host, registry=self.registry)

    def shutdown(self) -> None:
        server = self._server
        if isinstance(server, tuple) and server:
            stop_server(server[0])
        self._server = None
