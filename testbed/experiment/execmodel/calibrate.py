"""``cosched calibrate``: the simulator's execution model measured on the live cluster (issue 11,
item 4). "Calibration" in cosched means this and only this: the model's interference and
context switch, written to experiments/calibration.toml and read by testbed/sim/calibration.py.

testbed/sim/execution.py assumes that a process sharing its node with
another progresses at ``(1 - interference) / max(1, Σu)`` of its dedicated
speed, and that a job switched in at a quantum boundary loses
``context_switch`` seconds of it. Here both are measured on real processes
rather than taken from the paper:

* **alone** -- each job type (the spec's compute job, its I/O job, and a
  fine-grain job of about 45 % CPU, Wiseman & Feitelson 2003 §4.2.1/§4.2.2) runs by itself on
  the cluster; its barriers per second are ``R_alone`` and its CPU/wall
  (mean over its ranks) is its utilization ``u``.
* **paired** -- two fine-grain jobs, and a compute job with an I/O job, run
  at once on the same nodes, both runnable all the time and the local
  scheduler choosing between them (what paired gang does within a quantum,
  §2.1). ``interference = 1 - (R_paired / R_alone) · max(1, Σu)``: the
  model's factor solved for ``interference``, with ``Σu`` from the alone
  runs, so a pair whose demands exceed the CPU is charged its CPU sharing
  before any interference. Per job and per pair type; the model uses the
  **fine + fine** figure, because the simulator's Wiseman & Feitelson 2003 §4.2 workloads
  (Figs. 10-12) are fine-grain 45 % jobs that "will always be matched", the
  pairing the paper calls the most sensitive to interference.
* **gang** -- two compute jobs under strict gang (the real controller,
  ``gang`` policy, the experiment's quantum ``q``), alternating:
  ``R_gang = R_alone · (q - cs) / (k · q)`` with ``k = 2`` gives
  ``context_switch = q · (1 - k · R_gang / R_alone)``. A compute job uses
  all of its quantum, so any loss is the switch (freeze/thaw, the barrier
  that straddles a boundary, cache refill).

Alone and paired runs need no switching, so they start the jobs straight
through the agents (``AgentDriver``: the controller's own pool and launch
environment), every rank runnable from its start; strict gang needs the
controller's quantum, so it runs the real controller. Each measurement is
repeated (default 3, interleaved so a slow drift of the host hits all
alike) and every figure keeps its spread. Before each run the host must be
quiet (:mod:`testbed.experiment.harness.hostload`); the CPU it spent outside the
cluster during each run is recorded.

The derivations are pure functions (:func:`interference`,
:func:`context_switch`, :func:`derive`), unit-tested on given rates.

Then (issue 25) the program's costs by gang size, each size on its own cluster:
barrier cost at 2, 4 and 8 nodes and its fit, launch and teardown
(testbed/experiment/execmodel/programcal.py). ``--only sizes`` measures just these and merges
them into an existing file, leaving its other figures as they were.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.execmodel.programcal import SizeCalibration
from testbed.experiment.harness import LiveError, hostload
from testbed.experiment.harness.cluster import Say, cluster_cpu_reader, local_cluster
from testbed.experiment.harness.jobs import last_json
from testbed.experiment.harness.loopcost import ns_per_iteration
from testbed.experiment.paired.run import run_controlled
from testbed.experiment.paired.spec import AppParams, ExperimentSpec

REPO = Path(__file__).resolve().parents[3]
DEFAULT_OUT = REPO / "experiments" / "calibration.toml"
DEFAULT_SPEC = REPO / "experiments" / "paired-vs-gang-2node.toml"
KINDS = ("compute", "io", "fine")
DRIVER_JOB_BASE = 500  # job ids of driver runs; the controller numbers its jobs from 1


@dataclass(frozen=True)
class Measurement:
    """One thing measured: a mode and the job kinds run together."""

    mode: str  # "alone" | "paired" | "gang"
    kinds: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.mode} {'+'.join(self.kinds)}"

    @property
    def key(self) -> str:
        return f"{self.mode}.{'_'.join(self.kinds)}"


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("alone", ("compute",)),
    Measurement("alone", ("io",)),
    Measurement("alone", ("fine",)),
    Measurement("paired", ("fine", "fine")),
    Measurement("paired", ("compute", "io")),
    Measurement("gang", ("compute", "compute")),
)


@dataclass(frozen=True)
class CalibrationConfig:
    """Everything a calibration run needs (``cosched calibrate`` flags)."""

    nodes: int = 2
    cpus_per_node: float | None = 1.0
    cpu_mechanism: str = "cpuset"
    link: str = "myrinet"
    cgroup: str = "auto"
    cfs_period_us: int = 10_000
    quantum: float = 0.2
    duration: float = 8.0
    repeats: int = 3
    compute: AppParams = field(default_factory=lambda: AppParams(600_000, 0))
    io: AppParams = field(default_factory=lambda: AppParams(0, 8, 8193, 0.005))
    fine_compute_ms: float = 2.0
    fine_wait_ms: float = 2.5
    wait: str | None = "block"
    quiet_limit: float = 0.15  # cores busy outside the cluster before a run may start
    quiet_timeout: float = 120.0
    quiet_window: float = 2.0  # s the host's load is read over before each run
    quiet_retries: int = 3  # runs again a run during which > quiet_limit was busy outside
    spec_path: str = ""
    sizes: tuple[int, ...] = (2, 4, 8)  # program costs by gang size (); () = none

    @classmethod
    def from_spec(cls, spec: ExperimentSpec, **changes: Any) -> CalibrationConfig:
        """The cluster, quantum and jobs of an experiment spec (the experiment calibrated)."""
        base = cls(
            nodes=spec.nodes,
            cpus_per_node=spec.cpus_per_node,
            cpu_mechanism=spec.cpu_mechanism,
            link=spec.link,
            cgroup=spec.cgroup,
            cfs_period_us=spec.cfs_period_us,
            quantum=spec.quantum,
            compute=spec.compute,
            io=spec.io,
            wait=spec.compute.wait,
            spec_path=_repo_relative(spec.path),
        )
        return replace(base, **changes)

    def fine(self, ns_per_iteration: float) -> AppParams:
        """The fine-grain job: ``fine_compute_ms`` of the compute loop, then one file and
        ``fine_wait_ms`` of emulated device per barrier (about 45 % CPU, Wiseman & Feitelson 2003
        §4.2.1)."""
        gcomp = max(1, round(self.fine_compute_ms * 1e6 / ns_per_iteration))
        return AppParams(gcomp, 1, 8193, self.fine_wait_ms / 1000.0, self.wait)

    def app(self, kind: str, ns_per_iteration: float) -> AppParams:
        if kind == "fine":
            return self.fine(ns_per_iteration)
        app = self.compute if kind == "compute" else self.io
        return replace(app, wait=self.wait) if self.wait is not None else app


def _repo_relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# -- pure derivations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Mean, standard deviation, range and count of repeated figures."""

    mean: float
    sd: float
    lo: float
    hi: float
    n: int

    @property
    def spread(self) -> float:
        """(max - min) / mean: how far apart the repeats were."""
        return (self.hi - self.lo) / self.mean if self.mean else 0.0


