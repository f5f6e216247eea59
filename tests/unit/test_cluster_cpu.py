"""Per-node CPU capacity planning and its cgroup writes (fake cgroupfs)."""

from __future__ import annotations

import pytest

from testbed.cluster import cpu
from tests.unit.test_cluster_fakes import FakeCgroupFS


def test_cpu_list() -> None:
    assert cpu.cpu_list([0, 1, 2, 5]) == "0-2,5"
    assert cpu.cpu_list([3]) == "3"
    assert cpu.cpu_list([]) == ""


def test_cpuset_when_whole_cores_fit() -> None:
    plan = cpu.plan_cpu(2, 1, [0, 1])
    assert plan.mechanism == "cpuset"
    assert [n.cpus for n in plan.per_node] == ["0", "1"]
    plan = cpu.plan_cpu(2, 2, [0, 1, 2, 3])
    assert [n.cpus for n in plan.per_node] == ["0-1", "2-3"]
    assert cpu.controllers_for(plan) == ("cpu", "cpuacct", "freezer", "cpuset")


def test_cfs_otherwise() -> None:
    for nodes, f in ((4, 1.0), (2, 0.5), (1, 1.5)):
        plan = cpu.plan_cpu(nodes, f, [0, 1])
        assert plan.mechanism == "cfs"
        assert all(n.period_us == 10_000 and n.quota_us == f * 10_000 for n in plan.per_node)
        assert "cpuset" not in cpu.controllers_for(plan)


def test_unlimited() -> None:
    plan = cpu.plan_cpu(3, None, [0, 1])
    assert plan.mechanism == "none" and len(plan.per_node) == 3
    assert plan.describe(0) == "unlimited"


@pytest.mark.parametrize("f", [0, -1, 3, float("nan"), 0.05])
def test_impossible(f: float) -> None:
    with pytest.raises(ValueError):
        cpu.plan_cpu(2, f, [0, 1])


def test_apply_cfs_and_cpuset() -> None:
    fs = FakeCgroupFS()
    plan = cpu.plan_cpu(2, 0.25, [0, 1])
    fs.mkdir("cpu", "cosched/n0")
    cpu.apply_node(fs, plan, 0, "cosched/n0")
    assert fs.read("cpu", "cosched/n0", "cpu.cfs_quota_us") == "2500"
    assert "cfs_quota_us=2500" in cpu.read_back(fs, plan, "cosched/n0")

    plan = cpu.plan_cpu(2, 1, [0, 1])
    cpu.prepare_cpuset_root(fs)
    fs.mkdir("cpuset", "cosched/n1")
    cpu.apply_node(fs, plan, 1, "cosched/n1")
    assert fs.read("cpuset", "cosched/n1", "cpuset.cpus") == "1"
    assert fs.read("cpuset", "cosched/n1", "cpuset.mems") == "0"
    assert cpu.CpuPlan.from_dict(plan.to_dict()) == plan


def test_grant_rt_runtime_splits_half_the_root_budget() -> None:
    fs = FakeCgroupFS()
    assert cpu.grant_rt_runtime(fs, ["n0"]) is None  # no RT group scheduling
    fs.tree["cpu"][""]["knobs"]["cpu.rt_runtime_us"] = "950000"
    for n in ("n0", "n1"):
        fs.mkdir("cpu", f"cosched/{n}")
    assert cpu.grant_rt_runtime(fs, ["n0", "n1"]) == 237_500
    assert fs.read("cpu", "cosched", "cpu.rt_runtime_us") == "475000"
    assert fs.read("cpu", "cosched/n1", "cpu.rt_runtime_us") == "237500"


def test_shared_packs_k_nodes_per_core_without_quota() -> None:
    plan = cpu.plan_cpu(4, 0.5, [0, 1], "shared")
    assert plan.mechanism == "shared"
    assert [n.cpus for n in plan.per_node] == ["0", "0", "1", "1"]
    assert all(n.quota_us is None for n in plan.per_node)
    assert "cpuset" in cpu.controllers_for(plan)
    assert plan.describe(2) == "cpuset cpus=1 shared by 2 nodes"
    plan = cpu.plan_cpu(3, 0.25, [0, 1], "shared")
    assert [n.cpus for n in plan.per_node] == ["0", "0", "0"]
    fs = FakeCgroupFS()
    cpu.prepare_cpuset_root(fs)
    fs.mkdir("cpuset", "cosched/n0")
    cpu.apply_node(fs, plan, 0, "cosched/n0")
    assert fs.read("cpuset", "cosched/n0", "cpuset.cpus") == "0"


@pytest.mark.parametrize(
    ("nodes", "f", "mechanism", "why"),
    [
        (4, 0.3, "shared", "1/k"),
        (4, 1.0, "shared", "1/k"),
        (5, 0.5, "shared", "need 3 cores"),
        (4, 0.5, "cpuset", "whole cores"),
        (2, 0.5, "bogus", "one of"),
        (2, None, "shared", "needs --cpus-per-node"),
    ],
)
def test_mechanism_errors(nodes: int, f: float | None, mechanism: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        cpu.plan_cpu(nodes, f, [0, 1], mechanism)


def test_explicit_cfs_even_when_cores_fit() -> None:
    assert cpu.plan_cpu(2, 1, [0, 1], "cfs").mechanism == "cfs"


def test_cfs_period_is_configurable_within_kernel_limits() -> None:
    plan = cpu.plan_cpu(4, 0.5, [0, 1], "cfs", period_us=2000)
    assert {(n.quota_us, n.period_us) for n in plan.per_node} == {(1000, 2000)}
    with pytest.raises(ValueError, match="minimum quota"):
        cpu.plan_cpu(4, 0.5, [0, 1], "cfs", period_us=1000)
    with pytest.raises(ValueError, match=r"1000\.\.1000000"):
        cpu.plan_cpu(4, 0.5, [0, 1], "cfs", period_us=500)
