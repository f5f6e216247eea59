"""grafana/: the committed dashboards are what testbed/grafana.py makes, and they
are consistent with the provisioning and the exporters.

Lint: unique dashboard uids, unique panel ids in a dashboard, every panel and
query on the provisioned datasource uid, every variable a query uses defined,
and every metric name a query reads served by an exporter (names collected by
instantiating the exporters' registries and collecting them) or made by a
recording rule of prometheus/rules/recording.yml.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grafana_foundation_sdk")
yaml = pytest.importorskip("yaml")

from agent.metrics import AgentMetrics, Snapshot  # noqa: E402
from controller.metrics import ControllerMetrics  # noqa: E402
from testbed import grafana as gf  # noqa: E402
from testbed import monitor as mon  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
DASH_DIR = REPO / "grafana" / "dashboards"
PROVISIONING = REPO / "grafana" / "provisioning"
REGENERATE = ".venv/bin/python -m testbed.grafana --out grafana/dashboards/"


def _dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASH_DIR.glob("*.json"))}


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            out.append(p)
            walk(p.get("panels") or [])

    walk(dash.get("panels") or [])
    return out


def _cdc_status() -> dict[str, Any]:
    """The shape of LocalScheduler.status() while a scheme runs (agent/local.py)."""
    return {
        "scheme": "dcs",
        "decisions": 10,
        "conflicts": 2,
        "boosts": 3,
        "arrival_events": 5,
        "md_bounds_s": [1e-4, 1e-3],
        "md_buckets": [1, 2, 0],
        "md_sum_s": 0.01,
        "erl_us": 50.0,
        "enp": 1,
        "registered": 2,
        "cost_switch_us": 3.0,
    }


def _exported() -> set[str]:
    """Every series name the two exporters serve, from their own registries."""
    snap = Snapshot(
        node="n0",
        job_cpu_ns={"1": 10**9},
        job_frozen_s={"1": 0.0},
        node_cpu_ns=10**9,
        cdc=_cdc_status(),
    )
    agent = AgentMetrics(lambda: snap)
    ctl = ControllerMetrics()
    names: set[str] = set()
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gauge": ("",),
    }
    for registry in (agent.registry, ctl.registry):
        for fam in registry.collect():
            names.update(fam.name + s for s in suffixes.get(fam.type, ("",)))
            names.update(s.name for s in fam.samples)
    return names


def _recording_rules() -> set[str]:
    doc = yaml.safe_load((REPO / "prometheus/rules/recording.yml").read_text())
    return {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}


_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads (not functions, labels or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and strings
    text = re.sub(r"\{[^}]*\}", "", text)  # matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for m in re.finditer(r"(?<![\w:.$])[A-Za-z_:][\w:]*", text):
        word, rest = m.group(0), text[m.end() :].lstrip()
        if not rest.startswith("(") and word.lower() not in _KEYWORDS:  # not a function
            names.add(word)
    return names


def test_metric_names_parser() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, node) (rate(cosched_x_bucket{node=~"$node"}'
        "[$__rate_interval]))) / on (node) group_left node:y:avg1m > bool 0"
    )
    assert metric_names(expr) == {"cosched_x_bucket", "node:y:avg1m"}


def test_committed_json_is_what_the_generator_makes() -> None:
    want = gf.render()
    have = {p.name for p in DASH_DIR.glob("*.json")}
    assert have == set(want), f"grafana/dashboards/ holds {sorted(have)}; run {REGENERATE}"
    for name, text in want.items():
        assert (DASH_DIR / name).read_text() == text, (
            f"grafana/dashboards/{name} differs from testbed/grafana.py: run {REGENERATE}"
        )
    assert gf.stale(DASH_DIR) == []


def test_four_dashboards_with_unique_uids() -> None:
    dashes = _dashboards()
    uids = [d["uid"] for d in dashes.values()]
    assert len(dashes) == 4
    assert len(set(uids)) == len(uids), uids
    for d in dashes.values():
        assert d.get("id") is None  # Grafana assigns it; a fixed id clashes on import
        assert "cosched" in d["tags"]


def test_panel_ids_are_unique_within_a_dashboard() -> None:
    for name, d in _dashboards().items():
        ids = [p["id"] for p in _panels(d)]
        assert all(isinstance(i, int) and i > 0 for i in ids), (name, ids)
        assert len(set(ids)) == len(ids), (name, ids)


def _provisioned_datasource() -> dict[str, Any]:
    doc = yaml.safe_load((PROVISIONING / "datasources/prometheus.yml").read_text())
    assert doc["apiVersion"] == 1
    (ds,) = doc["datasources"]
    return dict(ds)


def test_every_panel_and_query_uses_the_provisioned_datasource() -> None:
    ds = _provisioned_datasource()
    assert ds["uid"] == gf.DATASOURCE_UID and ds["type"] == "prometheus"
    for name, d in _dashboards().items():
        for p in _panels(d):
            if p["type"] == "row":
                continue
            assert p["datasource"] == {"type": "prometheus", "uid": ds["uid"]}, (name, p["title"])
            assert p["targets"], (name, p["title"])
            for t in p["targets"]:
                assert t["datasource"]["uid"] == ds["uid"], (name, p["title"])
        for v in d["templating"]["list"]:
            assert v["datasource"]["uid"] == ds["uid"], (name, v["name"])


def test_every_query_reads_only_exported_metrics_or_recording_rules() -> None:
    known = _exported() | _recording_rules() | {"up"}
    assert "cosched_cdc_boosts_total" in known  # the CDC families were collected
    seen: set[str] = set()
    for name, d in _dashboards().items():
        exprs = [(p["title"], t["expr"]) for p in _panels(d) for t in p.get("targets") or []]
        exprs += [(f"${v['name']}", v["query"]) for v in d["templating"]["list"]]
        for title, expr in exprs:
            names = metric_names(re.sub(r"label_values\((.*),\s*\w+\)$", r"\1", expr))
            assert names, (name, title, expr)
            unknown = names - known
            assert not unknown, f"{name}, {title!r}: {sorted(unknown)} not exported: {expr}"
            seen |= names
    # The must-haves are on some panel.
    for must in (
        "node:cosched_agent_node_cpu_utilization_ratio:avg1m",
        "cosched_controller_jobs",
        "cosched_controller_queue_length",
        "cosched_controller_slot_matched_ratio",
        "cosched_controller_matching_success_ratio",
        "cluster:cosched_controller_quantum_skew_seconds:p99_rate1m",
        "node:cosched_cdc_boost_conflicts_per_decision_points:ratio_rate1m",
        "cluster:cosched_message_delay_seconds:p99_rate1m",
        "cosched_cdc_boosts_total",
    ):
        assert must in seen, must


def test_every_variable_a_query_uses_is_defined() -> None:
    for name, d in _dashboards().items():
        defined = {v["name"] for v in d["templating"]["list"]} | set(gf.BUILTIN_VARS)
        for p in _panels(d):
            for t in p.get("targets") or []:
                used = set(re.findall(r"\$\{?(\w+)", t["expr"]))
                assert used <= defined, (name, p["title"], used - defined)


def test_experiment_dashboard_has_a_run_variable() -> None:
    d = _dashboards()["experiment.json"]
    run = next(v for v in d["templating"]["list"] if v["name"] == "run")
    # One run, the newest first; no "All" that would mix runs.
    assert run["multi"] is False and run["includeAll"] is False and run["sort"] == 2
    for p in _panels(d):
        for t in p.get("targets") or []:
            assert 'run=~"$run"' in t["expr"], p["title"]


def _expand(value: str, env: dict[str, str]) -> str:
    """Grafana's expansion of $NAME / ${NAME} in provisioning files."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1) or m.group(2)
        assert key in env, f"{key} is not set by `cosched monitor up --grafana`"
        return env[key]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, value)