def stats(values: Sequence[float]) -> Stats:
    if not values:
        raise ValueError("no values")
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Stats(mean, sd, min(values), max(values), n)


def interference(paired_rate: float, alone_rate: float, demand_sum: float) -> float:
    """The model's factor solved for interference (testbed/sim/execution.py).

    A job sharing a node progresses at ``(1 - i) / max(1, Σu)`` of its alone
    rate, so ``i = 1 - (R_paired / R_alone) · max(1, Σu)``.
    """
    if alone_rate <= 0:
        raise ValueError("alone rate must be > 0")
    return 1.0 - (paired_rate / alone_rate) * max(1.0, demand_sum)


def context_switch(gang_rate: float, alone_rate: float, quantum: float, k: int) -> float:
    """Seconds lost per switched-in quantum: ``R_gang = R_alone (q - cs) / (k q)``."""
    if alone_rate <= 0 or quantum <= 0 or k < 1:
        raise ValueError("alone rate and quantum must be > 0, k >= 1")
    return quantum * (1.0 - k * gang_rate / alone_rate)


def eq1(series: Sequence[float]) -> list[float]:
    """Wiseman & Feitelson 2003 eq. (1) over a job's per-quantum utilizations: the prediction after
    each quantum from the last four (weights 0.4, 0.3, 0.2, 0.1), once four exist."""
    from controller.policies.predictor import WEIGHTS

    k = len(WEIGHTS)
    return [
        sum(w * series[n - i] for i, w in enumerate(WEIGHTS)) for n in range(k - 1, len(series))
    ]


def fit_fraction(
    predicted: Sequence[float], partner: Sequence[float] | float, margin: float = 0.01
) -> float | None:
    """Share of quanta in which two predictions pass §2.4's test ``x + y + m < 100%``.

    ``partner`` is a series aligned with ``predicted`` or one value for every quantum.
    """
    n = len(predicted) if isinstance(partner, float | int) else min(len(predicted), len(partner))
    if n == 0:
        return None
    other = [float(partner)] * n if isinstance(partner, float | int) else list(partner)
    return sum(1 for x, y in zip(predicted[:n], other[:n], strict=True) if x + y + margin < 1.0) / n


@dataclass(frozen=True)
class Derived:
    """What the model takes, and every alternative it was chosen from."""

    utilization: dict[str, float]  # mean CPU/wall alone, per kind
    interference_fine_fine: float
    interference_compute_io: float  # mean of the two jobs' figures
    interference_compute_io_jobs: dict[str, float]  # per job of the pair
    context_switch_raw: float
    per_repeat: dict[str, list[float]]  # the derived figures from each repeat's runs
    # the same formula on CPU shares instead of barriers: the CPU a job lost, not progress
    context_switch_cpu: float = 0.0

    @property
    def context_switch(self) -> float:
        """The model's value: a negative raw figure (noise) is no cost, 0."""
        return max(0.0, self.context_switch_raw)

    @property
    def interference(self) -> float:
        """The model's value: fine + fine (module docstring says why), at least 0."""
        return max(0.0, self.interference_fine_fine)


