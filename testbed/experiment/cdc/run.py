"""Run a job-stream experiment live: Yu & Byun's schemes on the local cluster.

For every (scheme, load, MPL) of the spec (:meth:`StreamSpec.runs`) a fresh
controller is started with ``--policy SCHEME --mpl MPL`` (it tells every
agent the scheme), the same seeded stream of jobs is submitted at its
arrival times, and the run ends when every job has ended (or the drain
timeout killed the rest). Per run we keep each job's wait, execution and
response time from the controller's records, the CPU the jobs used, and what
the agents' ``cdc`` counters gained over the run (decision points, boost
conflicts, message delays; docs/cdc.md) -- read from every agent's status
right after the controller configured them and again at the end.

The cluster comes up for the experiment and goes down after it, also on
failure or Ctrl-C, unless ``reuse_cluster`` is set and one is up already.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.experiment.cdc.stream import (
    StreamJob,
    StreamSpec,
    bcr,
    cdc_delta,
    job_stream,
    job_times,
    md_mean_s,
    mean,
    utilization,
)
from testbed.experiment.harness import LiveError
from testbed.experiment.harness import jobs as harness_jobs
from testbed.experiment.harness.cluster import Say, local_cluster, require_root
from testbed.experiment.harness.controller import controller
from testbed.experiment.harness.loopcost import ns_per_iteration

REPO = Path(__file__).resolve().parents[3]
NEEDED_FLAGS = ("--comm", "--msg-bytes", "--comm-rounds")


@dataclass
class StreamJobResult:
    index: int
    name: str
    app: str
    size: int
    job_id: int | None
    state: str
    nodes: list[str] = field(default_factory=list)
    wait_s: float | None = None
    exec_s: float | None = None
    response_s: float | None = None
    cpu_s: float = 0.0
    report: dict[str, Any] = field(default_factory=dict)  # rank 0's JSON line
    verified: bool | None = None  # programs = "npb": rank 0 printed VERIFIED


@dataclass
class StreamRun:
    scheme: str
    load: str
    mpl: int
    jobs: list[StreamJobResult]
    cdc: dict[str, Any] | None = None  # cdc_delta over the run
    utilization: float | None = None
    local_policy: dict[str, str] = field(default_factory=dict)  # node -> what it runs
    killed: int = 0  # jobs still running at the drain timeout
    wall_seconds: float = 0.0

    def done(self) -> list[StreamJobResult]:
        return [j for j in self.jobs if j.state == "done"]

    def avg(self, what: str, app: str | None = None) -> float | None:
        """Mean of ``wait_s``, ``exec_s`` or ``response_s`` over the jobs that completed."""
        return mean([getattr(j, what) for j in self.done() if app is None or j.app == app])

    @property
    def bcr(self) -> float | None:
        return bcr(self.cdc)

    @property
    def md_mean_s(self) -> float | None:
        return md_mean_s(self.cdc)


@dataclass
class StreamResult:
    spec: dict[str, Any]
    cluster: dict[str, Any]
    runs: list[StreamRun]
    ns_per_iteration: float | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamResult:
        runs = []
        for r in d.get("runs", []):
            r = dict(r)
            r["jobs"] = [StreamJobResult(**j) for j in r.get("jobs", [])]
            runs.append(StreamRun(**r))
        return cls(
            spec=dict(d.get("spec") or {}),
            cluster=dict(d.get("cluster") or {}),
            runs=runs,
            ns_per_iteration=d.get("ns_per_iteration"),
        )


def check_synthetic(python: str = sys.executable) -> None:
    """The synthetic program must have its communication phases (apps/synthetic.py)."""
    proc = subprocess.run(
        [python, "-m", "apps.synthetic", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    missing = [f for f in NEEDED_FLAGS if f not in proc.stdout]
    if proc.returncode != 0 or missing:
        raise LiveError(
            f"apps/synthetic.py has no {', '.join(missing) or 'usable --help'}: the job streams"
            " need its communication phases (the message library); update the tree"
        )


def run_streams(
    spec: StreamSpec,
    out: Path,
    *,
    reuse_cluster: bool = False,
    say: Say = print,
    save: Any = None,
) -> StreamResult:
    """Every (scheme, load, MPL) of the spec; ``save(result)`` after every run, so a long
    experiment that fails keeps what it measured."""
    require_root()
    check_synthetic()
    out.mkdir(parents=True, exist_ok=True)
    ns = ns_per_iteration()
    say(f"synthetic program: {ns:.1f} ns per compute iteration on this host")
    plan = spec.runs()
    result = StreamResult(spec=spec.to_dict(), cluster={}, runs=[], ns_per_iteration=ns)
    with local_cluster(spec, reuse_cluster, say) as cluster:
        result.cluster = cluster
        agents = _agents(cluster["state"])
        for k, (scheme, load, mpl) in enumerate(plan, start=1):
            jobs = job_stream(spec, load)
            say(
                f"[{k}/{len(plan)}] {scheme}, {load} load (mean interarrival "
                f"{spec.mean_interarrival(load):.2f} s), MPL {mpl}: {len(jobs)} jobs"
            )
            run = _run_one(
                spec,
                scheme,
                load,
                mpl,
                jobs,
                ns,
                cluster,
                agents,
                out / f"{scheme}-{load}-mpl{mpl}",
            )
            result.runs.append(run)
            say("    " + one_line(run))
            if save is not None:
                save(result)  # partial results survive
    return result


def one_line(run: StreamRun) -> str:
    parts = [f"{len(run.done())}/{len(run.jobs)} done"]
    for label, key in (("response", "response_s"), ("wait", "wait_s"), ("exec", "exec_s")):
        v = run.avg(key)
        if v is not None:
            parts.append(f"{label} {v:.2f} s")
    parts.append("BCR " + ("-" if run.bcr is None else f"{run.bcr:.3f}"))
    parts.append("MD " + ("-" if run.md_mean_s is None else f"{run.md_mean_s * 1e3:.2f} ms"))
    if run.utilization is not None:
        parts.append(f"util {run.utilization:.0%}")
    odd = {n: v for n, v in run.local_policy.items() if v != run.scheme}
    if odd:
        parts.append(f"agents not on {run.scheme}: {odd}")
    checked = [j.verified for j in run.jobs if j.verified is not None]
    if checked:
        parts.append(f"{sum(checked)}/{len(checked)} VERIFIED")
    if run.killed:
        parts.append(f"{run.killed} killed at the drain timeout")
    return ", ".join(parts)


# ---- one run ------------------------------------------------------------------------------


@dataclass
class _Agents:
    nodes: list[Any]
    key: bytes
    cpus: float


def _agents(state_path: str) -> _Agents:
    from common.keys import read_key
    from controller.daemon import nodes_from_cluster

    with open(state_path) as f:
        state = json.load(f)
    nodes = nodes_from_cluster(state)
    return _Agents(nodes, read_key(state["key_file"]), sum(n.capacity for n in nodes))


def _cdc_snapshot(agents: _Agents) -> dict[str, dict[str, Any] | None]:
    """Every agent's status ``cdc`` block (None where an agent has none or is unreachable)."""
    from agent.client import AgentClient, AgentError

    out: dict[str, dict[str, Any] | None] = {}
    for n in agents.nodes:
        try:
            with AgentClient(n.address, agents.key, sender="experiment", timeout=5.0) as c:
                cdc = c.status(n.name).get("cdc")
        except (OSError, AgentError, ValueError):
            cdc = None
        out[n.name] = cdc if isinstance(cdc, dict) else None
    return out


