"""cosched's Grafana dashboards, written as code with grafana-foundation-sdk.

The generated JSON is committed under ``grafana/dashboards/`` (Grafana's file
provider reads it, see ``grafana/provisioning/``) and a unit test fails when it
differs from what this module makes now. Regenerate with::

    .venv/bin/python -m testbed.grafana --out grafana/dashboards/

Every query names metrics the exporters serve (agent/metrics.py,
controller/metrics.py) or recording rules of prometheus/rules/recording.yml;
every panel uses the provisioned Prometheus datasource by its fixed uid.
Four dashboards (docs/monitoring.md): cluster overview, gang matrix,
coscheduling (CDC) and experiment comparison (policies side by side, one run).

grafana-foundation-sdk is a dev dependency: this module is a build tool, never
imported by the daemons.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import bargauge, stat, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as pq
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh, VariableSort

# The datasource grafana/provisioning/datasources/prometheus.yml creates: a fixed
# uid, so the dashboards need no "select a datasource" step on import.
DATASOURCE_UID = "cosched-prometheus"
DS = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "grafana" / "dashboards"
TAGS = ["cosched"]
REFRESH = "10s"
TIME_FROM = "now-30m"

# Grafana fills these in itself; every other $name must be a dashboard variable.
BUILTIN_VARS = ("__rate_interval", "__interval", "__range", "__interval_ms", "__range_s")


@dataclass(frozen=True)
class Q:
    """One Prometheus query of a panel and its legend."""

    expr: str
    legend: str = ""


class _Ids:
    """Panel ids: unique within a dashboard (Grafana keys panel state by them)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _targets(queries: Sequence[Q], instant: bool) -> list[pq.Dataquery]:
    out = []
    for i, q in enumerate(queries):
        t = pq.Dataquery().expr(q.expr).ref_id(chr(ord("A") + i)).datasource(DS)
        if q.legend:
            t = t.legend_format(q.legend)
        out.append(t.instant() if instant else t.range())
    return out


def series(
    ids: _Ids,
    title: str,
    description: str,
    queries: Sequence[Q],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    stack: bool = False,
    min_val: float | None = None,
    max_val: float | None = None,
) -> timeseries.Panel:
    p = (
        timeseries.Panel()
        .id(ids())
        .title(title)
        .description(description)
        .datasource(DS)
        .targets(list(_targets(queries, instant=False)))
        .unit(unit)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(30 if stack else 10)
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.LIST)
            .placement(cm.LegendPlacement.BOTTOM)
        )
    )
    if stack:
        p = p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if min_val is not None:
        p = p.min(min_val)
    if max_val is not None:
        p = p.max(max_val)
    return p


def single(
    ids: _Ids,
    title: str,
    description: str,
    queries: Sequence[Q],
    *,
    unit: str = "short",
    width: int = 6,
    height: int = 5,
) -> stat.Panel:
    """A big number: the last value, with its recent curve behind it."""
    return (
        stat.Panel()
        .id(ids())
        .title(title)
        .description(description)
        .datasource(DS)
        .targets(list(_targets(queries, instant=False)))
        .unit(unit)
        .span(width)
        .height(height)
        .graph_mode(cm.BigValueGraphMode.AREA)
        .color_mode(cm.BigValueColorMode.VALUE)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )


def bars(
    ids: _Ids,
    title: str,
    description: str,
    queries: Sequence[Q],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    max_val: float | None = None,
) -> bargauge.Panel:
    """One bar per series at the end of the range (instant queries)."""
    p = (
        bargauge.Panel()
        .id(ids())
        .title(title)
        .description(description)
        .datasource(DS)
        .targets(list(_targets(queries, instant=True)))
        .unit(unit)
        .span(width)
        .height(height)
        .min(0)
        .display_mode(cm.BarGaugeDisplayMode.GRADIENT)
        .orientation(cm.VizOrientation.HORIZONTAL)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    return p.max(max_val) if max_val is not None else p


def label_var(
    name: str,
    label: str,
    query: str,
    *,
    multi: bool = True,
    newest_first: bool = False,
) -> db.QueryVariable:
    """A variable over the values of one label (``label_values(metric, label)``).

    Multi-value ones offer "All"; a single-value one starts on its first value.
    """
    sort = VariableSort.ALPHABETICAL_DESC if newest_first else VariableSort.ALPHABETICAL_ASC
    return (
        db.QueryVariable(name)
        .label(label)
        .datasource(DS)
        .query(query)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(sort)
        .multi(multi)
        .include_all(multi)
    )


def node_var(metric: str) -> db.QueryVariable:
    """``$node``: the nodes that export ``metric``."""
    return label_var("node", "node", f"label_values({metric}, node)")


def _dashboard(uid: str, title: str, description: str) -> db.Dashboard:
    return (
        db.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh(REFRESH)
        .time(TIME_FROM, "now")
        .timezone("utc")
        .editable()
    )


NODE = 'node=~"$node"'


def overview() -> db.Dashboard:
    ids = _Ids()
    d = _dashboard(
        "cosched-overview",
        "cosched: cluster overview",
        "Utilization per node and cluster, jobs by state and class, the queue, and the "
        "health of every agent and the controller.",
    ).with_variable(node_var("cosched_agent_failsafe_active"))
    d = d.with_row(db.Row("Utilization").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "CPU utilization per node",
            "CPU used by the node's jobs / the node's CPU capacity, 1 m average (agents).",
            [Q(f"node:cosched_agent_node_cpu_utilization_ratio:avg1m{{{NODE}}}", "{{node}}")],
            unit="percentunit",
            min_val=0,
            max_val=1,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Cluster CPU utilization",
            "Agents: mean of the nodes' 1 m utilization. Controller: job CPU / CPU offered "
            "per quantum, 1 m average.",
            [
                Q("cluster:cosched_agent_node_cpu_utilization_ratio:avg1m", "agents"),
                Q("cluster:cosched_controller_cluster_cpu_utilization_ratio:avg1m", "controller"),
            ],
            unit="percentunit",
            min_val=0,
            max_val=1,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Job CPU per node",
            "CPUs' worth of time the node's jobs used per second.",
            [Q(f"node:cosched_agent_job_cpu_seconds:rate1m{{{NODE}}}", "{{node}}")],
            unit="short",
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Job CPU by job",
            "CPU seconds per second of each job on each node.",
            [
                Q(
                    f"sum by (job_id) (rate(cosched_agent_job_cpu_seconds_total{{{NODE}}}"
                    "[$__rate_interval]))",
                    "job {{job_id}}",
                )
            ],
        )
    )
    d = d.with_row(db.Row("Jobs").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "Jobs by state and class",
            "The controller's job table: jobs in each state and class.",
            [
                Q(
                    "sum by (state, class) "
                    '(cosched_controller_jobs{state=~"queued|running|frozen"})',
                    "{{state}} {{class}}",
                )
            ],
            stack=True,
        )
    )
    d = d.with_panel(
        bars(
            ids,
            "Jobs by state (now)",
            "Jobs in each state over all classes, ended ones included.",
            [Q("sum by (state) (cosched_controller_jobs)", "{{state}}")],
            width=6,
        )
    )
    d = d.with_panel(
        single(
            ids,
            "Queue",
            "Jobs submitted and not yet placed.",
            [Q("cosched_controller_queue_length", "queued")],
        )
    )
    d = d.with_row(db.Row("Health").id(ids()))
    d = d.with_panel(
        bars(
            ids,
            "Exporters up",
            "1 when Prometheus scraped the exporter at its last attempt.",
            [Q('up{job=~"cosched-.*"}', "{{job}} {{node}}")],
            width=8,
            max_val=1,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Controller heartbeat age",
            "Seconds since each agent last heard the controller (fail-safe after 2 s).",
            [Q(f"cosched_agent_controller_heartbeat_age_seconds{{{NODE}}}", "{{node}}")],
            unit="s",
            width=8,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Fail-safe active",
            "1 while the agent schedules locally because it lost the controller.",
            [Q(f"cosched_agent_failsafe_active{{{NODE}}}", "{{node}}")],
            width=8,
            max_val=1,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Longest freeze per job",
            "Seconds each job has been frozen without a break (0 while it runs); "
            "CoschedJobFrozenTooLong fires over 600 s.",
            [
                Q(
                    f"max by (node, job_id) (cosched_agent_job_frozen_seconds{{{NODE}}})",
                    "{{node}} job {{job_id}}",
                )
            ],
            unit="s",
            width=24,
        )
    )
    return d