def derive(
    rates: Mapping[str, Mapping[str, Sequence[float]]],
    cpus: Mapping[str, Mapping[str, Sequence[float]]],
    quantum: float,
) -> Derived:
    """Model parameters from per-repeat rates and CPU shares.

    ``rates[key][kind]`` lists, per repeat, the barriers per second of the
    jobs of ``kind`` in measurement ``key`` (``Measurement.key``: e.g.
    ``"alone.fine"``, ``"paired.fine_fine"``, ``"paired.compute_io"``,
    ``"gang.compute_compute"``), averaged over the jobs of that kind in the
    run; ``cpus`` likewise for CPU/wall.
    """
    alone = {k: stats(rates[f"alone.{k}"][k]).mean for k in KINDS}
    u = {k: stats(cpus[f"alone.{k}"][k]).mean for k in KINDS}
    fine_pairs = list(rates["paired.fine_fine"]["fine"])
    ci = rates["paired.compute_io"]
    gang = list(rates["gang.compute_compute"]["compute"])
    per_repeat = {
        "interference_fine_fine": [
            interference(r, alone["fine"], 2 * u["fine"]) for r in fine_pairs
        ],
        "interference_compute": [
            interference(r, alone["compute"], u["compute"] + u["io"]) for r in ci["compute"]
        ],
        "interference_io": [interference(r, alone["io"], u["compute"] + u["io"]) for r in ci["io"]],
        "context_switch": [context_switch(r, alone["compute"], quantum, 2) for r in gang],
    }
    gang_cpu = stats(cpus["gang.compute_compute"]["compute"]).mean
    jobs = {
        "compute": interference(
            stats(ci["compute"]).mean, alone["compute"], u["compute"] + u["io"]
        ),
        "io": interference(stats(ci["io"]).mean, alone["io"], u["compute"] + u["io"]),
    }
    return Derived(
        utilization=u,
        interference_fine_fine=interference(stats(fine_pairs).mean, alone["fine"], 2 * u["fine"]),
        interference_compute_io=(jobs["compute"] + jobs["io"]) / 2,
        interference_compute_io_jobs=jobs,
        context_switch_raw=context_switch(stats(gang).mean, alone["compute"], quantum, 2),
        per_repeat=per_repeat,
        context_switch_cpu=context_switch(gang_cpu, u["compute"], quantum, 2),
    )


# -- the live runs ------------------------------------------------------------------------


@dataclass
class JobRun:
    """One job of one run: its kind, barriers per second (rank 0) and CPU/wall (ranks' mean).

    ``quantum_utils``: its utilization in each quantum as the controller measures it
    (CPU over the nodes' elapsed time, controller.quantum.job_utilization), start-up
    and the last quantum left out; alone and paired runs only.
    """

    kind: str
    rate: float
    cpu: float
    barriers: int
    quantum_utils: list[float] = field(default_factory=list)


@dataclass
class Run:
    measurement: str  # Measurement.key
    repeat: int
    jobs: list[JobRun]
    other_cores: float | None
    quiet_before: float | None
    wall_seconds: float
    attempts: int = 1


