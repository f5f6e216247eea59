"""``cosched monitor`` end to end on a real 2-node cluster (root).

Phase 1, paired gang with the controller's exporter on: ``cosched monitor up``,
a small job, then until ``up`` is 1 for both agents and the controller, and
until every recording rule of the utilization, matching and skew groups has
data. Phase 2, the controller restarted under dcs (the agents run the local
scheme and export the CDC counters and the message delay): the cdc group's
rules have data. Then ``cosched monitor down`` leaves no process and no file.
The Grafana dashboards' queries are checked against a live run, with a
workload made for them, by test_dashboards_live.py. Everything is torn down on
failure too (the fixture checks the host is clean).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from common.names import CONTROLLER_METRICS_PORT
from common.ports import free_port
from testbed import monitor as mon
from tests.support.live import Live
from tests.support.monitor import (
    REPO,
    SHORT,
    Prom,
    _assert_nothing_left,
    _cli,
    _groups,
    _synthetic,
    _tear_down,
)


@pytest.mark.root
def test_monitor_up_scrapes_the_cluster_and_down_leaves_nothing(
    root_cluster_env: Path, tmp_path: Path
) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not installed")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores: one per node")
    lv = Live(root_cluster_env, tmp_path)
    env = dict(os.environ, COSCHED_STATE_DIR=str(root_cluster_env), COSCHED_RUN_DIR=str(tmp_path))
    port = free_port()
    paths = mon.monitor_paths(str(root_cluster_env))
    daemon: mon.Daemon | None = None
    groups = _groups()
    try:
        lv.up()
        host_ip = lv.st.addresses["host_ctl_ip"]
        metrics = ["--metrics", f"{host_ip}:{CONTROLLER_METRICS_PORT}"]
        lv.start("paired-gang", *metrics, quantum=0.1)

        t0 = time.monotonic()
        out = _cli("monitor", "up", "--port", str(port), "--run-dir", str(tmp_path), env=env)
        print(out)
        daemon = mon.read_pidfile(paths.pidfile)
        assert daemon is not None and mon.alive(daemon)
        assert f"http://127.0.0.1:{port}" in out
        assert f"{host_ip}:{CONTROLLER_METRICS_PORT}" in out and "10.212.0.2:9096" in out
        prom = Prom(daemon.url)
        lv.req("submit", spec={"size": 2, "argv": SHORT, "name": "m"})

        up, _ = prom.wait("up == 1", 60, ok=lambda r: len(r) == 3)  # 2 agents + the controller
        took = time.monotonic() - t0
        print(f"all 3 targets up {took:.1f} s after `cosched monitor up` began")
        assert {(s["metric"]["job"], s["metric"]["node"]) for s in up} == {
            ("cosched-agent", "n0"),
            ("cosched-agent", "n1"),
            ("cosched-controller", "host"),
        }
        status = _cli("monitor", "status", env=env)
        assert status.count(" up") >= 3, status

        for group in ("cosched-utilization", "cosched-matching", "cosched-skew"):
            for rule in groups[group]:
                res, waited = prom.wait(rule, 60)
                values = [s["value"][1] for s in res]
                print(f"{rule}: {values} ({waited:.1f} s)")
        # Per-node series carry the node's label, from the target or the agent.
        # (the rule may have one node's series before the other's: on a busy host the
        # first evaluation after n1's first scrape came later, CI 2026-11-25)
        nodes, _ = prom.wait(
            "node:cosched_agent_node_cpu_utilization_ratio:avg1m",
            60,
            ok=lambda r: {s["metric"]["node"] for s in r} >= {"n0", "n1"},
        )
        assert {s["metric"]["node"] for s in nodes} == {"n0", "n1"}
        assert not prom.query('{__name__=~".+", exported_node!=""}')

        # Phase 2: a communication-driven scheme, for the CDC metrics.
        time.sleep(max(0.0, 12 - (time.monotonic() - t0)))  # let the short job end
        lv.stop()
        lv.start("dcs", "--mpl", "2", *metrics, quantum=0.1)
        lv.req("submit", spec={"size": 2, "argv": _synthetic(400), "name": "c", "cwd": str(REPO)})
        for rule in groups["cosched-cdc"]:
            res, waited = prom.wait(rule, 90)
            print(f"{rule}: {[s['value'][1] for s in res]} ({waited:.1f} s)")
    finally:
        _tear_down(env, root_cluster_env, lv)
    _assert_nothing_left(paths, daemon)