def gang() -> db.Dashboard:
    ids = _Ids()
    d = _dashboard(
        "cosched-gang",
        "cosched: gang matrix",
        "The Ousterhout matrix under (paired) gang scheduling: slots, pairing success, "
        "the fraction of quanta each slot ran as a matched partner, quantum skew and the "
        "agents' switch latency.",
    ).with_variable(node_var("cosched_agent_failsafe_active"))
    d = d.with_row(db.Row("Slots and pairing").id(ids()))
    d = d.with_panel(
        single(
            ids,
            "Matrix slots",
            "Slots (matrix rows) the controller has reported a matched fraction for.",
            [Q("count(cosched_controller_slot_matched_ratio)", "slots")],
        )
    )
    d = d.with_panel(
        single(
            ids,
            "Pairing success",
            "Quanta run with a partner row / quanta, since the controller started "
            "(paired gang, Wiseman & Feitelson 2003 §4.1.2).",
            [Q("cosched_controller_matching_success_ratio", "ratio")],
            unit="percentunit",
        )
    )
    d = d.with_panel(
        single(
            ids,
            "Quanta per second",
            "Quanta the controller runs per second.",
            [Q("rate(cosched_controller_quanta_total[$__rate_interval])", "quanta/s")],
            unit="short",
        )
    )
    d = d.with_panel(
        single(
            ids,
            "Late plans per second",
            "Node plans that reached the agent after their instant (time-triggered "
            "switching; 0 otherwise).",
            [Q("rate(cosched_controller_late_plans_total[$__rate_interval])", "late/s")],
        )
    )
    d = d.with_panel(
        bars(
            ids,
            "Matched fraction per slot",
            "Fraction of quanta in which the slot was the matched partner (Wiseman & Feitelson "
            "2003 Fig. 7).",
            [Q("cosched_controller_slot_matched_ratio", "slot {{slot}}")],
            unit="percentunit",
            max_val=1,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Pairing success over time",
            "Matching success ratio, 5 m average (recording rule).",
            [Q("cluster:cosched_controller_matching_success_ratio:avg5m", "pairing success")],
            unit="percentunit",
            min_val=0,
            max_val=1,
        )
    )
    d = d.with_row(db.Row("Skew and switch latency").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "Quantum command skew",
            "Spread of one quantum's apply instants over the nodes, 1 m window.",
            [
                Q("cluster:cosched_controller_quantum_skew_seconds:p50_rate1m", "p50"),
                Q("cluster:cosched_controller_quantum_skew_seconds:p99_rate1m", "p99"),
                Q("cluster:cosched_controller_quantum_skew_seconds:mean_rate1m", "mean"),
            ],
            unit="s",
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Thaw skew",
            "Spread of the agents' thaw instants (CLOCK_REALTIME) of one quantum.",
            [
                Q(
                    "histogram_quantile(0.5, sum by (le) (rate("
                    "cosched_controller_thaw_skew_seconds_bucket[$__rate_interval])))",
                    "p50",
                ),
                Q(
                    "histogram_quantile(0.99, sum by (le) (rate("
                    "cosched_controller_thaw_skew_seconds_bucket[$__rate_interval])))",
                    "p99",
                ),
            ],
            unit="s",
        )
    )
    for what, metric in (
        ("Freeze", "cosched_agent_freeze_latency_seconds"),
        ("Thaw", "cosched_agent_thaw_latency_seconds"),
    ):
        d = d.with_panel(
            series(
                ids,
                f"{what} latency p99 per node",
                f"{what} request written to the kernel confirming it, 99th percentile.",
                [
                    Q(
                        f"histogram_quantile(0.99, sum by (le, node) (rate({metric}_bucket"
                        f"{{{NODE}}}[$__rate_interval])))",
                        "{{node}}",
                    )
                ],
                unit="s",
            )
        )
    d = d.with_panel(
        series(
            ids,
            "Quanta applied per node",
            "Quantum commands each agent applied per second.",
            [
                Q(
                    f"sum by (node) (rate(cosched_agent_quanta_applied_total{{{NODE}}}"
                    "[$__rate_interval]))",
                    "{{node}}",
                )
            ],
            width=24,
        )
    )
    return d


CDC = 'node=~"$node", policy=~"$policy"'