class AgentDriver:
    """Jobs started straight through the agents, every rank runnable from its start.

    It uses the controller's own agent pool (controller/nodes.py) and launch
    environment (``COSCHED_PEERS``, ``COSCHED_PORT``, the link's ``COSCHED_NET_*``),
    and sends every ``quantum`` the same command, every job runnable: nothing is
    ever frozen or thawed, and the acks carry each job's CPU time per quantum, from
    which its utilization is computed exactly as the controller does.
    """

    SKIP_QUANTA = 3  # start-up: the interpreter loads and the ranks connect

    def __init__(self, state: dict[str, Any], first_id: int, quantum: float = 0.2) -> None:
        from common.keys import read_key
        from controller.daemon import nodes_from_cluster
        from controller.launchenv import job_port, net_env
        from controller.nodes import AgentPool

        self.nodes = nodes_from_cluster(state)
        key_file = state.get("key_file")
        if not key_file:
            raise LiveError("the cluster state names no key file: bring it up again")
        self.pool = AgentPool(self.nodes, read_key(str(key_file)))
        self.pool.connect_all(10.0)
        self.env = net_env(state)
        self.port = job_port
        self.next_id = first_id
        self.quantum = quantum

    def close(self) -> None:
        self.pool.close()

    def run(self, apps: Sequence[tuple[str, AppParams]], duration: float) -> list[JobRun]:
        """Start every job at once (all ranks runnable), wait for all, read rank reports."""
        from agent.jobsecret import new_instance

        size = len(self.nodes)
        peers = [n.data_ip for n in self.nodes]
        launched: list[tuple[int, str, list[str]]] = []  # (job id, kind, stdout paths)
        pending: set[tuple[str, str]] = set()
        try:
            for kind, app in apps:
                jid = self.next_id
                self.next_id += 1
                argv = [sys.executable, "-m", "apps.synthetic", *app.argv(duration)]
                # one instance for all ranks, as the controller gives: each agent keys the
                # job's secret with it, so ranks launched without it could not connect
                instance = new_instance()
                outs = []
                for rank, node in enumerate(self.nodes):
                    env = dict(self.env)
                    env.update(
                        COSCHED_JOB_INSTANCE=instance,
                        COSCHED_JOB=str(jid),
                        COSCHED_RANK=str(rank),
                        COSCHED_SIZE=str(size),
                        COSCHED_PEERS=",".join(peers),
                        COSCHED_RANK0_ADDR=peers[0],
                        COSCHED_PORT=str(self.port(jid)),
                        COSCHED_NODE=node.name,
                    )
                    reply = self.pool.launch(
                        node.name,
                        str(jid),
                        argv,
                        rank=rank,
                        size=size,
                        env=env,
                        start_frozen=False,
                        cwd=str(REPO),
                    )
                    pending.add((node.name, str(jid)))
                    outs.append(f"{reply.get('run_dir')}/rank-{rank}.out")
                launched.append((jid, kind, outs))
            utils = self._wait(pending, timeout=duration * 3 + 30)
        finally:
            for node_name, job in sorted(pending):
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    self.pool.kill(node_name, job)
        out = []
        for jid, kind, outs in launched:
            reports = [last_json(Path(p)) for p in outs]
            if not reports or "barriers_per_second" not in reports[0]:
                raise LiveError(f"job {jid} ({kind}) left no report; see {Path(outs[0]).parent}")
            cpus = [float(r["cpu_ratio"]) for r in reports if "cpu_ratio" in r]
            series = utils.get(jid, [])[self.SKIP_QUANTA : -1]
            out.append(
                JobRun(
                    kind=kind,
                    rate=float(reports[0]["barriers_per_second"]),
                    cpu=sum(cpus) / len(cpus),
                    barriers=int(reports[0].get("barriers", 0)),
                    quantum_utils=series,
                )
            )
        return out

    def _wait(self, pending: set[tuple[str, str]], timeout: float) -> dict[int, list[float]]:
        """Command every quantum until every rank has exited; per-quantum utilizations."""
        from controller.quantum import job_utilization

        capacity = {n.name: n.capacity for n in self.nodes}
        prev: dict[str, int] = {}
        utils: dict[int, list[float]] = {}
        deadline = time.monotonic() + timeout
        q = 0
        next_at = time.monotonic()
        while pending:
            q += 1
            commands: dict[str, dict[str, int]] = {n.name: {} for n in self.nodes}
            for node, jid in pending:
                commands[node][jid] = 100
            results = self.pool.quantum(q, commands)
            cpu: dict[str, dict[int, int]] = {}
            elapsed: dict[str, int] = {}
            for node, res in results.items():
                if res.ack is None:
                    continue
                cpu[node] = {int(j): int(ns) for j, ns in (res.ack.get("cpu_ns") or {}).items()}
                t = res.ack.get("applied_monotonic_ns")
                if isinstance(t, int):
                    if node in prev:
                        elapsed[node] = t - prev[node]
                    prev[node] = t
            running = {int(j) for _, j in pending}
            placement = {j: [n.name for n in self.nodes] for j in running}
            for j, u in job_utilization(cpu, elapsed, capacity, placement).items():
                utils.setdefault(j, []).append(u)
            for ev in self.pool.events():
                if ev.get("event") == "exit":
                    pending.discard((str(ev.get("node")), str(ev.get("job_id"))))
                    code = ev.get("exit_code")
                    if code not in (0, None):
                        raise LiveError(
                            f"job {ev.get('job_id')} on {ev.get('node')} exited with {code}"
                        )
            if time.monotonic() > deadline:
                raise LiveError(f"calibration jobs did not end within {timeout:g} s")
            next_at += self.quantum
            time.sleep(max(0.0, next_at - time.monotonic()))
        return utils


@dataclass
class Calibration:
    config: CalibrationConfig
    ns_per_iteration: float
    runs: list[Run]
    derived: Derived
    host: dict[str, Any]
    sizes: SizeCalibration | None = None


def _schedule(repeats: int) -> Iterator[tuple[int, Measurement]]:
    """Repeats interleaved: every measurement once, then again (a drift hits all alike)."""
    for r in range(repeats):
        for m in MEASUREMENTS:
            yield r, m


def node_ns_per_iteration(job: JobRun, gcomp: int) -> float | None:
    """The compute loop's cost in a node: CPU seconds per barrier / G_comp (the barrier's
    own CPU is a few hundred microseconds against tens of milliseconds)."""
    if job.rate <= 0 or gcomp <= 0:
        return None
    return job.cpu / job.rate / gcomp * 1e9


