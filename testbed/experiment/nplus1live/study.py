"""N + 1 gangs against strict and paired gang on the live cluster (issue 31 item 1, Wiseman &
Feitelson 2003 §5), from an ``[nplus1]`` spec (experiments/nplus1-live.toml).

On 2 nodes with a core each, one compute-, one disk- and one network-bound job, each as
wide as the cluster (apps/devicejob.py: alone, 0.90 of the CPU, 0.80 of the disk, 0.80
of the shaped link, as the simulator's ``DEVICE_KINDS``), run under every policy, the
policies interleaved in every repeat (ABCABC...). Before the runs, on one controller:

1. **The devices' capacity** (``disk_bps``, ``net_bps``): the disk and the network job
   run alone without pauses for ``calib_seconds``, the controller's capacities set to
   ``PROBE_BPS`` (it clamps a share to 1, and at its defaults the disk read 1.000); the
   agents' share of each quantum times ``PROBE_BPS`` is bytes per second per node, and
   the median over the quanta is what the node's disk path and link move for such a
   job. The controller of every run is given these (``set``).
2. **The work of each job**: each kind alone with its pauses for ``calib_seconds``; its
   units per second times ``solo_seconds`` is its work in the runs (``--units``), so
   every job needs about ``solo_seconds`` alone. The shares measured there are each
   kind's device vector alone.

A run keeps per job its response time (end - submit, the controller's record), its
elapsed time and units, and its throughput (bytes per second over the ranks; units per
second for the compute job); and per quantum (the controller's status, polled every
``poll_s``) the rows that ran and each job's measured share of each device: which groups
ran and each device's use over time.

    sudo cosched experiment run experiments/nplus1-live.toml [--quick] [--out DIR]
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.fields import Table
from testbed.experiment.harness import LiveError, hostload
from testbed.experiment.harness import jobs as harness_jobs

KINDS = ("compute", "disk", "net")
POLICIES = ("gang", "paired-gang", "nplus1")
DEVICES = ("cpu", "disk", "net")
# The study traces every job's disk and network shares (status ``last_quantum``) under
# every policy, and a controller has its agents read a device's bytes only for a policy
# that uses them (docs/controller.md): this study asks for all of them.
ACK_ALL = ("--ack-devices", "all")
# bytes/s: the capacities set while the devices are measured (calibrate), above any disk
# path and link here, yet low enough that the status's 4 decimals keep 3 digits
PROBE_BPS = {"disk": 2e10, "net": 1e9}
Say = Callable[[str], None]

_EXP = ("name", "policies", "repeats", "n", "solo_seconds", "calib_seconds", "poll_s",
        "drain_timeout", "quiet_limit", "scratch")  # fmt: skip


@dataclass(frozen=True)
class KindJob:
    """One kind's program arguments (apps/devicejob.py)."""

    duty: float
    loops: int = 200_000
    block: int = 16 << 20

    def argv(self, kind: str, scratch: str, duty: float | None = None) -> list[str]:
        k = {"compute": "cpu", "disk": "disk", "net": "net"}[kind]
        args = ["--kind", k, "--duty", str(self.duty if duty is None else duty)]
        if k == "cpu":
            args += ["--loops", str(self.loops)]
        else:
            args += ["--block", str(self.block)]
        if k == "disk":
            args += ["--dir", scratch]
        return [sys.executable, "-m", "apps.devicejob", *args]


@dataclass
class Nplus1LiveSpec:
    name: str = "nplus1-live"
    policies: list[str] = field(default_factory=lambda: list(POLICIES))
    repeats: int = 3
    n: int = 2
    solo_seconds: float = 4.0
    calib_seconds: float = 3.0
    poll_s: float = 0.1
    drain_timeout: float = 120.0
    quiet_limit: float = 0.0  # > 0: wait (up to 20 s) until the host is this quiet
    scratch: str = "/var/tmp"  # the disk job's files go in a fresh folder here
    quantum: float = 0.2
    nodes: int = 2
    link: str = "fast-ethernet"
    cpus_per_node: float | None = 1.0
    cpu_mechanism: str = "cpuset"
    cfs_period_us: int = 10_000
    cgroup: str = "auto"
    jobs: dict[str, KindJob] = field(
        default_factory=lambda: {
            "compute": KindJob(0.9),
            "disk": KindJob(0.8),
            "net": KindJob(0.8, block=256 << 10),
        }
    )
    quick: dict[str, Any] = field(default_factory=dict)

    def quick_version(self) -> Nplus1LiveSpec:
        return replace(self, **self.quick, quick={})

    def params(self, policy: str) -> dict[str, str]:
        return {"n": str(self.n)} if policy == "nplus1" else {}


