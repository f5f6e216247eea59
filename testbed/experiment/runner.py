"""Run a live experiment: local cluster, controller, synthetic jobs (seed 000 §4.1).

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
failure or Ctrl-C, unless ``reuse_cluster`` is set and one is already up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from testbed.experiment.spec import CONFIGS, ExperimentSpec

TERMINAL = {"done", "failed", "killed"}


class ExperimentError(RuntimeError):
    """The experiment could not run (one line, with what to do)."""


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

    def rate(self, kind: str) -> float | None:
        """Mean barriers per second of the jobs of one kind (Fig. 7 top)."""
        rates = [j.barriers_per_second for j in self.jobs if j.kind == kind]
        vals = [r for r in rates if r is not None]
        return sum(vals) / len(vals) if vals else None


@dataclass
class ExperimentResult:
    spec: dict[str, Any]
    cluster: dict[str, Any]
    runs: list[RunResult]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


Say = Callable[[str], None]


def run_experiment(
    spec: ExperimentSpec, out: Path, *, reuse_cluster: bool = False, say: Say = print
) -> ExperimentResult:
    if os.geteuid() != 0:
        raise ExperimentError(
            "the live experiment needs root (network namespaces, cgroups): run it with sudo"
        )
    out.mkdir(parents=True, exist_ok=True)
    with _cluster(spec, reuse_cluster, say) as cluster:
        runs: list[RunResult] = []
        total = len(spec.configs) * len(spec.mixes)
        for config in spec.configs:
            for mix in spec.mixes:
                say(
                    f"[{len(runs) + 1}/{total}] {config}, mix {mix} ({mix} I/O + {4 - mix} compute)"
                )
                run = _run_mix(spec, config, mix, cluster, out / f"{config}-mix{mix}")
                runs.append(run)
                say("    " + _one_line(run))
    spec_doc = {
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
    }
    result = ExperimentResult(spec=spec_doc, cluster=cluster, runs=runs)
    (out / "results.json").write_text(result.to_json() + "\n")
    return result


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
    return ", ".join(parts)


class ClusterSettings(Protocol):
    """What bringing the cluster up needs from a spec (ExperimentSpec, StreamSpec)."""

    @property
    def nodes(self) -> int: ...
    @property
    def link(self) -> str: ...
    @property
    def cpus_per_node(self) -> float | None: ...
    @property
    def cpu_mechanism(self) -> str: ...
    @property
    def cfs_period_us(self) -> int: ...
    @property
    def cgroup(self) -> str: ...


@contextlib.contextmanager
def _cluster(spec: ClusterSettings, reuse: bool, say: Say) -> Iterator[dict[str, Any]]:
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod
    from testbed.cluster.errors import ClusterError
    from testbed.cluster.profiles import parse_profile

    env = cluster_mod.Env()
    existing = state_mod.load(env.sdir())
    made = False
    if existing is not None:
        if not reuse:
            raise ExperimentError(
                "a local cluster is already up: `cosched cluster down` first, or pass "
                "--reuse-cluster to run on it"
            )
        if len(existing.nodes) != spec.nodes:
            raise ExperimentError(
                f"the running cluster has {len(existing.nodes)} nodes, the spec wants "
                f"{spec.nodes}: `cosched cluster down` first"
            )
        st = existing
    else:
        say(f"cluster up: {spec.nodes} nodes, link {spec.link}, cpus/node {spec.cpus_per_node}")
        try:
            st = cluster_mod.up(
                cluster_mod.ClusterConfig(
                    nodes=spec.nodes,
                    profile=parse_profile(spec.link),
                    cpus_per_node=spec.cpus_per_node,
                    cpu_mechanism=spec.cpu_mechanism,
                    cfs_period_us=spec.cfs_period_us,
                    cgroup=spec.cgroup,
                ),
                env,
            )
        except (ClusterError, ValueError) as exc:
            raise ExperimentError(f"cluster up failed: {exc}") from None
        made = True
    info = {
        "nodes": [n["name"] for n in st.nodes],
        "link": st.profile,
        "delay_mechanism": st.delay_mechanism,
        "cgroups": st.cgroup_layout.get("mode", "unknown"),
        "cpu": st.cpu,
        "state": state_mod.state_path(env.sdir()),
    }
    try:
        yield info
    finally:
        if made:
            say("cluster down")
            cluster_mod.down(env)


def _run_mix(
    spec: ExperimentSpec, config: str, mix: int, cluster: dict[str, Any], run_dir: Path
) -> RunResult:
    from controller.client import ControllerClient, ControllerError

    policy, params = CONFIGS[config]
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "controller",
        "--policy",
        policy,
        "--quantum",
        str(spec.quantum),
        "--cluster-state",
        cluster["state"],
        "--run-dir",
        str(run_dir),
        "--log-level",
        "WARNING",
    ]
    for k, v in params.items():
        cmd += ["--param", f"{k}={v}"]
    began = time.monotonic()
    with (run_dir / "controller.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = ControllerClient(str(run_dir / "controller.sock"), retry=20.0, timeout=10.0)
    submitted: dict[int, tuple[str, str]] = {}
    try:
        _wait_socket(run_dir / "controller.sock", proc)
        kinds = ["compute"] * (4 - mix) + ["io"] * mix
        for index, kind in enumerate(kinds):
            app = spec.compute if kind == "compute" else spec.io
            name = f"{kind}{index}"
            argv = [sys.executable, "-m", "apps.synthetic", *app.argv(spec.duration)]
            res = client.request(
                "submit",
                spec={"name": name, "size": spec.nodes, "argv": argv, "class": "production"},
            )
            submitted[int(res["job_id"])] = (name, kind)
        slots = _slots(client.request("matrix"))
        records = _wait_jobs(client, submitted, timeout=spec.duration * 4 + 60)
        status = client.request("status")
        jobs = [
            _job_result(client, jid, name, kind, slots.get(jid), records[jid])
            for jid, (name, kind) in submitted.items()
        ]
        with contextlib.suppress(ControllerError, OSError):
            client.request("shutdown", checkpoint=False)
    finally:
        client.close()
        _stop(proc)
    partner = status.get("slot_partner_ratio") or {}
    return RunResult(
        config=config,
        mix=mix,
        jobs=jobs,
        quanta=int(status.get("quanta", 0)),
        skew_p50_s=status.get("skew_p50_s"),
        skew_p99_s=status.get("skew_p99_s"),
        matching_success_ratio=status.get("matching_success_ratio") if policy != "gang" else None,
        slot_partner_ratio={int(k): float(v) for k, v in partner.items()},
        wall_seconds=time.monotonic() - began,
    )


def _wait_socket(path: Path, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise ExperimentError(
                f"the controller exited with {proc.returncode}; see {path.parent}/controller.log"
            )
        if time.monotonic() > deadline:
            raise ExperimentError(f"the controller did not answer within {timeout:g} s")
        time.sleep(0.05)


def _slots(matrix: dict[str, Any]) -> dict[int, int]:
    where: dict[int, int] = {}
    for s, row in enumerate(matrix.get("slots", [])):
        for cell in row:
            if cell is not None:
                where.setdefault(int(cell), s)
    return where


def _wait_jobs(
    client: Any, jobs: dict[int, tuple[str, str]], timeout: float
) -> dict[int, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        records = {int(r["job_id"]): r for r in client.request("jobs", all=True)}
        mine = {j: records[j] for j in jobs if j in records}
        if len(mine) == len(jobs) and all(r["state"] in TERMINAL for r in mine.values()):
            return mine
        if time.monotonic() > deadline:
            for j, r in mine.items():
                if r["state"] not in TERMINAL:
                    with contextlib.suppress(Exception):
                        client.request("kill", job_id=j)
            raise ExperimentError(f"jobs did not finish within {timeout:g} s")
        time.sleep(0.5)


def _job_result(
    client: Any, jid: int, name: str, kind: str, slot: int | None, record: dict[str, Any]
) -> JobResult:
    detail = client.request("job", job_id=jid)
    ranks = detail.get("ranks") or []  # in rank order
    report = _last_json(Path(ranks[0]["stdout"])) if ranks and ranks[0].get("stdout") else {}
    return JobResult(
        job_id=jid,
        name=name,
        kind=kind,
        slot=slot,
        state=record["state"],
        barriers=report.get("barriers"),
        barriers_per_second=report.get("barriers_per_second"),
        cpu_ratio=report.get("cpu_ratio"),
    )


def _last_json(path: Path) -> dict[str, Any]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    return doc
    return {}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