def run_calibration(
    cfg: CalibrationConfig, *, reuse_cluster: bool = False, say: Say = print
) -> Calibration:
    if os.geteuid() != 0:
        raise LiveError(
            "calibration runs jobs on the local cluster, which needs root: run it with sudo"
        )
    if cfg.repeats < 1 or cfg.duration <= 0:
        raise LiveError("--repeats must be >= 1 and --duration > 0")
    # The fine-grain job is sized from the loop's cost *inside a node*, read off the
    # first alone compute run (CPU seconds per barrier / G_comp): on this VM the same
    # loop ran up to 1.5x slower there than in this process a moment before.
    ns = ns_per_iteration()
    say(f"compute loop here: {ns:.1f} ns per iteration")
    work = Path(f"/tmp/cosched-calibrate-{os.getpid()}")
    runs: list[Run] = []
    with local_cluster(cfg, reuse_cluster, say) as cluster:
        state = _state_doc(cluster["state"])
        reader = cluster_cpu_reader()
        total = cfg.repeats * len(MEASUREMENTS)
        next_id = DRIVER_JOB_BASE
        for n, (repeat, m) in enumerate(_schedule(cfg.repeats), start=1):
            apps = [(k, cfg.app(k, ns)) for k in m.kinds]
            attempts = 0
            while True:
                attempts += 1
                quiet = hostload.wait_quiet(
                    cfg.quiet_limit,
                    cfg.quiet_window,
                    cfg.quiet_timeout,
                    cluster_cpu=reader,
                    say=say,
                )
                before = hostload.sample(reader)
                began = time.monotonic()
                if m.mode == "gang":
                    jobs = _gang(cfg, cluster["state"], apps, work / f"{m.key}-{repeat}-{attempts}")
                else:
                    driver = AgentDriver(state, next_id, cfg.quantum)
                    try:
                        jobs = driver.run(apps, cfg.duration)
                    finally:
                        next_id = driver.next_id
                        driver.close()
                other = hostload.other_cores(before, hostload.sample(reader))
                run = Run(m.key, repeat, jobs, other, quiet, time.monotonic() - began, attempts)
                # A run during which the host was busy elsewhere is run again (see
                # paired/run.py's _quiet_run): one foreign process takes half of a 2-core host.
                if other is None or other <= cfg.quiet_limit or attempts > cfg.quiet_retries:
                    break
                say(f"    disturbed ({other:.2f} cores busy outside the cluster): again")
            runs.append(run)
            say(f"[{n}/{total}] {m.name} (repeat {repeat + 1}/{cfg.repeats}): " + _line(run))
            if m.key == "alone.compute" and repeat == 0:
                ns = node_ns_per_iteration(run.jobs[0], cfg.app("compute", ns).gcomp) or ns
                say(
                    f"    compute loop in a node: {ns:.1f} ns per iteration; fine-grain job "
                    f"G_comp {cfg.fine(ns).gcomp} ({cfg.fine_compute_ms:g} ms)"
                )
    rates, cpus = tables(runs)
    derived = derive(rates, cpus, cfg.quantum)
    host = host_info(cfg, cluster)
    sizes = measure_program_sizes(cfg, work, say) if cfg.sizes else None
    return Calibration(cfg, ns, runs, derived, host, sizes)


def measure_program_sizes(cfg: CalibrationConfig, work: Path, say: Say) -> SizeCalibration:
    """The program's costs at every size of ``cfg.sizes`` (execmodel/programcal.py)."""
    from testbed.experiment.execmodel.programcal import SizeCalConfig, measure_sizes

    if os.geteuid() != 0:
        raise LiveError("calibration runs jobs on the local cluster: run it with sudo")
    scfg = SizeCalConfig(
        sizes=cfg.sizes,
        repeats=cfg.repeats,
        duration=cfg.duration,
        link=cfg.link,
        cgroup=cfg.cgroup,
        cfs_period_us=cfg.cfs_period_us,
        quiet_limit=cfg.quiet_limit,
        quiet_timeout=cfg.quiet_timeout,
    )
    return measure_sizes(scfg, ns_per_iteration=ns_per_iteration, work=work, say=say)


def _state_doc(path: str) -> dict[str, Any]:
    import json

    with open(path) as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def _gang(
    cfg: CalibrationConfig, state_path: str, apps: list[tuple[str, AppParams]], run_dir: Path
) -> list[JobRun]:
    jobs = [(f"{kind}{i}", kind, app) for i, (kind, app) in enumerate(apps)]
    res = run_controlled(
        state_path, cfg.nodes, cfg.quantum, cfg.duration, "gang", {}, jobs, run_dir
    )
    out = []
    for j in res.jobs:
        if j.barriers_per_second is None or j.state != "done":
            raise LiveError(f"gang run: job {j.name} {j.state}; see {run_dir}")
        cpus = j.rank_cpu_ratios or [j.cpu_ratio or 0.0]
        out.append(JobRun(j.kind, j.barriers_per_second, sum(cpus) / len(cpus), j.barriers or 0))
    return out


