"""Controller core with a fake agent pool: specs, lifecycle, classes, limits, measurements."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from controller import classes
from controller.jobs import RequestError, SpecError, parse_spec
from controller.operator import ConfigError, OperatorConfig
from controller.quantum import job_utilization
from controller.telemetry import command_skew_s
from tests.support.controller_fakes import BUSY, make, step


# ---- spec validation ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"argv": ["x"]}, "missing field 'size'"),
        ({"size": 1}, "missing field 'argv'"),
        ({"size": 0, "argv": ["x"]}, "spec.size"),
        ({"size": "2", "argv": ["x"]}, "spec.size"),
        ({"size": 3, "argv": ["x"]}, "exceeds the cluster's 2 node"),
        ({"size": 1, "argv": []}, "spec.argv"),
        ({"size": 1, "argv": [1]}, "spec.argv"),
        ({"size": 1, "argv": ["x"], "class": "vip"}, "unknown class 'vip'"),
        ({"size": 1, "argv": ["x"], "bogus": 1}, "unknown field(s) bogus"),
        ({"size": 1, "argv": ["x"], "env": {"COSCHED_JOB": "1"}}, "COSCHED_"),
        ({"size": 1, "argv": ["x"], "env": {"LD_PRELOAD": "/tmp/x.so"}}, "LD_PRELOAD: the dynamic"),
        ({"size": 1, "argv": ["x"], "estimate": -1}, "spec.estimate"),
        ({"size": 1, "argv": ["x"], "cwd": "rel"}, "absolute path"),
        ({"size": 1, "argv": ["x"], "exclusive": "yes"}, "spec.exclusive"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_specs_get_one_clear_error(spec: object, needle: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(spec, 2)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_good_spec_defaults() -> None:
    spec = parse_spec({"size": 2, "argv": ["a", "b"]}, 2)
    assert spec.job_class == "production" and spec.estimate > 0 and not spec.exclusive


# ---- lifecycle -------------------------------------------------------------------
def test_strict_gang_lifecycle_and_env() -> None:
    s, pool, clock = make()
    a = s.submit(BUSY, "alice")
    b = s.submit(BUSY, "bob")
    assert s.table.jobs[a].state == "frozen"  # launched frozen, placed in row 0
    step(s, clock, 4)
    # strict gang: one job per node per quantum, alternating
    for cmd in pool.commands:
        for jobs in cmd.values():
            assert len(jobs) <= 1
    ran = [next(iter(c["n0"])) for c in pool.commands]
    assert ran[:4] == [str(a), str(b), str(a), str(b)]
    env = [x["env"] for x in pool.launched if x["job_id"] == str(a)]
    assert [e["COSCHED_RANK"] for e in env] == ["0", "1"]
    assert {e["COSCHED_RANK0_ADDR"] for e in env} == {"10.0.0.1"}
    assert {e["COSCHED_SIZE"] for e in env} == {"2"}
    assert env[0]["COSCHED_PORT"] == str(20000 + a % 12000)
    # every rank runs as its submitter (agent/runas.py)
    assert {(x["job_id"], x["user"]) for x in pool.launched} == {(str(a), "alice"), (str(b), "bob")}
    assert s.table.jobs[a].cpu_ns > 0 and s.table.jobs[b].cpu_ns > 0
    pool.exit(a, 0)
    step(s, clock)
    assert s.table.jobs[a].state == "done" and s.table.jobs[a].exit_code == 0
    assert s.table.jobs[a].end_time is not None and s.table.jobs[a].wall_s(clock.t) > 0
    pool.exit(b, 3, nodes=["n1"])
    step(s, clock)
    assert s.table.jobs[b].state == "failed" and s.table.jobs[b].exit_code == 3
    assert ("n0", str(b)) in pool.killed  # the surviving rank is killed


def test_kill_queued_and_running() -> None:
    s, pool, clock = make()
    a = s.submit(BUSY, "alice")
    s.cfg.max_slots = 1
    s.apply_config()
    b = s.submit(BUSY, "alice")
    assert s.table.jobs[b].state == "queued"
    with pytest.raises(RequestError, match="belongs to 'alice'"):
        s.kill(b, "mallory", operator=False)
    assert s.kill(b, "alice", operator=False) == "killed"
    assert s.kill(a, "root", operator=True) == "killed"
    assert {("n0", str(a)), ("n1", str(a))} <= set(pool.killed)
    step(s, clock)
    assert s.table.jobs[a].state == "killed"


def test_launch_failure_fails_the_job_and_frees_the_matrix() -> None:
    s, pool, clock = make()
    pool.fail_launch_on = "n1"
    a = s.submit(BUSY, "alice")
    assert s.table.jobs[a].state == "failed" and "could not start on n1" in s.table.jobs[a].reason
    assert ("n0", str(a)) in pool.killed
    pool.fail_launch_on = None
    b = s.submit(BUSY, "alice")
    step(s, clock)
    assert s.table.jobs[b].state == "running"


# ---- classes ---------------------------------------------------------------------
def test_interactive_served_first_then_demoted() -> None:
    s, pool, clock = make()
    s.cfg.max_slots = 1
    s.apply_config()
    s.cfg.interactive_limit = 0.35
    first = s.submit(BUSY, "alice")
    prod = s.submit(BUSY, "alice")
    inter = s.submit(dict(BUSY, **{"class": "interactive"}), "bob")
    pool.exit(first)
    step(s, clock)
    assert s.table.jobs[inter].state == "running"  # overtook the earlier production job
    assert s.table.jobs[prod].state == "queued"
    step(s, clock, 5)
    assert s.table.jobs[inter].job_class == "production"  # demoted after the limit
    assert s.set_class(inter, "interactive", "bob", operator=False) == "interactive"
    assert s.table.jobs[inter].promotions == 1


def test_standby_runs_only_on_idle_nodes() -> None:
    s, pool, clock = make()
    sb = s.submit({"size": 1, "argv": ["x"], "class": "standby"}, "carol")
    prod = s.submit({"size": 1, "argv": ["x"]}, "alice")
    step(s, clock, 4)
    # the standby job's node also holds the production job in another row
    placed_sb = s.table.jobs[sb].nodes
    if placed_sb == s.table.jobs[prod].nodes:
        assert all(str(sb) not in c[placed_sb[0]] for c in pool.commands)
    pool.exit(prod)
    step(s, clock, 3)
    assert str(sb) in pool.commands[-1][s.table.jobs[sb].nodes[0]]


def test_filter_plan_benchmark_alone_and_standby_idle() -> None:
    node_jobs = ((1, 2), (1, 2), (3,))
    cls = {1: "benchmark", 2: "production", 3: "standby"}
    nodes = {1: (0, 1), 2: (0, 1), 3: (2,)}
    out, removed = classes.filter_plan(node_jobs, cls, nodes)
    assert out == ((1,), (1,), (3,)) and removed == {2}
    cls[4] = "production"
    nodes[4] = (2,)
    out, removed = classes.filter_plan(((1,), (1,), (3,)), cls, nodes)
    assert out == ((1,), (1,), ()) and removed == {3}


def test_benchmark_never_paired() -> None:
    s, pool, clock = make("paired-gang")
    s.submit({"size": 2, "argv": ["x"], "class": "benchmark"}, "alice")
    io = s.submit(BUSY, "bob")
    pool.busy[str(io)] = 0.05
    step(s, clock, 12)
    assert all(len(jobs) <= 1 for c in pool.commands for jobs in c.values())


def test_paired_gang_pairs_io_with_compute() -> None:
    s, pool, clock = make("paired-gang")
    cpu = s.submit(BUSY, "alice")
    io = s.submit(BUSY, "bob")
    pool.busy[str(io)] = 0.05
    pool.busy[str(cpu)] = 0.9  # barriers keep a compute job just under 100 %
    step(s, clock, 15)
    assert any(len(c["n0"]) == 2 for c in pool.commands[-5:])
    assert s.telemetry.matching_success_ratio() > 0
    assert s.last_utilization or s.telemetry.counters.quanta
    assert s.table.jobs[cpu].cpu_ns > s.table.jobs[io].cpu_ns > 0
    # the status's last quantum: what was measured, of the plan it was measured under
    from controller.api import _last_quantum

    lq = _last_quantum(s)
    assert s.measured_plan is not None and lq["slot"] == s.measured_plan.slot
    assert set(lq["utilization"]) <= {str(j) for j in lq["runnable"]}
    assert lq["utilization"]
    for j, u in lq["utilization"].items():  # the fake's CPU shares, as measured
        assert u == pytest.approx(pool.busy[j], abs=0.05)


def test_the_last_quantum_shows_each_rows_predicted_vector_under_nplus1() -> None:
    from controller.api import _last_quantum

    s, pool, clock = make("nplus1")
    a, b = s.submit(BUSY, "alice"), s.submit(BUSY, "bob")
    pool.busy[str(a)] = pool.busy[str(b)] = 0.5
    step(s, clock, 6)
    rows = _last_quantum(s)["row_demand"]
    assert sorted(j for r in rows.values() for j in r["jobs"]) == sorted([a, b])
    for r in rows.values():  # (cpu, disk, net); measured jobs are no longer "new" (1.0)
        assert len(r["demand"]) == 3 and r["demand"][0] == pytest.approx(0.5, abs=0.05)
    gang, _pool, _clock = make()
    assert "row_demand" not in _last_quantum(gang)  # strict gang predicts no vector


# ---- operator ------------------------------------------------------------------------
def test_operator_config_validation() -> None:
    cfg = OperatorConfig()
    with pytest.raises(ConfigError, match="quantum"):
        cfg.update({"quantum": 0.005})
    with pytest.raises(ConfigError, match="unknown setting"):
        cfg.update({"speed": 1})
    with pytest.raises(ConfigError, match="max_slots"):
        cfg.update({"max_slots": 0, "quantum": 0.5})
    assert cfg.quantum == 0.1  # all or nothing
    assert cfg.update({"user_limit": 2, "max_slots": None})["user_limit"] == 2


def test_user_limit() -> None:
    s, _pool, _clock = make()
    s.cfg.user_limit = 1
    s.submit(BUSY, "alice")
    with pytest.raises(SpecError, match="limit is 1"):
        s.submit(BUSY, "alice")
    s.submit(BUSY, "bob")


# ---- measurements --------------------------------------------------------------------
def test_utilization_is_normalised_by_capacity_and_ranks() -> None:
    # a compute-bound job on two nodes capped at half a CPU: ~1.0, not 0.5
    cpu = {"n0": {7: 50_000_000, 8: 5_000_000}, "n1": {7: 50_000_000}}
    elapsed = {"n0": 100_000_000, "n1": 100_000_000}
    util = job_utilization(cpu, elapsed, {"n0": 0.5, "n1": 0.5}, {7: ["n0", "n1"], 8: ["n0"]})
    assert util[7] == pytest.approx(1.0)
    assert util[8] == pytest.approx(0.1)
    # a node without data leaves the job out instead of under-reporting it
    assert job_utilization(cpu, {"n0": 100_000_000}, {}, {7: ["n0", "n1"]}) == {}


def test_skew_from_applied_instants() -> None:
    assert command_skew_s({"n0": 1_000_000, "n1": 1_250_000, "n2": 1_100_000}) == pytest.approx(
        250e-6
    )
    assert command_skew_s({"n0": 5}) is None
    s, pool, clock = make(n=3)
    pool.skew_ns = 40_000
    s.submit(BUSY, "alice")
    step(s, clock, 3)
    assert s.telemetry.skew_percentiles()["p99"] == pytest.approx(80e-6)


def test_utilization_fed_to_paired_predictor() -> None:
    s, _pool, clock = make("paired-gang", capacity=0.5)
    a = s.submit(BUSY, "alice")
    step(s, clock, 4)
    predictor = s.policy.predictor  # type: ignore[union-attr]
    assert predictor.history(a)[0] == pytest.approx(1.0)


def test_batch_runs_thawed_to_completion() -> None:
    s, pool, clock = make("easy")
    a = s.submit(BUSY, "alice")
    b = s.submit({"size": 1, "argv": ["x"]}, "bob")
    step(s, clock)
    assert s.table.jobs[a].state == "running" and s.table.jobs[b].state == "queued"
    assert all(not x["start_frozen"] for x in pool.launched)
    pool.exit(a)
    step(s, clock, 2)
    assert s.table.jobs[a].state == "done" and s.table.jobs[b].state == "running"


def test_metrics_exported_under_contract_names() -> None:
    from prometheus_client import generate_latest

    from controller.metrics import ControllerMetrics

    s, pool, clock = make("paired-gang", n=3)
    pool.skew_ns = 20_000
    s.submit(BUSY, "alice")
    step(s, clock, 3)
    m = ControllerMetrics()
    m.update(s)
    text = generate_latest(m.registry).decode()
    for name in (
        'cosched_controller_jobs{class="production",state="running"} 1.0',
        "cosched_controller_queue_length 0.0",
        "cosched_controller_matching_success_ratio",
        "cosched_controller_quantum_skew_seconds_bucket",
        "cosched_controller_cluster_cpu_utilization_ratio",
        "cosched_controller_quanta_total 3.0",
    ):
        assert name in text, name


def test_node_capacity_from_each_cluster_cpu_mechanism() -> None:
    from controller.daemon import nodes_from_cluster

    def state(cpu: dict[str, object]) -> dict[str, object]:
        nodes = [{"name": f"n{i}", "ctl_ip": f"10.212.0.{i + 1}"} for i in range(2)]
        return {"nodes": nodes, "cpu": cpu}

    shared = {"mechanism": "shared", "cpus_per_node": 0.5, "per_node": [{"cpus": "0"}] * 2}
    assert [n.capacity for n in nodes_from_cluster(state(shared))] == [0.5, 0.5]
    cfs = {"mechanism": "cfs", "per_node": [{"quota_us": 2500, "period_us": 10000}] * 2}
    assert [n.capacity for n in nodes_from_cluster(state(cfs))] == [0.25, 0.25]
    cpuset = {"mechanism": "cpuset", "per_node": [{"cpus": "0-1"}, {"cpus": "2-3"}]}
    assert [n.capacity for n in nodes_from_cluster(state(cpuset))] == [2.0, 2.0]


def test_a_node_that_keeps_failing_is_logged_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from controller.nodes import QuantumResult
    from controller.quantum import WARN_EVERY_S

    s, pool, clock = make()
    s.submit(BUSY, "alice")
    inner = pool.quantum
    down = {"on": True}

    def flaky(q: int, commands: Any, at: float | None = None, **kw: Any) -> Any:
        out = inner(q, commands, at, **kw)
        if down["on"]:
            out["n1"] = QuantumResult("n1", None, "agent n1 is not connected")
        return out

    pool.quantum = flaky  # type: ignore[method-assign]
    quanta = int(WARN_EVERY_S / 0.1 * 2.5)  # two and a half report intervals
    with caplog.at_level("INFO", logger="controller.quantum"):
        step(s, clock, quanta)
        down["on"] = False
        step(s, clock, 2)
    assert s.telemetry.counters.failed_commands == quanta  # every failure still counted
    warned = [r for r in caplog.records if "on n1: agent n1 is not connected" in r.getMessage()]
    assert len(warned) == 3, [r.getMessage() for r in warned]  # at 0, 30 and 60 s
    assert "failed quanta so far" in warned[1].getMessage()
    assert any(f"n1 answers again after {quanta} failed" in r.getMessage() for r in caplog.records)


def test_run_as_is_for_operators_only_and_reaches_the_launch() -> None:
    s, pool, clock = make()
    spec = {"size": 1, "argv": ["x"], "run_as": "root"}
    with pytest.raises(SpecError, match="only operators may run a job as another user"):
        s.submit(spec, "alice")
    assert s.table.jobs == {}  # nothing queued
    # naming oneself is allowed for anyone (it changes nothing)
    mine = s.submit({**spec, "run_as": "alice"}, "alice")
    ops = s.submit({**spec, "run_as": "root"}, "ops", operator=True)
    plain = s.submit({"size": 1, "argv": ["x"]}, "root")
    step(s, clock, 3)
    users = {x["job_id"]: x["user"] for x in pool.launched}
    assert users == {str(mine): "alice", str(ops): "root", str(plain): "root"}
    rec = s.table.jobs[ops].record(clock())
    assert rec["user"] == "ops" and rec["run_as"] == "root"
    with pytest.raises(SpecError, match=r"spec\.run_as: want a user name"):
        s.submit({**spec, "run_as": "no body"}, "ops", operator=True)


class _ReadKeys(dict[str, Any]):
    """An ack that records which of its fields are read."""

    read: ClassVar[set[str]] = set()

    def get(self, key: str, default: Any = None) -> Any:
        _ReadKeys.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        _ReadKeys.read.add(key)
        return super().__getitem__(key)


def test_the_scheduler_reads_no_ack_field_a_relay_drops() -> None:
    """The ack folder (controller/acks.py, at a relay too) reads only ``ACK_FIELDS``."""
    from controller.nodes import ACK_FIELDS, QuantumResult

    s, pool, clock = make("paired-gang")
    pool.late, pool.lateness_s = True, 0.003
    inner = pool.quantum

    def recording(q: int, commands: Any, at: float | None = None, **kw: Any) -> Any:
        out = inner(q, commands, at, **kw)
        for node, r in out.items():
            ack = _ReadKeys(r.ack or {}, errors={"7": "weight failed: test"})
            out[node] = QuantumResult(node, ack, r.error, r.sent_ns)
        return out

    pool.quantum = recording  # type: ignore[method-assign]
    _ReadKeys.read = set()
    s.submit(BUSY, "alice")
    s.submit(BUSY, "bob")
    for k in range(6):
        clock.t += 0.1
        s.tick(at=clock.t + 0.02 if k % 2 else None)  # both modes
    assert {"cpu_ns", "applied_monotonic_ns", "mode", "late", "errors"} <= _ReadKeys.read
    assert _ReadKeys.read <= ACK_FIELDS, sorted(_ReadKeys.read - ACK_FIELDS)


def test_disk_bytes_in_acks_reach_nplus1_as_a_disk_demand() -> None:
    """issue 31: the agents' block I/O bytes / (quantum x disk_bps) is the disk component of
    the demand vector the controller gives N + 1 gangs; a job moving none reads 0."""
    s, pool, clock = make("nplus1", params={"n": 1, "devices": "cpu,disk"})
    s.cfg.disk_bps = 100e6
    disk = s.submit(BUSY, "alice")
    cpu = s.submit(BUSY, "bob")
    pool.disk_bps = {str(disk): 50e6}
    step(s, clock, 8)
    predictor = s.policy.predictor  # type: ignore[union-attr]
    assert predictor.history(disk, "disk")[0] == pytest.approx(0.5)
    assert predictor.history(cpu, "disk")[0] == 0.0
    assert s.last_devices[disk]["disk"] == pytest.approx(0.5)


def test_without_io_bytes_no_disk_is_observed() -> None:
    s, _pool, clock = make("nplus1", params={"n": 1, "devices": "cpu,disk"})
    a = s.submit(BUSY, "alice")
    step(s, clock, 4)
    assert "disk" not in s.last_devices[a]
    assert s.policy.predictor.history(a, "disk")[0] == 0.0  # type: ignore[union-attr]


def test_net_bytes_in_acks_reach_nplus1_as_a_net_demand() -> None:
    s, pool, clock = make("nplus1", params={"n": 2})
    s.cfg.net_bps = 100e6
    a = s.submit(BUSY, "alice")
    pool.net_bps = {str(a): 25e6}
    step(s, clock, 6)
    assert s.policy.predictor.history(a, "net")[0] == pytest.approx(0.25)  # type: ignore[union-attr]
    assert "disk" not in s.last_devices[a]  # no io_bytes in these acks


def test_quanta_ask_the_agents_for_the_devices_the_policy_reads() -> None:
    """issue 32: strict gang reads only the CPU, so its quanta ask for no device's bytes
    (the agents then read none); N + 1 gangs asks for its own; ``--ack-devices all``
    asks for every one, as before."""
    s, pool, clock = make("gang")
    s.cfg.disk_bps = 100e6
    a = s.submit(BUSY, "alice")
    pool.disk_bps = {str(a): 50e6}  # an agent asked would report it
    step(s, clock, 4)
    assert pool.measures[-1] == [] and "disk" not in s.last_devices[a]
    s.ack_all_devices = True
    step(s, clock, 3)
    assert pool.measures[-1] is None and s.last_devices[a]["disk"] == pytest.approx(0.5)
    s2, pool2, clock2 = make("nplus1", params={"n": 1, "devices": "cpu,disk"})
    s2.submit(BUSY, "alice")
    step(s2, clock2, 2)
    assert pool2.measures[-1] == ["disk"]