def _exp_values(t: Table) -> dict[str, Any]:
    t.only(_EXP)
    out: dict[str, Any] = {}
    if t.has("name"):
        out["name"] = t.text("name")
    if t.has("policies"):
        out["policies"] = t.items("policies", str, choices=POLICIES, unique=True)
    for k in ("repeats", "n"):
        if t.has(k):
            out[k] = t.integer(k, minimum=1)
    for k in ("solo_seconds", "calib_seconds", "poll_s", "drain_timeout"):
        if t.has(k):
            out[k] = t.number(k, above=0)
    if t.has("quiet_limit"):
        out["quiet_limit"] = t.number("quiet_limit", minimum=0)
    if t.has("scratch"):
        out["scratch"] = t.text("scratch")
    return out


def load_spec(doc: Table) -> Nplus1LiveSpec:
    """An ``[nplus1]`` spec with ``[cluster]``, ``[controller]``, ``[jobs.*]`` and ``[quick]``."""
    spec = Nplus1LiveSpec(**_exp_values(doc.table("nplus1", required=True)))
    cl = doc.table("cluster")
    cl.only({"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup"})
    ctl = doc.table("controller")
    ctl.only({"quantum"})
    jobs = doc.table("jobs")
    jobs.only(set(KINDS))
    kinds = dict(spec.jobs)
    for kind in KINDS:
        if jobs.has(kind):
            t = jobs.table(kind)
            t.only({"duty", "loops", "block"})
            base = kinds[kind]
            kinds[kind] = KindJob(
                duty=t.number("duty", base.duty, above=0, maximum=1),
                loops=t.integer("loops", base.loops, minimum=1),
                block=t.integer("block", base.block, minimum=1),
            )
    spec = replace(
        spec,
        nodes=cl.integer("nodes", 2, minimum=2),
        link=cl.text("link", spec.link),
        cpus_per_node=cl.number("cpus_per_node", 1.0, above=0),
        cpu_mechanism=cl.text("cpu_mechanism", spec.cpu_mechanism),
        cfs_period_us=cl.integer("cfs_period_us", spec.cfs_period_us, minimum=1),
        cgroup=cl.text("cgroup", "auto", choices=("auto", "v1", "v2")),
        quantum=ctl.number("quantum", spec.quantum, minimum=0.01),
        jobs=kinds,
        quick=_exp_values(doc.table("quick")),
    )
    return spec


# ---- what a run keeps ------------------------------------------------------------------


@dataclass
class JobRun:
    kind: str
    job_id: int
    state: str
    response_s: float | None  # end - submit (the controller's record)
    wait_s: float | None  # start - submit
    elapsed_s: float | None  # rank 0's first unit to its last
    units: int | None
    bytes: int  # over the ranks
    cpu_s: float | None  # rank 0's CPU seconds

    @property
    def throughput(self) -> float | None:
        """Bytes per second (disk, net), units per second (compute), while the job ran."""
        if not self.elapsed_s:
            return None
        work = self.units if self.kind == "compute" else self.bytes
        return None if work is None else work / self.elapsed_s


@dataclass
class PolicyRun:
    policy: str
    repeat: int
    jobs: list[JobRun]
    trace: list[dict[str, Any]]  # per quantum seen: t, quanta, kinds that ran, shares
    quanta: int
    wall_s: float
    other_cores: float | None  # host CPU outside the experiment during the run
    loadavg: list[float] = field(default_factory=list)  # /proc/loadavg before the run

    def job(self, kind: str) -> JobRun:
        return next(j for j in self.jobs if j.kind == kind)


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return []


# ---- the runs ------------------------------------------------------------------------


def run_study(spec: Nplus1LiveSpec, out: Path, say: Say, save: Callable[[Any], None]) -> Any:
    from testbed.experiment.harness.cluster import cluster_cpu_reader, local_cluster, require_root

    require_root()
    out.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"spec": _spec_doc(spec), "calibration": {}, "runs": []}
    scratch = Path(tempfile.mkdtemp(prefix="cosched-nplus1live-", dir=spec.scratch))
    try:
        with local_cluster(spec, False, say) as cluster:
            data["cluster"] = {k: v for k, v in cluster.items() if k != "state"}
            reader = cluster_cpu_reader()
            cal = calibrate(spec, cluster["state"], str(scratch), out / "calibration", say)
            data["calibration"] = cal
            save(data)
            for rep in range(spec.repeats):
                for policy in spec.policies:
                    say(f"[repeat {rep + 1}/{spec.repeats}] {policy}")
                    if spec.quiet_limit > 0:
                        hostload.wait_quiet(spec.quiet_limit, 2.0, 20.0, cluster_cpu=reader,
                                            say=say)  # fmt: skip
                    run = run_policy(spec, policy, rep, cal, cluster["state"], str(scratch),
                                     out / f"{policy}-{rep + 1}", reader)  # fmt: skip
                    data["runs"].append(asdict(run))
                    say("    " + one_line(run))
                    save(data)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    data["host"] = hostload.host_record()
    return data