def _line(run: Run) -> str:
    parts = [f"{j.kind} {j.rate:.2f} barriers/s CPU {j.cpu:.3f}" for j in run.jobs]
    if run.other_cores is not None:
        parts.append(f"host busy outside {run.other_cores:.2f} cores")
    return "; ".join(parts)


def tables(
    runs: Sequence[Run],
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]]]:
    """Per measurement and kind, one figure per repeat (jobs of a kind averaged)."""
    rates: dict[str, dict[str, list[float]]] = {}
    cpus: dict[str, dict[str, list[float]]] = {}
    for run in sorted(runs, key=lambda r: (r.measurement, r.repeat)):
        for kind in dict.fromkeys(j.kind for j in run.jobs):
            js = [j for j in run.jobs if j.kind == kind]
            rates.setdefault(run.measurement, {}).setdefault(kind, []).append(
                sum(j.rate for j in js) / len(js)
            )
            cpus.setdefault(run.measurement, {}).setdefault(kind, []).append(
                sum(j.cpu for j in js) / len(js)
            )
    return rates, cpus


def quantum_utils(runs: Sequence[Run]) -> dict[str, dict[str, list[float]]]:
    """Per measurement and kind, every per-quantum utilization (pooled over repeats)."""
    out: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for j in run.jobs:
            out.setdefault(run.measurement, {}).setdefault(j.kind, []).extend(j.quantum_utils)
    return out


def pairing(runs: Sequence[Run], margin: float = 0.01) -> dict[str, float]:
    """How often paired gang's test would let the pairs pair (Wiseman & Feitelson 2003 §2.4, eq.
    (1)).

    * ``compute_io_alone``: eq. (1) over the compute job's per-quantum
      utilizations alone, against the I/O job's mean alone: can a compute row
      take the I/O row as its partner (Fig. 7, mix 1)?
    * ``compute_io_paired`` and ``fine_fine_paired``: the two jobs' eq. (1)
      predictions quantum by quantum while they ran paired.
    """

    def series(key: str, kind: str) -> list[list[float]]:
        return [
            j.quantum_utils
            for r in runs
            if r.measurement == key
            for j in r.jobs
            if j.kind == kind and j.quantum_utils
        ]

    def pooled(pairs: list[tuple[list[float], Sequence[float] | float]]) -> float | None:
        hits = total = 0
        for a, b in pairs:
            pa = eq1(a)
            pb: Sequence[float] | float = eq1(b) if not isinstance(b, float) else b
            f = fit_fraction(pa, pb, margin)
            if f is None:
                continue
            n = len(pa) if isinstance(pb, float) else min(len(pa), len(pb))
            hits += round(f * n)
            total += n
        return hits / total if total else None

    out: dict[str, float] = {}
    io_alone = [u for s_ in series("alone.io", "io") for u in s_]
    if io_alone:
        io_mean = sum(io_alone) / len(io_alone)
        f = pooled([(s_, io_mean) for s_ in series("alone.compute", "compute")])
        if f is not None:
            out["compute_io_alone"] = f
    for key, name in (
        ("paired.compute_io", "compute_io_paired"),
        ("paired.fine_fine", "fine_fine_paired"),
    ):
        pairs: list[tuple[list[float], Sequence[float] | float]] = []
        for r in runs:
            # the driver returns a run's jobs in the order of Measurement.kinds
            if r.measurement == key and len(r.jobs) == 2:
                a, b = r.jobs
                if a.quantum_utils and b.quantum_utils:
                    pairs.append((a.quantum_utils, b.quantum_utils))
        f = pooled(pairs)
        if f is not None:
            out[name] = f
    return out


def host_info(cfg: CalibrationConfig, cluster: Mapping[str, Any]) -> dict[str, Any]:
    rec = hostload.host_record()
    return {
        **{k: rec[k] for k in ("date", "kernel", "cores")},
        "cgroups": str(cluster.get("cgroups", "unknown")),
        "nodes": cfg.nodes,
        "cpus_per_node": cfg.cpus_per_node if cfg.cpus_per_node is not None else "unlimited",
        "cpu_mechanism": str((cluster.get("cpu") or {}).get("mechanism", cfg.cpu_mechanism)),
        "link": cfg.link,
        "delay_mechanism": str(cluster.get("delay_mechanism", "unknown")),
        "cosched_commit": rec["cosched_commit"],
        "working_tree_modified": rec["working_tree_modified"],
    }


# -- output -------------------------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(round(v, 9))  # microseconds per barrier need more than 6 decimals
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_table(name: str, table: Mapping[str, Any], comments: Mapping[str, str]) -> list[str]:
    """``[name]`` with its values, then its sub-tables; a table that holds only
    sub-tables gets no header of its own (TOML defines it implicitly)."""
    lines = []
    subs = []
    for k, v in table.items():
        if isinstance(v, Mapping):
            subs.append((k, v))
            continue
        line = f"{k} = {_toml_value(v)}"
        if k in comments:
            line = f"{line:<40}# {comments[k]}"
        lines.append(line)
    if lines or not subs:
        lines = [f"[{name}]", *lines, ""]
    for k, v in subs:
        lines += _toml_table(f"{name}.{k}", v, {})
    return lines