def _controller_args(spec: StreamSpec, scheme: str, mpl: int) -> list[str]:
    args = [
        "--spin-us",
        f"{spec.spin_us:g}",
        "--boost",
        spec.boost,
    ]
    if scheme != "batch":
        args += ["--mpl", str(mpl)]
    if spec.tick_ms is not None:  # else the agents decide at the cluster's interval
        args += ["--tick-ms", f"{spec.tick_ms:g}"]
    return args


def _run_one(
    spec: StreamSpec,
    scheme: str,
    load: str,
    mpl: int,
    jobs: list[StreamJob],
    ns: float,
    cluster: dict[str, Any],
    agents: _Agents,
    run_dir: Path,
) -> StreamRun:
    began = time.monotonic()
    ids: dict[int, StreamJob] = {}
    with controller(
        cluster["state"], scheme, spec.quantum, run_dir, args=_controller_args(spec, scheme, mpl)
    ) as client:
        status = client.request("status")  # the agents were told the scheme before it served
        before = _cdc_snapshot(agents)
        t0 = time.monotonic()
        for job in jobs:
            delay = t0 + job.arrival_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            ids[harness_jobs.submit(client, job.name, job.size, job.argv(ns))] = job
        records, killed = harness_jobs.drain(client, list(ids), spec.drain_timeout)
        after = _cdc_snapshot(agents)
        results = [_job_result(client, jid, job, records.get(jid)) for jid, job in ids.items()]
    return StreamRun(
        scheme=scheme,
        load=load,
        mpl=mpl,
        jobs=sorted(results, key=lambda r: r.index),
        cdc=cdc_delta(before, after),
        utilization=utilization(list(records.values()), agents.cpus),
        local_policy=dict(status.get("local_policy") or {}),
        killed=killed,
        wall_seconds=time.monotonic() - began,
    )


def _job_result(
    client: Any, jid: int, job: StreamJob, record: dict[str, Any] | None
) -> StreamJobResult:
    out = StreamJobResult(job.index, job.name, job.app, job.size, jid, "unknown")
    if record is None:
        return out
    out.state = str(record["state"])
    out.nodes = list(record.get("nodes") or [])
    out.cpu_s = float(record.get("cpu_s") or 0.0)
    times = job_times(record)
    if times is not None:
        out.wait_s, out.exec_s, out.response_s = times
    with contextlib.suppress(Exception):
        ranks = client.request("job", job_id=jid).get("ranks") or []
        if ranks and ranks[0].get("stdout"):
            path = Path(ranks[0]["stdout"])
            if job.program == "npb":  # the kernel's NPB-style report, not a JSON line
                text = path.read_text(errors="replace")
                out.verified = "Verification    =  VERIFIED" in text.rsplit("NAS Parallel", 1)[-1]
            else:
                out.report = harness_jobs.last_json(path)
    return out