def coscheduling() -> db.Dashboard:
    ids = _Ids()
    d = (
        _dashboard(
            "cosched-cdc",
            "cosched: coscheduling (CDC)",
            "Communication-driven coscheduling (Yu & Byun 2011): boost conflict ratio (BCR) and "
            "message delay (MD) per policy and node, boosts, ERL. Data only while a "
            "communication-driven scheme runs.",
        )
        .with_variable(node_var("cosched_cdc_decision_points_total"))
        .with_variable(
            label_var("policy", "policy", "label_values(cosched_cdc_decision_points_total, policy)")
        )
    )
    d = d.with_row(db.Row("Boost conflict ratio").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "BCR per policy",
            "Decision points at which two or more local processes had pending messages / "
            "decision points, all nodes, 1 m.",
            [
                Q(
                    'cluster:cosched_cdc_boost_conflicts_per_decision_points:ratio_rate1m{policy=~"$policy"}',
                    "{{policy}}",
                )
            ],
            unit="percentunit",
            min_val=0,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "BCR per node",
            "The same ratio on each node.",
            [
                Q(
                    f"node:cosched_cdc_boost_conflicts_per_decision_points:ratio_rate1m{{{CDC}}}",
                    "{{node}} {{policy}}",
                )
            ],
            unit="percentunit",
            min_val=0,
        )
    )
    d = d.with_row(db.Row("Message delay").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "MD per policy",
            "From the start of a wait for a message to the end of the receive, 1 m window.",
            [
                Q(
                    'cluster:cosched_message_delay_seconds:p50_rate1m{policy=~"$policy"}',
                    "p50 {{policy}}",
                ),
                Q(
                    'cluster:cosched_message_delay_seconds:p99_rate1m{policy=~"$policy"}',
                    "p99 {{policy}}",
                ),
            ],
            unit="s",
        )
    )
    d = d.with_panel(
        series(
            ids,
            "MD p99 per node",
            "99th percentile of the message delay on each node.",
            [Q(f"node:cosched_message_delay_seconds:p99_rate1m{{{CDC}}}", "{{node}} {{policy}}")],
            unit="s",
        )
    )
    d = d.with_row(db.Row("Local scheduler").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "Boosts per second",
            "Times a process was given the boost, per node.",
            [
                Q(
                    f"sum by (node, policy) (rate(cosched_cdc_boosts_total{{{CDC}}}"
                    "[$__rate_interval]))",
                    "{{node}} {{policy}}",
                )
            ],
            width=8,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Decision points per second",
            "Ticks and evaluated arrivals or collective events, per node.",
            [
                Q(
                    f"sum by (node, policy) (rate(cosched_cdc_decision_points_total{{{CDC}}}"
                    "[$__rate_interval]))",
                    "{{node}} {{policy}}",
                )
            ],
            width=8,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Message arrivals per second",
            "Arrivals the kernel reported on the duplicated job sockets (NIC emulation).",
            [
                Q(
                    f"sum by (node, policy) (rate(cosched_nic_arrival_events_total{{{CDC}}}"
                    "[$__rate_interval]))",
                    "{{node}} {{policy}}",
                )
            ],
            width=8,
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Expected rescheduling latency",
            "Each node's ERL (Yu & Byun 2011 eq. 1) and its measured Cost_switch.",
            [
                Q(f"cosched_cdc_erl_seconds{{{CDC}}}", "ERL {{node}}"),
                Q(f"cosched_cdc_cost_switch_seconds{{{CDC}}}", "Cost_switch {{node}}"),
            ],
            unit="s",
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Processes with pending messages",
            "ENP at the last tick and the ranks registered with the node's NIC emulation.",
            [
                Q(f"cosched_cdc_pending_processes{{{CDC}}}", "pending {{node}}"),
                Q(f"cosched_cdc_registered_processes{{{CDC}}}", "registered {{node}}"),
            ],
        )
    )
    return d


RUN = 'run=~"$run", policy=~"$policy"'