def _stats_doc(values: Sequence[float]) -> dict[str, Any]:
    s = stats(values)
    return {
        "mean": s.mean,
        "sd": s.sd,
        "min": s.lo,
        "max": s.hi,
        "spread": s.spread,
        "values": list(values),
    }


def measured_doc(cal: Calibration) -> dict[str, Any]:
    rates, cpus = tables(cal.runs)
    cfg, d = cal.config, cal.derived
    doc: dict[str, Any] = {
        "repeats": cfg.repeats,
        "duration": cfg.duration,
        "ns_per_iteration_in_node": cal.ns_per_iteration,
        "wait": cfg.wait or "spin",
        "spec": cfg.spec_path,
        "jobs": {
            k: {
                "gcomp": a.gcomp,
                "gio": a.gio,
                "bytes": a.nbytes,
                "device_latency": a.device_latency,
            }
            for k in KINDS
            for a in [cfg.app(k, cal.ns_per_iteration)]
        },
    }
    for m in MEASUREMENTS:
        mode = doc.setdefault(m.mode, {})
        entry: dict[str, Any] = {}
        for kind in dict.fromkeys(m.kinds):
            entry[f"{kind}_rate"] = _stats_doc(rates[m.key][kind])
            entry[f"{kind}_cpu"] = _stats_doc(cpus[m.key][kind])
        mode["_".join(m.kinds)] = entry
    qu = quantum_utils(cal.runs)
    for m in MEASUREMENTS:
        if m.mode == "gang":
            continue
        entry = doc[m.mode]["_".join(m.kinds)]
        for kind in dict.fromkeys(m.kinds):
            vals = sorted(qu.get(m.key, {}).get(kind, []))
            if vals:
                entry[f"{kind}_quantum_util"] = {
                    "mean": sum(vals) / len(vals),
                    "p10": _pct(vals, 10),
                    "p50": _pct(vals, 50),
                    "p90": _pct(vals, 90),
                    "quanta": len(vals),
                }
    doc["pairing"] = pairing(cal.runs)
    busy = [r.other_cores for r in cal.runs if r.other_cores is not None]
    doc["host_busy_outside_cores_max"] = max(busy) if busy else -1.0
    doc["derived"] = {
        "utilization_compute": d.utilization["compute"],
        "utilization_io": d.utilization["io"],
        "utilization_fine": d.utilization["fine"],
        "interference_fine_fine": d.interference_fine_fine,
        "interference_compute_io": d.interference_compute_io,
        "interference_compute_in_compute_io": d.interference_compute_io_jobs["compute"],
        "interference_io_in_compute_io": d.interference_compute_io_jobs["io"],
        "context_switch_raw": d.context_switch_raw,
        "context_switch_from_cpu": d.context_switch_cpu,
        "per_repeat": {k: list(v) for k, v in d.per_repeat.items()},
    }
    return doc


