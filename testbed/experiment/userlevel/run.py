"""Run the study on the local cluster: the communication-bound job alone, then beside each
partner under paired gang (one run per waiting action) and strict gang (the baseline).

Every run is a fresh controller (testbed/experiment/harness/, as paired-live's runs), both
jobs as wide as the cluster and running ``duration`` s of the synthetic program from their
start, so the mix never changes. A repeat runs every configuration once in the spec's
order; repeats follow each other (ABAB), so a drift of the host's speed spreads over all
of them. Per run: the controller's matching rate (paired quanta / planned quanta) and
command skew, every quantum's measured utilization of each job (polled from the
controller's status, ``last_quantum``), every rank's report (barriers, CPU, the message
library's MD distribution), and the CPU the host spent outside the experiment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError, hostload
from testbed.experiment.harness.cluster import (
    cluster_cpu_reader,
    local_cluster,
    require_root,
)
from testbed.experiment.paired.run import run_controlled
from testbed.experiment.pairedscale.trace import Tracer
from testbed.experiment.userlevel.model import WaitAction
from testbed.experiment.userlevel.spec import UserlevelSpec

Say = Callable[[str], None]


@dataclass(frozen=True)
class Config:
    """One run's configuration: the policy, the comm job's waiting action, its partner."""

    policy: str  # "gang" or "paired-gang"
    action: WaitAction
    partner: str | None  # None: the comm job alone

    @property
    def label(self) -> str:
        who = f"+{self.partner}" if self.partner else " alone"
        return f"{self.policy} {self.action.label}{who}"


def configs(spec: UserlevelSpec) -> list[Config]:
    out = [Config("gang", a, None) for a in spec.alone_waits]
    for partner, actions in spec.partners.items():
        out += [Config("paired-gang", a, partner) for a in actions]
        out += [Config("gang", a, partner) for a in spec.gang_waits]
    return out


def run_study(spec: UserlevelSpec, out: Path, say: Say, save: Callable[[Any], None],
              reuse_cluster: bool = False) -> dict[str, Any]:  # fmt: skip
    require_root()
    out.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"spec": spec.doc(), "cluster": {}, "runs": [], "host": {}}
    plan = configs(spec)
    total = len(plan) * spec.repeats
    with local_cluster(spec, reuse_cluster, say) as cluster:
        data["cluster"] = {k: v for k, v in cluster.items() if k != "state"}
        reader = cluster_cpu_reader()
        with cluster_weight(spec.cluster_weight) as weights:
            data["cluster"]["weight"] = weights
            for rep in range(spec.repeats):
                for cfg in plan:
                    say(f"[{len(data['runs']) + 1}/{total}] repeat {rep + 1}: {cfg.label}")
                    run = _quiet_run(spec, cfg, rep, cluster["state"], out, reader, say)
                    data["runs"].append(run)
                    say("    " + one_line(run))
                    save(data)
    data["host"] = {**hostload.host_record(), "loadavg": [round(x, 2) for x in os.getloadavg()]}
    return data


@contextlib.contextmanager
def cluster_weight(weight: int | None) -> Iterator[dict[str, int | None]]:
    """The cluster's CPU weight against the rest of the host (cgroup v2 scale, 1-10000; v1
    shares x 10.24) for the study, the previous one back afterwards.

    A node of the paper was a PC of its own. Here a node's core is also the host's, and a
    busy process elsewhere (another session's, even niced: autogroup gives its session a
    weight of its own) takes a third of it, so a spinning job reads 0.65, not ~1.0, and
    passes §2.4's test (docs/userlevel.md). A high weight keeps the cores for the nodes
    while they want them; None leaves the host's weights alone."""
    if weight is None:
        yield {"set": None, "was": None}
        return
    from common.cgroups import CgroupError, Cgroups, Layout, base_join
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod
    from testbed.cluster.names import CGROUP_ROOT

    st = state_mod.load(cluster_mod.Env().sdir())
    if st is None or not st.cgroup_layout:
        raise LiveError("no cluster state to weight")
    layout = Layout.from_dict(st.cgroup_layout)
    cg = Cgroups(layout)
    path = base_join(layout.base, CGROUP_ROOT)
    was = cg.get_weight(path)
    cg.set_weight(path, weight)
    try:
        yield {"set": weight, "was": was}
    finally:
        with contextlib.suppress(CgroupError, OSError, ValueError):
            cg.set_weight(path, was)


def _quiet_run(spec: UserlevelSpec, cfg: Config, rep: int, state: str, out: Path,
               reader: Callable[[], float] | None, say: Say) -> dict[str, Any]:  # fmt: skip
    attempts = 0
    while True:
        attempts += 1
        if spec.quiet_limit > 0:
            hostload.wait_quiet(
                spec.quiet_limit, 2.0, spec.quiet_timeout, cluster_cpu=reader, say=say
            )
        load = os.getloadavg()[0]
        before = hostload.sample(reader)
        run = _run(spec, cfg, rep, state, out)
        run["loadavg_1m_before"] = round(load, 2)
        run["other_cores"] = hostload.other_cores(before, hostload.sample(reader))
        run["attempts"] = attempts
        busy = run["other_cores"]
        if spec.quiet_limit <= 0 or busy is None or busy <= spec.quiet_limit:
            return run
        if attempts > spec.quiet_retries:
            return run
        say(f"    disturbed: {busy:.2f} cores busy outside the experiment; running it again")


