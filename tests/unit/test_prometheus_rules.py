"""prometheus/: promtool check config, check rules and the rule unit tests pass, and the
rules only name metrics our exporters serve (or the recording rules make)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "prometheus"


def test_every_alert_and_group_has_a_unit_test() -> None:
    alerts = re.findall(r"^\s*- alert: (\S+)", (ROOT / "rules/alerts.yml").read_text(), re.M)
    groups = re.findall(r"^\s*- name: (\S+)", (ROOT / "rules/recording.yml").read_text(), re.M)
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("*.yml"))
    assert len(alerts) >= 5 and len(groups) >= 4
    for alert in alerts:
        assert f"alertname: {alert}" in tests, alert
    for group in groups:
        assert f"- name: {group}" in tests, group


def test_every_alert_has_severity_summary_description() -> None:
    text = (ROOT / "rules/alerts.yml").read_text()
    blocks = text.split("- alert: ")[1:]
    for block in blocks:
        assert re.search(r"severity: (critical|warning)", block), block
        assert "summary:" in block and "description:" in block, block


def test_rules_name_only_metrics_that_exist() -> None:
    """Every cosched_* series a rule reads is served by an exporter (a typo would
    otherwise be an empty graph and an alert that never fires)."""
    repo = ROOT.parent
    exported = set()
    for src in ("agent/metrics.py", "controller/metrics.py"):
        exported |= set(re.findall(r'"(cosched_[a-z_]+)"', (repo / src).read_text()))
    suffixes = ("_total", "_bucket", "_sum", "_count")
    for path in (ROOT / "rules").glob("*.yml"):
        text = re.sub(r"record: \S+", "", path.read_text())
        for name in re.findall(r"(?<![:\w])(cosched_[a-z_]+)", text):
            base = name
            for s in suffixes:
                if base.endswith(s) and base.removesuffix(s) in exported:
                    base = base.removesuffix(s)
            assert base in exported, f"{path.name}: {name} is not exported"