def _spec_doc(spec: Nplus1LiveSpec) -> dict[str, Any]:
    d = asdict(spec)
    d.pop("quick")
    return d


def _submit(client: Any, spec: Nplus1LiveSpec, name: str, argv: list[str]) -> int:
    return harness_jobs.submit(client, name, spec.nodes, argv)


class Tracer:
    """The controller's last quantum, every time its quantum count moves."""

    def __init__(self, kinds: Mapping[int, str]) -> None:
        self.kinds = dict(kinds)
        self.t0 = time.monotonic()
        self.seen = -1
        self.rows: list[dict[str, Any]] = []

    def __call__(self, client: Any) -> None:
        st = client.request("status")
        q = int(st.get("quanta", 0))
        if q == self.seen:
            return
        self.seen = q
        last = st.get("last_quantum") or {}
        ran = sorted(self.kinds[j] for j in last.get("runnable", []) if j in self.kinds)
        shares = {
            self.kinds[int(j)]: {d: float(v) for d, v in dev.items()}
            for j, dev in (last.get("devices") or {}).items()
            if int(j) in self.kinds
        }
        row = {"t": round(time.monotonic() - self.t0, 3), "quanta": q, "ran": ran, "shares": shares}
        # nplus1: each row's predicted vector, what its next matching reads
        predicted = {
            "+".join(sorted(self.kinds[j] for j in r["jobs"] if j in self.kinds)): r["demand"]
            for r in (last.get("row_demand") or {}).values()
        }
        if predicted:
            row["predicted"] = predicted
        self.rows.append(row)

    def watch_until(self, client: Any, ids: list[int], timeout: float, poll: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self(client)
            recs = harness_jobs.records(client)
            if all(recs.get(j, {}).get("state") in harness_jobs.TERMINAL for j in ids):
                return
            time.sleep(poll)
        for j in ids:
            with contextlib.suppress(Exception):  # ended meanwhile
                client.request("kill", job_id=j)
        raise LiveError(f"jobs {ids} did not end within {timeout:g} s")


def _solo(
    client: Any, spec: Nplus1LiveSpec, kind: str, argv: list[str], say: Say
) -> dict[str, Any]:
    """One job alone for ``calib_seconds``: its reports and its measured shares."""
    jid = _submit(client, spec, f"solo-{kind}", [*argv, "--seconds", str(spec.calib_seconds)])
    tr = Tracer({jid: kind})
    tr.watch_until(client, [jid], spec.calib_seconds * 4 + 60, spec.poll_s)
    reports = harness_jobs.rank_reports(client, jid)
    shares = [r["shares"][kind] for r in tr.rows if kind in r["shares"]]
    med = {d: statistics.median(s.get(d, 0.0) for s in shares) for d in DEVICES} if shares else {}
    say(f"    alone: {kind}, duty {argv[6]}: shares {_fmt(med)} over {len(shares)} quanta")
    return {"reports": reports, "median_shares": med, "quanta": len(shares)}


def _fmt(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{d} {v:.3f}" for d, v in shares.items())


def calibrate(
    spec: Nplus1LiveSpec, state: str, scratch: str, run_dir: Path, say: Say
) -> dict[str, Any]:
    """The devices' capacity and each kind's work (module docstring, steps 1 and 2)."""
    from testbed.experiment.harness.controller import controller

    cal: dict[str, Any] = {}
    with controller(state, "gang", spec.quantum, run_dir, args=ACK_ALL) as client:
        cfg = client.request("config")
        cal["default_bps"] = {"disk": float(cfg["disk_bps"]), "net": float(cfg["net_bps"])}
        # The controller clamps a share to 1: the probe's capacity is set far above any
        # device here, so the share is a fraction and share x probe is bytes per second.
        client.request("set", disk_bps=PROBE_BPS["disk"], net_bps=PROBE_BPS["net"])
        cal["probe_bps"] = dict(PROBE_BPS)
        bps: dict[str, float] = {}
        for kind, dev in (("disk", "disk"), ("net", "net")):
            argv = spec.jobs[kind].argv(kind, scratch, duty=1.0)
            solo = _solo(client, spec, kind, argv, say)
            share = solo["median_shares"].get(dev, 0.0)
            if not 0 < share < 0.9:
                raise LiveError(
                    f"calibration: the {kind} job alone read {share:.4f} of {dev} at "
                    f"{PROBE_BPS[dev] / 1e9:g} GB/s (0: no block I/O or TCP accounting here; "
                    "near 1: a device faster than the probe)"
                )
            bps[dev] = share * PROBE_BPS[dev]
            own = [r for r in solo["reports"] if r.get("elapsed_s")]
            # what the job itself says it moved, per node: a check on the agents' figure
            cal[f"{kind}_own_bps_per_node"] = (
                sum(float(r["bytes"]) / float(r["elapsed_s"]) for r in own) / spec.nodes
                if kind == "disk"
                else (float(own[0]["bytes"]) / float(own[0]["elapsed_s"]) if own else None)
            )
            cal[f"{kind}_unpaused"] = solo
            say(f"    {dev}_bps = {bps[dev] / 1e6:.1f} MB/s per node")
        cal["bps"] = bps
        client.request("set", disk_bps=bps["disk"], net_bps=bps["net"])
        units: dict[str, int] = {}
        alone: dict[str, Any] = {}
        for kind in KINDS:
            solo = _solo(client, spec, kind, spec.jobs[kind].argv(kind, scratch), say)
            r0 = solo["reports"][0] if solo["reports"] else {}
            if not r0.get("units") or not r0.get("elapsed_s"):
                raise LiveError(f"calibration: the {kind} job alone reported no work: {r0}")
            rate = float(r0["units"]) / float(r0["elapsed_s"])
            units[kind] = max(1, round(rate * spec.solo_seconds))
            alone[kind] = {**solo, "units_per_s": rate}
        cal["alone"] = alone
        cal["units"] = units
    return cal


def run_policy(
    spec: Nplus1LiveSpec,
    policy: str,
    repeat: int,
    cal: Mapping[str, Any],
    state: str,
    scratch: str,
    run_dir: Path,
    reader: Callable[[], float] | None,
) -> PolicyRun:
    """The three jobs, submitted together, under ``policy`` until all have ended."""
    from testbed.experiment.harness.controller import controller

    load = _loadavg()
    before = hostload.sample(reader)
    began = time.monotonic()
    with controller(
        state, policy, spec.quantum, run_dir, spec.params(policy), args=ACK_ALL
    ) as client:
        client.request("set", disk_bps=cal["bps"]["disk"], net_bps=cal["bps"]["net"])
        ids: dict[int, str] = {}
        for kind in KINDS:
            argv = [*spec.jobs[kind].argv(kind, scratch), "--units", str(cal["units"][kind])]
            ids[_submit(client, spec, kind, argv)] = kind
        tr = Tracer(ids)
        tr.watch_until(client, list(ids), spec.drain_timeout, spec.poll_s)
        recs = harness_jobs.records(client)
        jobs = [_job_run(client, jid, kind, recs[jid]) for jid, kind in ids.items()]
        quanta = int(client.request("status").get("quanta", 0))
    return PolicyRun(
        policy=policy,
        repeat=repeat + 1,
        jobs=jobs,
        trace=tr.rows,
        quanta=quanta,
        wall_s=time.monotonic() - began,
        other_cores=hostload.other_cores(before, hostload.sample(reader)),
        loadavg=load,
    )


def _job_run(client: Any, jid: int, kind: str, rec: Mapping[str, Any]) -> JobRun:
    reports = harness_jobs.rank_reports(client, jid)
    r0 = reports[0] if reports else {}
    sub, start, end = rec.get("submit_time"), rec.get("start_time"), rec.get("end_time")
    return JobRun(
        kind=kind,
        job_id=jid,
        state=str(rec.get("state")),
        response_s=float(end) - float(sub) if end is not None and sub is not None else None,
        wait_s=float(start) - float(sub) if start is not None and sub is not None else None,
        elapsed_s=float(r0["elapsed_s"]) if "elapsed_s" in r0 else None,
        units=int(r0["units"]) if "units" in r0 else None,
        bytes=int(sum(float(r.get("bytes", 0)) for r in reports)),
        cpu_s=float(r0["cpu_s"]) if "cpu_s" in r0 else None,
    )


def one_line(run: PolicyRun) -> str:
    parts = []
    for j in run.jobs:
        tp = j.throughput
        unit = "units/s" if j.kind == "compute" else "MB/s"
        scale = 1.0 if j.kind == "compute" else 1e-6
        tps = f"{tp * scale:.1f} {unit}" if tp is not None else "-"
        resp = f"{j.response_s:.1f} s" if j.response_s is not None else "-"
        parts.append(f"{j.kind} {tps}, response {resp}")
    busy = f", host busy outside {run.other_cores:.2f} cores" if run.other_cores is not None else ""
    return "; ".join(parts) + busy


def runs_of(data: Mapping[str, Any]) -> list[PolicyRun]:
    out = []
    for r in data.get("runs", []):
        r = dict(r)
        r["jobs"] = [JobRun(**j) for j in r["jobs"]]
        out.append(PolicyRun(**r))
    return out
