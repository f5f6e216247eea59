"""Per-node CPU capacity planning and its cgroup writes (fake cgroupfs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cgroups import Cgroups
from common.cgroups.fake import fake_v1
from testbed.cluster import cpu


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
    assert cpu.controllers_for(plan) == ("cpu", "cpuset")
    assert cpu.required_for(plan) == ("freezer", "cpuacct", "cpuset")


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


def _cg(tmp_path: Path, **kw: bool) -> tuple[Cgroups, object]:
    fs = fake_v1(tmp_path / "cg", **kw)
    return Cgroups(fs.layout(), fs=fs), fs


def test_apply_cfs_and_cpuset(tmp_path: Path) -> None:
    cg, fs = _cg(tmp_path)
    plan = cpu.plan_cpu(2, 0.25, [0, 1])
    cg.ensure_parent("cosched/n0", cpu.controllers_for(plan))
    cpu.apply_node(cg, plan, 0, "cosched/n0")
    assert fs.knob("cpu", "cosched/n0", "cpu.cfs_quota_us") == "2500"  # type: ignore[attr-defined]
    assert "cfs_quota_us=2500" in cpu.read_back(cg, plan, "cosched/n0")

    plan = cpu.plan_cpu(2, 1, [0, 1])
    cg.ensure_parent("cosched/n1", cpu.controllers_for(plan))
    cpu.apply_node(cg, plan, 1, "cosched/n1")
    assert fs.knob("cpuset", "cosched/n1", "cpuset.cpus") == "1"  # type: ignore[attr-defined]
    assert fs.knob("cpuset", "cosched/n1", "cpuset.mems") == "0"  # type: ignore[attr-defined]
    assert cpu.CpuPlan.from_dict(plan.to_dict()) == plan


def test_grant_rt_runtime_splits_half_the_root_budget(tmp_path: Path) -> None:
    cg, _ = _cg(tmp_path / "no-rt")
    assert cpu.grant_rt_runtime(cg, "cosched", [["cosched/n0"]]) is None  # no RT group sched
    cg, fs = _cg(tmp_path, rt=True)
    for n in ("n0", "n1"):
        cg.ensure_parent(f"cosched/{n}")
        cg.create(f"cosched/{n}/agent")
    groups = [[f"cosched/{n}", f"cosched/{n}/agent"] for n in ("n0", "n1")]
    assert cpu.grant_rt_runtime(cg, "cosched", groups) == 237_500
    assert fs.knob("cpu", "cosched", "cpu.rt_runtime_us") == "475000"  # type: ignore[attr-defined]
    assert fs.knob("cpu", "cosched/n1", "cpu.rt_runtime_us") == "237500"  # type: ignore[attr-defined]
    assert fs.knob("cpu", "cosched/n1/agent", "cpu.rt_runtime_us") == "237500"  # type: ignore[attr-defined]


def test_shared_packs_k_nodes_per_core_without_quota(tmp_path: Path) -> None:
    plan = cpu.plan_cpu(4, 0.5, [0, 1], "shared")
    assert plan.mechanism == "shared"
    assert [n.cpus for n in plan.per_node] == ["0", "0", "1", "1"]
    assert all(n.quota_us is None for n in plan.per_node)
    assert "cpuset" in cpu.controllers_for(plan)
    assert plan.describe(2) == "cpuset cpus=1 shared by 2 nodes"
    plan = cpu.plan_cpu(3, 0.25, [0, 1], "shared")
    assert [n.cpus for n in plan.per_node] == ["0", "0", "0"]
    cg, fs = _cg(tmp_path)
    cg.ensure_parent("cosched/n0", cpu.controllers_for(plan))
    cpu.apply_node(cg, plan, 0, "cosched/n0")
    assert fs.knob("cpuset", "cosched/n0", "cpuset.cpus") == "0"  # type: ignore[attr-defined]


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


def test_speeds_give_each_node_its_share_by_cfs_bandwidth() -> None:
    """Heterogeneous nodes (Yu & Byun 2011 §5.1): node i gets F x speed_i of a CPU."""
    speeds = cpu.parse_speeds("2x1,2x0.643", 4)
    assert speeds == (1.0, 1.0, 0.643, 0.643)
    plan = cpu.plan_cpu(4, 0.5, [0, 1], speeds=speeds)
    assert plan.mechanism == "cfs" and plan.speeds == speeds
    assert [n.quota_us for n in plan.per_node] == [5000, 5000, 3215, 3215]
    assert "speed 0.643" in plan.describe(3)
    assert cpu.CpuPlan.from_dict(plan.to_dict()) == plan
    assert cpu.parse_speeds("paper", 16) == (1.0,) * 7 + (1.8 / 2.8,) * 9


@pytest.mark.parametrize(
    ("text", "nodes", "msg"),
    [
        ("1,1,1", 4, "gives 3 speeds for 4 nodes"),
        ("1,x", 2, "give one speed per node"),
        ("1,1.5", 2, r"in \(0, 1\]"),
    ],
)
def test_bad_speeds_are_one_line(text: str, nodes: int, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        cpu.parse_speeds(text, nodes)


def test_speeds_need_a_capacity_and_bandwidth_limits() -> None:
    with pytest.raises(ValueError, match="needs --cpus-per-node"):
        cpu.plan_cpu(2, None, [0, 1], speeds=(1.0, 0.5))
    with pytest.raises(ValueError, match="--cpu-mechanism cfs or auto, not shared"):
        cpu.plan_cpu(2, 0.5, [0, 1], "shared", speeds=(1.0, 0.5))
    with pytest.raises(ValueError, match="below the CFS minimum quota"):
        cpu.plan_cpu(2, 0.1, [0, 1], speeds=(1.0, 0.5))
