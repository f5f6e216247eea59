"""Per-node CPU capacity: cpuset where whole cores suffice, else CFS bandwidth.

``--cpus-per-node F``:

* ``F`` a whole number and ``nodes * F <= cores``: each node gets its own
  ``F`` cores through cpuset (exclusive in practice, no throttling jitter).
* otherwise: CFS bandwidth with a short period, 10 ms, quota ``F * 10 ms``.
  A short period keeps a node's CPU share smooth at quantum scale (the
  default 100 ms period would let a node run flat out for 100 ms and then
  stall; the coscheduling quanta are tens of ms). Platform measurement:
  quota 2500/10000 gives 0.249 CPU.
* not given: no limit (mechanism ``"none"``).
* ``--speeds s0,s1,...`` (heterogeneous nodes, Yu & Byun 2011 §5.1's 2.8 and
  1.8 GHz machines): node i gets ``F * s_i`` of a CPU, always by CFS
  bandwidth (a quota per node; cpuset can only give whole or shared cores).

``mechanism="shared"`` (``--cpu-mechanism shared``) picks instead, for
``F = 1/k``, a cpuset of one core shared by ``k`` nodes with equal shares and
no quota: under contention each node gets ``F`` of its core, but nothing is
throttled, so a process that wakes up (an I/O-bound rank back from its
device) runs at once instead of waiting out a throttled period. CFS
bandwidth delays such wake-ups by up to ``(1 - F)`` of the period whenever a
CPU-bound neighbour on the node has used the quota — which is exactly the
situation paired gang scheduling creates. Measured on the paired-vs-gang
experiment: see docs/cluster.md.

Planning is pure; :func:`apply_node` does the writes through the one cgroup
layer (common/cgroups), which maps them onto v1 files (cpuset.cpus,
cpu.cfs_quota_us) or v2 files (cpuset.cpus, cpu.max) as the host has them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from common.cgroups import Cgroups
from common.cpus import format_cpu_list

CpuMechanism = Literal["none", "cpuset", "shared", "cfs"]
MECHANISMS = ("auto", "cpuset", "shared", "cfs")
CFS_PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # kernel minimum for cfs_quota_us


@dataclass(frozen=True)
class NodeCpu:
    cpus: str | None = None  # cpuset list, e.g. "0-1"
    quota_us: int | None = None
    period_us: int | None = None


@dataclass(frozen=True)
class CpuPlan:
    mechanism: CpuMechanism
    cpus_per_node: float | None
    per_node: tuple[NodeCpu, ...]
    speeds: tuple[float, ...] | None = None  # per node, of cpus_per_node (heterogeneous)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "cpus_per_node": self.cpus_per_node,
            "per_node": [asdict(n) for n in self.per_node],
            "speeds": list(self.speeds) if self.speeds is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CpuPlan:
        sp = d.get("speeds")
        return cls(
            mechanism=d["mechanism"],
            cpus_per_node=d.get("cpus_per_node"),
            per_node=tuple(NodeCpu(**n) for n in d.get("per_node", [])),
            speeds=tuple(float(x) for x in sp) if sp else None,
        )

    def describe(self, index: int) -> str:
        if self.mechanism == "none":
            return "unlimited"
        n = self.per_node[index]
        if self.mechanism == "cpuset":
            return f"cpuset cpus={n.cpus}"
        if self.mechanism == "shared":
            return f"cpuset cpus={n.cpus} shared by {round(1 / (self.cpus_per_node or 1))} nodes"
        speed = f" (speed {self.speeds[index]:g})" if self.speeds else ""
        return f"cfs quota={n.quota_us}us period={n.period_us}us{speed}"


def cpu_list(cpus: list[int]) -> str:
    """Format CPU numbers the way cpuset.cpus wants them: ``[0,1,2,5] -> "0-2,5"``."""
    return format_cpu_list(cpus)


def parse_speeds(text: str, nodes: int) -> tuple[float, ...]:
    """``--speeds``: ``1,1,0.643,0.643``, groups ``2x1,2x0.643``, or ``paper`` (Yu & Byun's
    7 fast nodes at 1 and the rest at 1.8/2.8). ValueError naming what is wrong."""
    s = text.strip()
    if s == "paper":
        fast = min(7, nodes)
        return (1.0,) * fast + (1.8 / 2.8,) * (nodes - fast)
    out: list[float] = []
    for part in filter(None, (x.strip() for x in s.split(","))):
        n, sep, v = part.partition("x")
        try:
            out += [float(v)] * int(n) if sep else [float(part)]
        except ValueError:
            raise ValueError(
                f"--speeds {text!r}: give one speed per node (e.g. 1,1,0.643,0.643), "
                "NxSPEED groups or paper"
            ) from None
    if len(out) != nodes:
        raise ValueError(
            f"--speeds gives {len(out)} speeds for {nodes} nodes: give exactly one per node"
        )
    if any(not math.isfinite(v) or not 0 < v <= 1 for v in out):
        raise ValueError(f"--speeds {text!r}: each speed is a share of --cpus-per-node, in (0, 1]")
    return tuple(out)


def plan_cpu(
    nodes: int,
    cpus_per_node: float | None,
    cores: list[int],
    mechanism: str = "auto",
    period_us: int = CFS_PERIOD_US,
    speeds: tuple[float, ...] | None = None,
) -> CpuPlan:
    """Decide the mechanism and per-node limits. Raises ValueError on bad input.

    ``period_us`` is the CFS period (default 10 ms). A shorter one (down to the
    kernel's 1 ms) bounds how long a waking task waits while its node is
    throttled: at most ``(1 - F) * period``. ``speeds`` (one per node, in
    (0, 1]) make node i's capacity ``F * speeds[i]``, by CFS bandwidth.
    """
    if speeds is not None:
        return _plan_speeds(nodes, cpus_per_node, cores, mechanism, period_us, speeds)
    if not 1_000 <= period_us <= 1_000_000:
        raise ValueError(f"--cfs-period-us must be in 1000..1000000, got {period_us}")
    if mechanism not in MECHANISMS:
        raise ValueError(f"--cpu-mechanism must be one of {', '.join(MECHANISMS)}")
    if cpus_per_node is None:
        if mechanism != "auto":
            raise ValueError(f"--cpu-mechanism {mechanism} needs --cpus-per-node")
        return CpuPlan("none", None, tuple(NodeCpu() for _ in range(nodes)))
    f = float(cpus_per_node)
    if not math.isfinite(f) or f <= 0:
        raise ValueError(f"--cpus-per-node must be > 0 (got {cpus_per_node})")
    if f > len(cores):
        raise ValueError(f"--cpus-per-node {f:g} exceeds the {len(cores)} cores of this host")
    if mechanism == "shared":
        k = round(1 / f)
        if f >= 1 or abs(k * f - 1) > 1e-9:
            raise ValueError(
                f"--cpu-mechanism shared needs --cpus-per-node 1/k (0.5, 0.25, ...), got {f:g}"
            )
        if nodes > k * len(cores):
            raise ValueError(
                f"--cpu-mechanism shared: {nodes} nodes at {f:g} CPU need "
                f"{math.ceil(nodes / k)} cores, the host has {len(cores)}"
            )
        ordered = sorted(cores)
        return CpuPlan("shared", f, tuple(NodeCpu(cpus=str(ordered[i // k])) for i in range(nodes)))
    whole = f.is_integer() and nodes * int(f) <= len(cores)
    if mechanism == "cpuset" and not whole:
        raise ValueError(
            f"--cpu-mechanism cpuset needs whole cores: {nodes} x {f:g} on {len(cores)} cores"
        )
    if whole and mechanism in ("auto", "cpuset"):
        k = int(f)
        ordered = sorted(cores)
        per = tuple(NodeCpu(cpus=cpu_list(ordered[i * k : (i + 1) * k])) for i in range(nodes))
        return CpuPlan("cpuset", f, per)
    quota = round(f * period_us)
    if quota < MIN_QUOTA_US:
        raise ValueError(
            f"--cpus-per-node {f:g} with a {period_us} us period is below the CFS minimum "
            f"quota of {MIN_QUOTA_US} us"
        )
    per = tuple(NodeCpu(quota_us=quota, period_us=period_us) for _ in range(nodes))
    return CpuPlan("cfs", f, per)


def _plan_speeds(
    nodes: int,
    cpus_per_node: float | None,
    cores: list[int],
    mechanism: str,
    period_us: int,
    speeds: tuple[float, ...],
) -> CpuPlan:
    if cpus_per_node is None:
        raise ValueError("--speeds needs --cpus-per-node F (node i gets F x speed_i of a CPU)")
    if mechanism not in ("auto", "cfs"):
        raise ValueError(
            f"--speeds needs CPU bandwidth limits: --cpu-mechanism cfs or auto, not {mechanism}"
        )
    if len(speeds) != nodes:
        raise ValueError(f"--speeds gives {len(speeds)} speeds for {nodes} nodes")
    base = plan_cpu(nodes, cpus_per_node, cores, "cfs", period_us)
    per = []
    for s in speeds:
        quota = round(float(cpus_per_node) * s * period_us)
        if quota < MIN_QUOTA_US:
            raise ValueError(
                f"--speeds {s:g} x --cpus-per-node {cpus_per_node:g} with a {period_us} us period "
                f"is below the CFS minimum quota of {MIN_QUOTA_US} us: raise --cfs-period-us"
            )
        per.append(NodeCpu(quota_us=quota, period_us=period_us))
    return CpuPlan("cfs", base.cpus_per_node, tuple(per), tuple(speeds))


def controllers_for(plan: CpuPlan) -> tuple[str, ...]:
    """The cgroup resources a plan needs besides the freezer and accounting."""
    if plan.mechanism in ("cpuset", "shared"):
        return ("cpu", "cpuset")
    return ("cpu",)


def required_for(plan: CpuPlan) -> tuple[str, ...]:
    """Resources without which ``up`` must refuse (cpu only weights jobs otherwise)."""
    need = ["freezer", "cpuacct"]
    if plan.mechanism == "cfs":
        need.append("cpu")
    if plan.mechanism in ("cpuset", "shared"):
        need.append("cpuset")
    return tuple(need)


def apply_node(cg: Cgroups, plan: CpuPlan, index: int, cgroup: str) -> None:
    """Write node ``index``'s limits into its (already created) cgroups."""
    n = plan.per_node[index]
    if plan.mechanism in ("cpuset", "shared"):
        assert n.cpus is not None
        cg.set_cpus(cgroup, n.cpus)
    elif plan.mechanism == "cfs":
        assert n.quota_us is not None and n.period_us is not None
        cg.set_cpu_max(cgroup, n.quota_us, n.period_us)


def read_back(cg: Cgroups, plan: CpuPlan, cgroup: str) -> str:
    """What the kernel says is in force, for ``status``."""
    return cg.describe_cpu(cgroup, plan.mechanism)


# Share of the host's real-time budget handed to the whole cluster. With v1 RT
# group scheduling (cpu.rt_runtime_us present), a task in a cgroup whose
# rt_runtime_us is 0 cannot become SCHED_FIFO; the agent runs at SCHED_FIFO to
# keep freeze/thaw latency low (see platform notes), so each node needs a slice.
# cgroup v2 has no per-group budget: there the agent gets SCHED_FIFO if the
# kernel allows it anywhere, and says once that it runs without it otherwise.
RT_CLUSTER_SHARE = 0.5


def grant_rt_runtime(cg: Cgroups, root: str, groups: list[list[str]]) -> int | None:
    """Split part of the root RT budget across nodes; returns µs per node.

    ``groups`` holds, per node, the groups that need the node's budget (the
    node and the agent's leaf inside it). Returns None when the kernel has no
    RT group scheduling (nothing to do). Raises OSError if the kernel refuses.
    """
    root_rt = cg.rt_runtime()
    if root_rt is None:
        return None
    if root_rt <= 0 or not groups:
        return 0
    total = int(root_rt * RT_CLUSTER_SHARE)
    per_node = total // len(groups)
    # Parent first: a child's budget must fit inside its parent's.
    cg.set_rt_runtime(root, total)
    for node_groups in groups:
        for g in node_groups:
            cg.set_rt_runtime(g, per_node)
    return per_node