def _run(spec: UserlevelSpec, cfg: Config, rep: int, state: str, out: Path) -> dict[str, Any]:
    jobs: list[tuple[str, str, Any]] = [("comm", "comm", spec.comm.with_wait(cfg.action))]
    if cfg.partner is not None:
        jobs.append((cfg.partner, cfg.partner, spec.partner_jobs[cfg.partner]))
    params = {"matching": spec.matching, "margin": f"{spec.margin:g}"}
    tracer = Tracer()
    run_dir = out / "runs" / f"r{rep + 1}-{cfg.policy}-{cfg.action.label.replace(':', '')}-" \
        f"{cfg.partner or 'alone'}"  # fmt: skip
    ctl = run_controlled(
        state, spec.nodes, spec.quantum, spec.duration, cfg.policy,
        params if cfg.policy == "paired-gang" else {}, jobs, run_dir,
        poll=tracer, poll_interval=spec.quantum / 2,
    )  # fmt: skip
    status = ctl.status
    job_out: dict[str, Any] = {}
    # the quanta every job was in its loop for all of (start-up, with its imports at
    # 100 % CPU and a new job's prediction of 100 %, and the ends are left out)
    windows = [_window(ctl.details.get(jr.job_id, ({}, []))[1]) for jr in ctl.jobs]
    lo = max((w[0] for w in windows if w), default=None)
    hi = min((w[1] for w in windows if w), default=None)
    steady = [e for e in tracer.entries
              if lo is not None and hi is not None
              and lo + 2 * spec.quantum <= tracer.t0 + e["t"] <= hi]  # fmt: skip
    for jr in ctl.jobs:
        _record, reports = ctl.details.get(jr.job_id, ({}, []))
        utils = [e["utilization"][str(jr.job_id)] for e in steady
                 if str(jr.job_id) in e["utilization"]]  # fmt: skip
        job_out[jr.kind] = {
            "job_id": jr.job_id,
            "state": jr.state,
            "slot": jr.slot,
            "barriers_per_second": jr.barriers_per_second,
            "quanta_utilization": utils,
            "ranks": [_rank(r) for r in reports],
        }
    quanta = [e for e in steady if e["runnable"]]
    return {
        "repeat": rep + 1,
        "policy": cfg.policy,
        "action": cfg.action.label,
        "spin_us": cfg.action.spin_time_us if cfg.action.recv != "spin" else None,
        "partner": cfg.partner,
        "quanta": int(status.get("quanta", 0)),
        "matching_rate": status.get("matching_success_ratio") if cfg.policy != "gang" else None,
        # the traced quanta while every job was in its loop (a sample of every quantum:
        # the status is polled twice a quantum), and those that ran a pair
        "traced_quanta": len(quanta),
        "traced_paired": sum(1 for e in quanta if e.get("partner") is not None),
        "steady_seconds": round(hi - lo, 3) if lo is not None and hi is not None else None,
        "skew_p99_s": status.get("skew_p99_s"),
        "wall_seconds": round(ctl.wall_seconds, 3),
        "jobs": job_out,
    }


def _window(reports: list[dict[str, Any]]) -> tuple[float, float] | None:
    """When all of a job's ranks were in their loop (the host's monotonic clock)."""
    try:
        return (max(float(r["started_monotonic"]) for r in reports),
                min(float(r["ended_monotonic"]) for r in reports))  # fmt: skip
    except (KeyError, ValueError, TypeError):
        return None


def _rank(r: dict[str, Any]) -> dict[str, Any]:
    m = r.get("messages") or {}
    return {
        "rank": r.get("rank"),
        "barriers": r.get("barriers"),
        "seconds": r.get("seconds"),
        "cpu_ratio": r.get("cpu_ratio"),
        "cpu_ratio_alone": r.get("cpu_ratio_alone"),
        "runq_seconds": r.get("runq_seconds"),  # waiting for a CPU (a busy host)
        "messages_received": m.get("messages_received"),
        "md_count": m.get("md_count"),
        "md_mean_us": m.get("md_mean_us"),
        "md_quantiles_us": m.get("md_quantiles_us") or [],
        "spin_polls": m.get("spin_polls"),
        "blocks": m.get("blocks"),
        "wait": m.get("wait"),
    }


def one_line(run: dict[str, Any]) -> str:
    comm = run["jobs"].get("comm", {})
    u = comm.get("quanta_utilization") or []
    parts = [f"comm {comm.get('barriers_per_second') or 0:.1f} barriers/s"]
    if u:
        parts.append(f"u {sum(u) / len(u):.2f}")
    if run["partner"]:
        p = run["jobs"].get(run["partner"], {})
        parts.append(f"{run['partner']} {p.get('barriers_per_second') or 0:.2f} barriers/s")
    if run["matching_rate"] is not None:
        parts.append(f"matched {run['matching_rate']:.0%}")
    if run.get("other_cores") is not None:
        parts.append(f"host busy outside {run['other_cores']:.2f} cores")
    return ", ".join(parts)