def experiment() -> db.Dashboard:
    """Policies side by side over the dashboard's time range, for one run id.

    ``cosched monitor up --run-id ID`` labels every target ``run=ID``; policies
    tried one after the other within the run differ in their ``policy`` label, so
    aggregating over the time range ($__range) puts them side by side.
    """
    ids = _Ids()
    d = (
        _dashboard(
            "cosched-experiment",
            "cosched: experiment comparison",
            "Communication-driven policies side by side over the time range for one run "
            "(the run label `cosched monitor up --run-id` puts on every target): BCR, "
            "message delay, boosts per decision point.",
        )
        .with_variable(
            # One run at a time, the newest first (run ids default to the UTC start
            # time). On a Prometheus whose targets carry no run label
            # (prometheus/prometheus.yml) it is empty, and run=~"" matches every
            # series without the label: the dashboard still works there.
            label_var("run", "run id", "label_values(up, run)", multi=False, newest_first=True)
        )
        .with_variable(
            label_var(
                "policy",
                "policy",
                'label_values(cosched_cdc_decision_points_total{run=~"$run"}, policy)',
            )
        )
    )
    d = d.with_row(db.Row("Over the time range").id(ids()))
    d = d.with_panel(
        bars(
            ids,
            "BCR by policy",
            "Boost conflicts / decision points over the time range, all nodes.",
            [
                Q(
                    f"sum by (policy) (increase(cosched_cdc_boost_conflicts_total{{{RUN}}}"
                    "[$__range])) / sum by (policy) (increase("
                    f"cosched_cdc_decision_points_total{{{RUN}}}[$__range]))",
                    "{{policy}}",
                )
            ],
            unit="percentunit",
            width=8,
        )
    )
    d = d.with_panel(
        bars(
            ids,
            "Mean message delay by policy",
            "Mean MD over the time range, all nodes.",
            [
                Q(
                    f"sum by (policy) (increase(cosched_message_delay_seconds_sum{{{RUN}}}"
                    "[$__range])) / sum by (policy) (increase("
                    f"cosched_message_delay_seconds_count{{{RUN}}}[$__range]))",
                    "{{policy}}",
                )
            ],
            unit="s",
            width=8,
        )
    )
    d = d.with_panel(
        bars(
            ids,
            "Boosts per decision point by policy",
            "How often a decision gives a boost, over the time range.",
            [
                Q(
                    f"sum by (policy) (increase(cosched_cdc_boosts_total{{{RUN}}}[$__range])) "
                    "/ sum by (policy) (increase("
                    f"cosched_cdc_decision_points_total{{{RUN}}}[$__range]))",
                    "{{policy}}",
                )
            ],
            width=8,
        )
    )
    for q in ("0.5", "0.99"):
        d = d.with_panel(
            bars(
                ids,
                f"MD p{round(float(q) * 100)} by policy",
                f"{q} quantile of the message delay over the time range, all nodes.",
                [
                    Q(
                        f"histogram_quantile({q}, sum by (le, policy) (increase("
                        f"cosched_message_delay_seconds_bucket{{{RUN}}}[$__range])))",
                        "{{policy}}",
                    )
                ],
                unit="s",
            )
        )
    d = d.with_row(db.Row("Over time").id(ids()))
    d = d.with_panel(
        series(
            ids,
            "BCR over time by policy",
            "Boost conflict ratio in each rate window, all nodes.",
            [
                Q(
                    f"sum by (policy) (rate(cosched_cdc_boost_conflicts_total{{{RUN}}}"
                    "[$__rate_interval])) / sum by (policy) (rate("
                    f"cosched_cdc_decision_points_total{{{RUN}}}[$__rate_interval]))",
                    "{{policy}}",
                )
            ],
            unit="percentunit",
        )
    )
    d = d.with_panel(
        series(
            ids,
            "Cluster CPU utilization in the run",
            "The controller's job CPU / CPU offered per quantum, whichever policy ran.",
            [
                Q(
                    'avg(cosched_controller_cluster_cpu_utilization_ratio{run=~"$run"})',
                    "controller",
                )
            ],
            unit="percentunit",
            min_val=0,
            max_val=1,
        )
    )
    return d


DASHBOARDS = {
    "overview.json": overview,
    "gang.json": gang,
    "coscheduling.json": coscheduling,
    "experiment.json": experiment,
}


def render() -> dict[str, str]:
    """File name -> the dashboard JSON as committed (sorted keys, 2-space indent)."""
    return {
        name: json.dumps(make().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
        for name, make in DASHBOARDS.items()
    }


def stale(out: Path) -> list[str]:
    """Dashboards whose file in ``out`` is missing or differs from :func:`render`."""
    return [
        name
        for name, text in render().items()
        if not (out / name).is_file() or (out / name).read_text() != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.grafana", description="Write cosched's Grafana dashboards."
    )
    ap.add_argument("--out", type=Path, default=OUT_DIR, help=f"directory (default {OUT_DIR})")
    ap.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is out of date"
    )
    args = ap.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        for name in bad:
            print(f"{args.out / name}: out of date (python -m testbed.grafana --out {args.out})")
        return 1 if bad else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (args.out / name).write_text(text)
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