def _pct(sorted_values: Sequence[float], p: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


def to_toml(cal: Calibration) -> str:
    d = cal.derived
    model = {
        "quantum": cal.config.quantum,
        "interference": d.interference,
        "context_switch": d.context_switch,
        "fine_grain_utilization": d.utilization["fine"],
    }
    lines = [
        "# Execution-model parameters measured on the local cluster by `cosched calibrate`",
        "# (testbed/experiment/execmodel/calibrate.py; docs/simulator.md, Calibration). The",
        "# simulator reads [model]; [measured] keeps every raw figure, [host] where it was",
        "# measured.",
        "",
    ]
    measured = measured_doc(cal)
    if cal.sizes is not None:
        model.update(size_terms(cal.sizes))
        measured["sizes"] = size_doc(cal.sizes)
    lines += _toml_table("model", model, MODEL_COMMENTS)
    lines += _toml_table("measured", measured, {})
    lines += _toml_table("host", cal.host, {})
    return "\n".join(lines).rstrip() + "\n"


MODEL_COMMENTS = {
    "quantum": "seconds, the quantum the gang measurement used",
    "interference": "fraction, from fine + fine pairs",
    "context_switch": "seconds per switched-in quantum",
    "fine_grain_utilization": "CPU/wall of the fine-grain job alone",
    "launch": "seconds of a job's start (2 nodes, [measured.sizes])",
    "launch_cpu": "CPU share during the launch",
    "teardown": "seconds from the last barrier to the job's end",
    "barrier_wall_base": "b(n) = base + per_rank (n - 1) seconds, fitted at 2, 4, 8",
    "barrier_wall_per_rank": "seconds per added process",
    "barrier_cpu_base": "c(n), CPU seconds a process spends per barrier",
    "barrier_cpu_per_rank": "CPU seconds per added process",
    "resident_cost": "speed lost per frozen resident job, 1 s quanta ([measured.resident])",
}


def size_terms(sizes: SizeCalibration) -> dict[str, float]:
    from testbed.experiment.execmodel.programcal import model_terms, summarise

    return model_terms(summarise(sizes.runs))


def size_doc(sizes: SizeCalibration) -> dict[str, Any]:
    from testbed.experiment.execmodel.programcal import measured_doc as sizes_measured

    return sizes_measured(sizes)


def merge_sizes(existing: str, sizes: SizeCalibration, host: Mapping[str, Any]) -> str:
    """An existing calibration file with the size measurements (``--only sizes``) put in:
    the ``[model]`` terms and ``[measured.sizes]`` replaced, the rest kept."""
    import tomllib

    doc = tomllib.loads(existing)
    model = dict(doc.get("model", {}))
    model.update(size_terms(sizes))
    measured = dict(doc.get("measured", {}))
    measured["sizes"] = size_doc(sizes)
    host_doc = dict(doc.get("host", {}))
    host_doc["sizes"] = dict(host)
    return calibration_text(model, measured, host_doc)


def calibration_text(
    model: Mapping[str, Any], measured: Mapping[str, Any], host: Mapping[str, Any]
) -> str:
    """The calibration file (experiments/calibration.toml) as every writer leaves it."""
    lines = [
        "# Execution-model parameters measured on the local cluster by `cosched calibrate`",
        "# (testbed/experiment/execmodel/calibrate.py; docs/simulator.md, Calibration). The",
        "# simulator reads [model]; [measured] keeps every raw figure, [host] where it was",
        "# measured ([host.sizes], [host.resident]: `--only sizes`, `--only resident`, made",
        "# apart).",
        "",
    ]
    lines += _toml_table("model", model, MODEL_COMMENTS)
    lines += _toml_table("measured", measured, {})
    lines += _toml_table("host", host, {})
    return "\n".join(lines).rstrip() + "\n"


def summary(cal: Calibration) -> str:
    """The table ``cosched calibrate`` prints: what was measured and what was derived."""
    rates, cpus = tables(cal.runs)
    out = [
        f"{'measurement':<24}{'job':<9}{'barriers/s':>12}{'± sd':>8}{'spread':>8}{'CPU/wall':>10}",
        "-" * 71,
    ]
    for m in MEASUREMENTS:
        for kind in dict.fromkeys(m.kinds):
            r, c = stats(rates[m.key][kind]), stats(cpus[m.key][kind])
            out.append(
                f"{m.name:<24}{kind:<9}{r.mean:>12.2f}{r.sd:>8.2f}{r.spread:>8.1%}{c.mean:>10.3f}"
            )
    d = cal.derived

    def rng(key: str) -> str:
        v = d.per_repeat[key]
        return f"(repeats {min(v):+.3f} .. {max(v):+.3f})"

    out += [
        "",
        f"utilization u: compute {d.utilization['compute']:.3f}, io "
        f"{d.utilization['io']:.3f}, fine {d.utilization['fine']:.3f}",
        f"interference fine+fine      {d.interference_fine_fine:+.3f} "
        + rng("interference_fine_fine"),
        f"interference compute+io     {d.interference_compute_io:+.3f} (compute "
        f"{d.interference_compute_io_jobs['compute']:+.3f} {rng('interference_compute')}, io "
        f"{d.interference_compute_io_jobs['io']:+.3f} {rng('interference_io')})",
        f"context switch              {d.context_switch_raw * 1e3:+.2f} ms per quantum "
        f"(q = {cal.config.quantum:g} s) "
        + "(repeats "
        + " .. ".join(
            f"{x * 1e3:+.2f}"
            for x in (min(d.per_repeat["context_switch"]), max(d.per_repeat["context_switch"]))
        )
        + " ms)",
        f"  the same from CPU shares  {d.context_switch_cpu * 1e3:+.2f} ms per quantum",
        "",
        f"[model] interference = {d.interference:.4f} (fine + fine), context_switch = "
        f"{d.context_switch:.4f} s, fine_grain_utilization = {d.utilization['fine']:.3f}, "
        f"quantum = {cal.config.quantum:g}",
    ]
    qu = quantum_utils(cal.runs)
    for key, kind in (("alone.compute", "compute"), ("alone.io", "io"), ("alone.fine", "fine")):
        vals = sorted(qu.get(key, {}).get(kind, []))
        if vals:
            out.append(
                f"per-quantum utilization alone, {kind}: p10 {_pct(vals, 10):.3f}, "
                f"p50 {_pct(vals, 50):.3f}, p90 {_pct(vals, 90):.3f} ({len(vals)} quanta)"
            )
    fits = pairing(cal.runs)
    if fits:
        out.append(
            "quanta in which eq. (1) predictions pass x + y + 1% < 100%: "
            + ", ".join(f"{k} {v:.0%}" for k, v in fits.items())
        )
    busy = [r.other_cores for r in cal.runs if r.other_cores is not None]
    if busy:
        out.append(f"host busy outside the cluster: up to {max(busy):.2f} cores during a run")
    if cal.sizes is not None:
        from testbed.experiment.execmodel.programcal import summary_lines

        out += ["", *summary_lines(cal.sizes)]
    return "\n".join(out)