def test_provisioning_parses_and_points_at_existing_paths() -> None:
    env = mon.grafana_env("http://127.0.0.1:9090")
    ds = _provisioned_datasource()
    assert ds["access"] == "proxy" and ds["isDefault"] is True
    assert _expand(ds["url"], env) == "http://127.0.0.1:9090"
    doc = yaml.safe_load((PROVISIONING / "dashboards/cosched.yml").read_text())
    assert doc["apiVersion"] == 1
    (prov,) = doc["providers"]
    assert prov["type"] == "file"
    path = Path(_expand(prov["options"]["path"], env))
    assert path.resolve() == DASH_DIR.resolve() and sorted(path.glob("*.json"))
    # monitor up hands Grafana this very directory.
    assert mon.GRAFANA_PROVISIONING == PROVISIONING
    assert (mon.GRAFANA_PROVISIONING / "datasources").is_dir()


def test_generator_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gf.main(["--out", str(tmp_path), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert gf.main(["--out", str(tmp_path)]) == 0
    assert gf.main(["--out", str(tmp_path), "--check"]) == 0


def test_monitor_up_labels_every_target_with_the_run_id() -> None:
    """The experiment dashboard's $run is the run label `monitor up` puts on every target."""
    agents = [mon.Target(mon.AGENT_JOB, f"10.212.0.{i + 1}:9096", f"n{i}") for i in range(2)]
    ctl = mon.Target(mon.CONTROLLER_JOB, "10.212.0.254:9097", mon.CONTROLLER_NODE)
    doc = yaml.safe_load(mon.render_config(agents, ctl, run_id="exp-1"))
    groups = [sc for job in doc["scrape_configs"] for sc in job["static_configs"]]
    assert len(groups) == 3 and all(g["labels"]["run"] == "exp-1" for g in groups)
    plain = yaml.safe_load(mon.render_config(agents, ctl))
    assert all(
        "run" not in sc["labels"] for j in plain["scrape_configs"] for sc in j["static_configs"]
    )
    assert re.fullmatch(r"\d{8}T\d{6}Z", mon.default_run_id())
