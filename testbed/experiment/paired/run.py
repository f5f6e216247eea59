"""Run a live experiment: local cluster, controller, synthetic jobs (Wiseman & Feitelson 2003 §4.1).

For every configuration (strict gang, paired gang with Fig. 4 or best-fit
matching) and every mix i, a fresh controller is started on the cluster, the
4 − i compute-bound jobs are submitted first (the paper's lower slots), then
the i I/O-bound ones, all as wide as the cluster. Each job runs the synthetic
program for ``duration`` seconds from its start, so the whole mix runs
together, as in the paper, where "when the first job in the mix terminated,
all other jobs were killed". Rank 0's report gives barriers per second; the
controller's status gives quanta, command skew and how often each slot was
used for matching.

The cluster is brought up for the experiment and torn down after it, also on
failure or Ctrl-C, unless ``reuse_cluster`` is set and one is already up
(testbed/experiment/harness/: the cluster, the controller and the jobs of every live study).

A spec with a ``[sweep]`` (Wiseman & Feitelson 2003 Fig. 8: ``nodes``, Fig. 9:
``gcomp_scale``) runs the whole experiment once per value
(:func:`run_sweep`), each node count on its own cluster.

Every run also records what explains its figures: the CPU the host spent
outside the experiment (:mod:`testbed.experiment.harness.hostload`; a busy host
makes a run worthless on 2 cores), the matrix's row count, and from them and
the controller's per-slot partner ratios the share of quanta each job ran
(:meth:`RunResult.run_fraction`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError, hostload
from testbed.experiment.harness import jobs as harness_jobs
from testbed.experiment.harness.cluster import (
    cluster_cpu_reader,
    host_cores,
    local_cluster,
    require_root,
)
from testbed.experiment.harness.controller import controller
from testbed.experiment.paired.spec import CONFIGS, ExperimentSpec

Say = Callable[[str], None]


@dataclass
class JobResult:
    job_id: int
    name: str
    kind: str  # "compute" or "io"
    slot: int | None
    state: str
    barriers: int | None
    barriers_per_second: float | None
    cpu_ratio: float | None
    rank_cpu_ratios: list[float] = field(default_factory=list)  # every rank's CPU/wall


@dataclass
class RunResult:
    config: str
    mix: int
    jobs: list[JobResult]
    quanta: int
    skew_p50_s: float | None
    skew_p99_s: float | None
    matching_success_ratio: float | None
    slot_partner_ratio: dict[int, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    rows: int | None = None  # rows of the matrix (slots) while the mix ran
    other_cores: float | None = None  # host CPU outside the experiment (hostload)
    attempts: int = 1  # runs made until one was not disturbed by a foreign load

    def rate(self, kind: str) -> float | None:
        """Mean barriers per second of the jobs of one kind (Fig. 7 top)."""
        return _mean([j.barriers_per_second for j in self.jobs if j.kind == kind])

    def cpu(self, kind: str) -> float | None:
        """Mean CPU/wall of rank 0 of the jobs of one kind (the synthetic's report)."""
        return _mean([j.cpu_ratio for j in self.jobs if j.kind == kind])

    def run_fraction(self, job: JobResult) -> float | None:
        """Share of quanta in which ``job`` was runnable.

        Its row's own turn (every row in turn: 1 / rows of the quanta) plus the
        quanta in which its row was chosen as the partner (the controller's
        ``slot_partner_ratio``, Fig. 7 bottom). Strict gang: 1 / rows.
        """
        if job.slot is None or not self.rows:
            return None
        return min(1.0, 1.0 / self.rows + self.slot_partner_ratio.get(job.slot, 0.0))

    def kind_run_fraction(self, kind: str) -> float | None:
        return _mean([self.run_fraction(j) for j in self.jobs if j.kind == kind])


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


@dataclass
class ExperimentResult:
    spec: dict[str, Any]
    cluster: dict[str, Any]
    runs: list[RunResult]
    host: dict[str, Any] = field(default_factory=dict)  # hostload.host_record()

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentResult:
        runs = []
        for r in d["runs"]:
            r = dict(r)
            r["jobs"] = [JobResult(**j) for j in r.get("jobs", [])]
            r["slot_partner_ratio"] = {
                int(k): float(v) for k, v in (r.get("slot_partner_ratio") or {}).items()
            }
            runs.append(RunResult(**r))
        return cls(
            spec=dict(d["spec"]),
            cluster=dict(d.get("cluster") or {}),
            runs=runs,
            host=dict(d.get("host") or {}),
        )


@dataclass
class SweepPoint:
    label: str
    value: float
    result: ExperimentResult


@dataclass
class SweepResult:
    """A [sweep] spec's runs: the whole experiment once per value (Figs. 8, 9)."""

    name: str
    key: str
    points: list[SweepPoint]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepResult:
        points = [
            SweepPoint(p["label"], float(p["value"]), ExperimentResult.from_dict(p["result"]))
            for p in d["points"]
        ]
        return cls(name=str(d["name"]), key=str(d["key"]), points=points)


def run_experiment(
    spec: ExperimentSpec,
    out: Path,
    *,
    reuse_cluster: bool = False,
    say: Say = print,
    save: Callable[[ExperimentResult], None] | None = None,
) -> ExperimentResult:
    """Every configuration and mix on one cluster; ``save`` after every run."""
    require_root()
    spec = spec.with_cores(host_cores())
    out.mkdir(parents=True, exist_ok=True)
    result = ExperimentResult(spec=spec_doc(spec), cluster={}, runs=[])
    with local_cluster(spec, reuse_cluster, say) as cluster:
        result.cluster = cluster
        reader = cluster_cpu_reader()
        total = len(spec.configs) * len(spec.mixes)
        for config in spec.configs:
            for mix in spec.mixes:
                say(
                    f"[{len(result.runs) + 1}/{total}] {config}, mix {mix} "
                    f"({mix} I/O + {4 - mix} compute)"
                )
                run = _quiet_run(spec, config, mix, cluster, out, reader, say)
                result.runs.append(run)
                say("    " + _one_line(run))
                if save is not None:
                    save(result)
    result.host = hostload.host_record()
    return result


def spec_doc(spec: ExperimentSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "path": str(spec.path),
        "duration": spec.duration,
        "quantum": spec.quantum,
        "nodes": spec.nodes,
        "link": spec.link,
        "cpus_per_node": spec.cpus_per_node,
        "cpu_mechanism": spec.cpu_mechanism,
        "cfs_period_us": spec.cfs_period_us,
        "compute": asdict(spec.compute),
        "io": asdict(spec.io),
        "configs": list(spec.configs),
        "mixes": list(spec.mixes),
    }


def run_sweep(
    spec: ExperimentSpec,
    out: Path,
    *,
    reuse_cluster: bool = False,
    say: Say = print,
    save: Callable[[SweepResult], None] | None = None,
) -> SweepResult:
    """The experiment once per [sweep] value, each in ``out/<label>/`` (Figs. 8, 9).

    A nodes sweep brings a cluster of each size up and down in turn, so
    ``reuse_cluster`` only helps a granularity sweep. ``save`` runs after every run, so a
    long sweep that fails keeps what it measured.
    """
    if spec.sweep is None:
        raise LiveError(f"{spec.path}: no [sweep] table; use run_experiment")
    require_root()
    out.mkdir(parents=True, exist_ok=True)
    points: list[SweepPoint] = []
    sweep = SweepResult(name=spec.name, key=spec.sweep.key, points=points)
    for label, value, point in spec.points(host_cores()):
        say(f"== {spec.sweep.key} = {value:g} ==")

        def partial(result: ExperimentResult, label: str = label, value: float = value) -> None:
            if save is not None:
                save(
                    SweepResult(sweep.name, sweep.key, [*points, SweepPoint(label, value, result)])
                )

        result = run_experiment(
            point, out / label, reuse_cluster=reuse_cluster, say=say, save=partial
        )
        points.append(SweepPoint(label, value, result))
    return sweep


def _quiet_run(
    spec: ExperimentSpec,
    config: str,
    mix: int,
    cluster: dict[str, Any],
    out: Path,
    reader: Callable[[], float] | None,
    say: Say,
) -> RunResult:
    """One mix, on a quiet host: wait for quiet first, run again if a foreign load came.

    On a 2-core host one busy foreign process takes half a node's core. With
    ``quiet_limit`` > 0 each run waits (up to ``quiet_timeout``) until the host
    spends less than that outside the experiment, and a run during which it
    spent more than ``quiet_limit`` is run again, at most ``quiet_retries``
    times; the last attempt is kept and the attempts are recorded.
    """
    attempts = 0
    while True:
        attempts += 1
        if spec.quiet_limit > 0:
            hostload.wait_quiet(
                spec.quiet_limit, 2.0, spec.quiet_timeout, cluster_cpu=reader, say=say
            )
        before = hostload.sample(reader)
        run = _run_mix(spec, config, mix, cluster, out / f"{config}-mix{mix}")
        run.other_cores = hostload.other_cores(before, hostload.sample(reader))
        run.attempts = attempts
        disturbed = (
            spec.quiet_limit > 0
            and run.other_cores is not None
            and run.other_cores > spec.quiet_limit
        )
        if not disturbed or attempts > spec.quiet_retries:
            return run
        say(
            f"    disturbed: the host spent {run.other_cores:.2f} cores outside the "
            "experiment; running it again"
        )


def _one_line(run: RunResult) -> str:
    parts = []
    for kind in ("compute", "io"):
        r = run.rate(kind)
        if r is not None:
            parts.append(f"{kind} {r:.2f} barriers/s")
    if run.matching_success_ratio is not None:
        parts.append(f"matched {run.matching_success_ratio:.0%}")
    if run.skew_p99_s is not None:
        parts.append(f"skew p99 {run.skew_p99_s * 1e3:.2f} ms")
    if run.other_cores is not None:
        parts.append(f"host busy outside {run.other_cores:.2f} cores")
    return ", ".join(parts)


def _run_mix(
    spec: ExperimentSpec, config: str, mix: int, cluster: dict[str, Any], run_dir: Path
) -> RunResult:
    policy, params = CONFIGS[config]
    kinds = ["compute"] * (4 - mix) + ["io"] * mix
    jobs = [
        (f"{kind}{index}", kind, spec.compute if kind == "compute" else spec.io)
        for index, kind in enumerate(kinds)
    ]
    run = run_controlled(
        cluster["state"], spec.nodes, spec.quantum, spec.duration, policy, params, jobs, run_dir
    )
    status = run.status
    partner = status.get("slot_partner_ratio") or {}
    return RunResult(
        config=config,
        mix=mix,
        jobs=run.jobs,
        quanta=int(status.get("quanta", 0)),
        skew_p50_s=status.get("skew_p50_s"),
        skew_p99_s=status.get("skew_p99_s"),
        matching_success_ratio=status.get("matching_success_ratio") if policy != "gang" else None,
        slot_partner_ratio={int(k): float(v) for k, v in partner.items()},
        wall_seconds=run.wall_seconds,
        rows=run.rows,
    )


@dataclass
class ControlledRun:
    """What one controller run gave: the jobs' results, its final status, the matrix rows."""

    jobs: list[JobResult]
    status: dict[str, Any]
    rows: int | None
    wall_seconds: float
    # job id -> (the controller's record, every rank's report in rank order)
    details: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = field(default_factory=dict)


def run_controlled(
    state_path: str,
    nodes: int,
    quantum: float,
    duration: float,
    policy: str,
    params: dict[str, str],
    jobs: list[tuple[str, str, Any]],
    run_dir: Path,
    *,
    poll: Callable[[Any], None] | None = None,
    poll_interval: float = 0.5,
    submit_at: list[float] | None = None,
) -> ControlledRun:
    """A fresh controller running ``policy``; ``jobs`` = (name, kind, AppParams) submitted
    in order, each as wide as the cluster and running ``duration`` s of the synthetic
    program; returns when all have ended (also used by ``cosched calibrate``).

    ``poll(client)`` is called every ``poll_interval`` s while the jobs run (a trace of
    the controller's status); ``submit_at`` delays each job's submission that many
    seconds after the first."""
    began = time.monotonic()
    submitted: dict[int, tuple[str, str]] = {}
    with controller(state_path, policy, quantum, run_dir, params) as client:
        t0 = time.monotonic()
        for idx, (name, kind, app) in enumerate(jobs):
            if submit_at is not None:
                due = t0 + submit_at[idx]
                while time.monotonic() < due:
                    if poll is not None:
                        poll(client)
                    time.sleep(min(poll_interval, max(0.0, due - time.monotonic())))
            argv = [sys.executable, "-m", "apps.synthetic", *app.argv(duration)]
            jid = harness_jobs.submit(client, name, nodes, argv, cwd=None)
            submitted[jid] = (name, kind)
        matrix = client.request("matrix")
        slots = harness_jobs.slots_of(matrix)
        rows = harness_jobs.rows_in_use(matrix.get("slots", []))
        records = harness_jobs.wait_ended(
            client,
            list(submitted),
            timeout=duration * 4 + 60,
            poll=poll_interval,
            kill=True,
            watch=poll,
        )
        status = client.request("status")
        details: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        results = [
            _job_result(client, jid, name, kind, slots.get(jid), records[jid], details)
            for jid, (name, kind) in submitted.items()
        ]
    return ControlledRun(results, status, rows or None, time.monotonic() - began, details)


def _job_result(
    client: Any,
    jid: int,
    name: str,
    kind: str,
    slot: int | None,
    record: dict[str, Any],
    details: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] | None = None,
) -> JobResult:
    reports = harness_jobs.rank_reports(client, jid)
    if details is not None:
        details[jid] = (record, reports)
    report = reports[0] if reports else {}
    return JobResult(
        job_id=jid,
        name=name,
        kind=kind,
        slot=slot,
        state=record["state"],
        barriers=report.get("barriers"),
        barriers_per_second=report.get("barriers_per_second"),
        cpu_ratio=report.get("cpu_ratio"),
        rank_cpu_ratios=[float(r["cpu_ratio"]) for r in reports if "cpu_ratio" in r],
    )
