"""Rajaei et al.'s study live, scaled to the local cluster (kind ``rajaei-live``; issue 14, item 2).

The same policies as the simulated study (rajaei/study.py) run a seeded
job stream of the synthetic program on a local cluster: gang with greedy and with
backfilling admission at several slot counts, lookahead backfilling and EASY; once with
the agents switching by the cgroup freezer and once by SIGSTOP/SIGCONT (Rajaei et al.'s own
mechanism, agent ``--switch signals``). The stream is then simulated with the same
sizes, submit times and dedicated times, so the report sets live and simulated side by
side.

Scaling, and what differs from the simulated study (docs/experiments.md, "Rajaei et al.'s
study"):

* ``nodes`` nodes with a dedicated core each (2 on this host) instead of 15; sizes
  uniform 1..nodes; one tick = one quantum; run times uniform 1..``max_ticks`` ticks;
  interarrival uniform [0, 2 × mean] at offered load ``load``, as in the simulation.
* Half the jobs run the synthetic program's *communication* preset (an allreduce
  every barrier, little compute per barrier), half its *compute* preset. Each preset's
  dedicated rate (barriers per second, by the job's size) is measured alone on the
  cluster first; a job's iterations are its run time × that rate.
* **Wait** live is the controller's record, submit → start: for the gang policies the
  job's admission into the matrix (it is launched then and first runs within its
  round, at most ``slots`` quanta later); for the batch policies its start. The
  simulator's wait is submit → first quantum run.

The simulated side is a sweep of independent runs (testbed.sweep), one per configuration.

    sudo cosched experiment run experiments/rajaei-live.toml --out docs/results/rajaei-live
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.claims import Claim, Difference, Verdict, judge, terminal
from testbed.experiment.claims import markdown as claims_markdown
from testbed.experiment.fields import Table, read_toml
from testbed.experiment.harness import LiveError
from testbed.experiment.harness import jobs as harness_jobs
from testbed.experiment.harness.controller import controller
from testbed.experiment.protocol import RunContext, Study
from testbed.sweep import RunSpec, SweepOptions, run_sweep

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SPEC = REPO / "experiments" / "rajaei-live.toml"


@dataclass(slots=True)
class LiveSpec:
    name: str
    path: str
    nodes: int = 2
    link: str = "myrinet"
    cpus_per_node: float | None = 1.0
    cpu_mechanism: str = "cpuset"
    cfs_period_us: int = 10_000
    cgroup: str = "auto"
    quantum: float = 0.2
    jobs: int = 16
    seed: int = 1
    load: float = 1.5
    max_ticks: int = 15
    max_overestimate: float = 2.0
    comm_share: float = 0.5
    configs: list[str] = field(
        default_factory=lambda: ["gang-greedy:1", "gang-greedy:3", "gang-backfill:3", "lookahead"]
    )
    switches: list[str] = field(default_factory=lambda: ["freezer", "signals"])
    compute_gcomp: int = 100_000
    comm_gcomp: int = 10_000
    comm_bytes: int = 4096
    rate_seconds: float = 2.0
    probe_barriers: int = 400  # each rate probe's length (measure_rates)
    drain_timeout: float = 300.0
    switch: str = "freezer"  # the cluster's mechanism while a run is on (set per run)
    quick: dict[str, Any] = field(default_factory=dict)  # the [quick] table's values

    def quick_version(self) -> LiveSpec:
        """The ``--quick`` variant: the [quick] table's values over these."""
        return replace(self, **self.quick, quick={}, name=self.name + "-quick")


_KNOWN = tuple(
    f.name for f in fields(LiveSpec) if f.name not in ("name", "path", "switch", "quick")
)


def _values(t: Table) -> dict[str, Any]:
    """The keys of a [rajaei_live] or [quick] table, each read as its default's type."""
    t.only({"name", *_KNOWN} if t.name == "rajaei_live" else set(_KNOWN))
    kw: dict[str, Any] = {}
    d = LiveSpec("", "")
    for k in _KNOWN:
        if not t.has(k):
            continue
        default = getattr(d, k)
        if isinstance(default, list):
            kw[k] = t.items(k, str)
        elif isinstance(default, bool):
            kw[k] = t.flag(k)
        elif isinstance(default, int):
            kw[k] = t.integer(k, minimum=1)
        elif isinstance(default, float) or default is None:
            kw[k] = t.number(k, minimum=0)
        else:
            kw[k] = t.text(k)
    return kw


def load_spec(doc: Table) -> LiveSpec:
    """A ``[rajaei_live]`` spec (experiments/rajaei-live.toml) and its ``[quick]`` table."""
    t = doc.table("rajaei_live", required=True)
    kw = _values(t)
    spec = LiveSpec(name=t.text("name", doc.path.stem), path=str(doc.path), **kw)
    quick = doc.table("quick")
    spec.quick = _values(quick)
    _checked(spec, t)
    _checked(spec.quick_version(), quick)
    return spec


def _checked(spec: LiveSpec, t: Table) -> LiveSpec:
    """``spec``'s configurations and switches named right (``t``: the table they came from)."""
    error = t.error
    for c in spec.configs:
        policy, _, slots = c.partition(":")
        if policy not in ("gang-greedy", "gang-backfill", "lookahead", "easy"):
            raise error(
                "configs",
                f"entry {c!r}",
                fix="use gang-greedy:K, gang-backfill:K, lookahead or easy",
            )
        if policy.startswith("gang") and not slots.isdigit():
            raise error("configs", f"entry {c!r} needs :SLOTS", fix="e.g. gang-greedy:3")
    for s in spec.switches:
        if s not in ("freezer", "signals"):
            raise error("switches", f"entry {s!r}", fix="use freezer or signals")
    return spec


def read_spec(path: str | Path) -> LiveSpec:
    return load_spec(Table.document(read_toml(path), path))


def spec_doc(path: str | Path) -> dict[str, Any]:
    """The spec as results.json keeps it (the report needs it)."""
    return _doc(read_spec(path))


def _doc(spec: LiveSpec) -> dict[str, Any]:
    """The spec as results.json keeps it: the values it ran with, not its [quick] table."""
    d = asdict(spec)
    d.pop("quick")
    return d


@dataclass(slots=True)
class StreamJob:
    index: int
    size: int
    kind: str  # "comm" | "compute"
    ticks: int
    estimate_ticks: float
    arrival: float


def make_stream(spec: LiveSpec) -> list[StreamJob]:
    """rajaei.make_jobs's draws, at this cluster's size."""
    rng = random.Random(spec.seed)
    mean_gap = (1 + spec.nodes) / 2 * (1 + spec.max_ticks) / 2 / (spec.load * spec.nodes)
    out, t = [], 0.0
    for k in range(spec.jobs):
        size = rng.randint(1, spec.nodes)
        ticks = rng.randint(1, spec.max_ticks)
        est = ticks * rng.uniform(1.0, spec.max_overestimate)
        kind = "comm" if rng.random() < spec.comm_share else "compute"
        out.append(StreamJob(k, size, kind, ticks, est, t * spec.quantum))
        t += rng.uniform(0.0, 2.0 * mean_gap)
    return out


def job_argv(spec: LiveSpec, kind: str, iterations: int) -> list[str]:
    """The synthetic program's compute or communication preset."""
    argv = [
        sys.executable,
        "-m",
        "apps.synthetic",
        "--iterations",
        str(iterations),
        "--wait",
        "block",
        "--connect-timeout",
        "120",
    ]
    if kind == "comm":
        return [
            *argv,
            "--gcomp",
            str(spec.comm_gcomp),
            "--comm",
            "allreduce",
            "--msg-bytes",
            str(spec.comm_bytes),
        ]
    return [*argv, "--gcomp", str(spec.compute_gcomp)]


@dataclass(slots=True)
class LiveRun:
    config: str
    switch: str
    makespan: float
    mean_wait: float
    mean_response: float
    waits: list[float]
    responses: list[float]
    failed: int
    seconds: float


def measure_rates(spec: LiveSpec, state: str, run_dir: Path, say: Any) -> dict[str, float]:
    """Each preset and size alone (FCFS, one job at a time): barriers per second from rank
    0's own report, and the start-up and end overhead: the controller's start-to-end time
    less the loop (``kind/size`` and ``kind/size/overhead``). The controller's times are
    only as fine as its quantum, so the rate does not come from them."""
    rates: dict[str, float] = {}
    probe = spec.probe_barriers
    with controller(state, "fcfs", spec.quantum, run_dir / "rates") as c:
        for kind in ("compute", "comm"):
            for size in range(1, spec.nodes + 1):
                jid = harness_jobs.submit(
                    c, f"rate-{kind}-{size}", size, job_argv(spec, kind, probe), estimate=60.0
                )
                rec = harness_jobs.wait_ended(c, [jid], 180, poll=0.1)[jid]
                wall = (rec.get("end_time") or 0) - (rec.get("start_time") or 0)
                rate = float(harness_jobs.rank0_report(c, jid).get("barriers_per_second") or 0.0)
                if rec["state"] != "done" or wall <= 0 or rate <= 0:
                    raise LiveError(f"rate probe {kind}/{size} ended {rec['state']} (rate {rate})")
                overhead = max(0.0, wall - probe / rate)
                rates[f"{kind}/{size}"] = rate
                rates[f"{kind}/{size}/overhead"] = overhead
                say(
                    f"    {kind} size {size}: {rate:.1f} barriers/s alone, start-up and end "
                    f"{overhead:.2f} s"
                )
    return rates


def dedicated(spec: LiveSpec, j: StreamJob, rates: dict[str, float]) -> tuple[int, float]:
    """A job's iterations (its ticks of work at the measured rate) and its dedicated time
    (those plus the start-up and end measured alone): the simulator runs that time."""
    rate = rates[f"{j.kind}/{j.size}"]
    iters = max(1, round(j.ticks * spec.quantum * rate))
    return iters, rates[f"{j.kind}/{j.size}/overhead"] + iters / rate


def run_config(
    spec: LiveSpec,
    config: str,
    stream: list[StreamJob],
    rates: dict[str, float],
    state: str,
    run_dir: Path,
) -> LiveRun:
    policy, _, slots = config.partition(":")
    params = {"max_slots": slots} if slots else {}
    with controller(state, policy, spec.quantum, run_dir, params) as c:
        ids: dict[int, int] = {}
        t0 = time.monotonic()
        for j in stream:
            delay = t0 + j.arrival - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            iters, ded = dedicated(spec, j, rates)
            argv = job_argv(spec, j.kind, iters)
            est = ded * j.estimate_ticks / j.ticks  # the same overestimate as the draw
            ids[j.index] = harness_jobs.submit(
                c, f"r{j.index}-{j.kind}", j.size, argv, estimate=est
            )
        deadline = time.monotonic() + spec.drain_timeout
        while True:
            recs = harness_jobs.records(c)
            if all(recs[i]["state"] in harness_jobs.TERMINAL for i in ids.values()):
                break
            if time.monotonic() > deadline:
                for i in ids.values():
                    if recs[i]["state"] not in harness_jobs.TERMINAL:
                        with contextlib.suppress(Exception):
                            c.request("kill", job_id=i)
                break
            time.sleep(0.2)
        recs = harness_jobs.records(c)
    mine = [recs[ids[j.index]] for j in stream]
    done = [r for r in mine if r["state"] == "done"]
    first = min(r["submit_time"] for r in mine)
    waits = [r["start_time"] - r["submit_time"] for r in done]
    resp = [r["end_time"] - r["submit_time"] for r in done]
    return LiveRun(
        config=config,
        switch=spec.switch,
        makespan=max(r["end_time"] for r in done) - first if done else math.nan,
        mean_wait=statistics.fmean(waits) if waits else math.nan,
        mean_response=statistics.fmean(resp) if resp else math.nan,
        waits=waits,
        responses=resp,
        failed=len(mine) - len(done),
        seconds=time.monotonic() - t0,
    )


def sim_params(
    spec: LiveSpec, stream: list[StreamJob], config: str, rates: dict[str, float]
) -> dict[str, Any]:
    """What one simulation of the stream depends on (a sweep run's parameters)."""
    from testbed.sim.calibration import resolve_calibration

    cal = resolve_calibration(None)
    return {
        "config": config,
        "nodes": spec.nodes,
        "quantum": spec.quantum,
        "context_switch": cal.context_switch,
        "interference": cal.interference,
        "jobs": [
            [
                j.index,
                j.arrival,
                j.size,
                j.kind,
                *dedicated(spec, j, rates),
                j.estimate_ticks,
                j.ticks,
            ]
            for j in stream
        ],
    }


def simulate_config(params: Mapping[str, Any], seed: int) -> dict[str, float]:
    """The stream through the simulator under one configuration: the same sizes and submit
    times, each job's dedicated time as measured (:func:`dedicated`). A sweep run."""
    from controller.policies.registry import make_policy
    from testbed.sim.engine import simulate as run
    from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob
    from testbed.sim.results import SimConfig
    from testbed.sim.workloads.synthetic import HOMOGENEOUS_CPU

    policy, _, slots = str(params["config"]).partition(":")
    jobs = [
        SimJob(
            job_id=index + 1,
            submit=arrival,
            size=size,
            runtime=ded,
            estimate=ded * est_ticks / ticks,
            phases=(Phase(1.0, HOMOGENEOUS_CPU),) if kind == "comm" else COMPUTE_BOUND,
        )
        for index, arrival, size, kind, _iters, ded, est_ticks, ticks in params["jobs"]
    ]
    nodes = int(params["nodes"])
    pol = make_policy(policy, nodes, {"max_slots": int(slots)} if slots else {})
    res = run(
        jobs,
        pol,
        SimConfig(
            nodes=nodes,
            quantum=float(params["quantum"]),
            context_switch=float(params["context_switch"]),
            interference=float(params["interference"]),
        ),
    )
    waits = [res.start[i] - j.submit for i, j in enumerate(res.jobs)]
    resp = [res.end[i] - j.submit for i, j in enumerate(res.jobs)]
    return {
        "makespan": max(res.end) - min(j.submit for j in res.jobs),
        "mean_wait": statistics.fmean(waits),
        "mean_response": statistics.fmean(resp),
    }


def simulate(
    spec: LiveSpec, stream: list[StreamJob], config: str, rates: dict[str, float]
) -> dict[str, float]:
    """One configuration, here (tests; the study hands them to the sweep executor)."""
    return simulate_config(sim_params(spec, stream, config, rates), 0)


def simulate_all(
    spec: LiveSpec,
    stream: list[StreamJob],
    rates: dict[str, float],
    sweep: SweepOptions | None = None,
) -> dict[str, dict[str, float]]:
    runs = [
        RunSpec("rajaei-live", sim_params(spec, stream, c, rates), 0, simulate_config)
        for c in spec.configs
    ]
    res = run_sweep(runs, sweep or SweepOptions(desc="simulations"))
    res.check()  # failed runs: each listed, exit status 1
    return {c: dict(r) for c, r in zip(spec.configs, res.results, strict=True) if r is not None}


def run_all(
    spec: LiveSpec,
    out: Path,
    say: Any = print,
    save: Any = None,
    sweep: SweepOptions | None = None,
) -> dict[str, Any]:
    """Both switch mechanisms, every configuration, then the simulations; ``save`` after every
    run."""
    from testbed.experiment.harness.cluster import local_cluster, require_root

    require_root("the live study")
    stream = make_stream(spec)
    result: dict[str, Any] = {
        "spec": _doc(spec),
        "stream": [asdict(j) for j in stream],
        "runs": [],
        "rates": {},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for sw in spec.switches:
        spec.switch = sw
        say(f"[{sw}] cluster of {spec.nodes} nodes, agents --switch {sw}")
        with local_cluster(spec, False, say, switch=sw) as cluster:
            state = cluster["state"]
            rates = measure_rates(spec, state, out / "runs" / sw, say)
            result["rates"][sw] = rates
            for config in spec.configs:
                r = run_config(spec, config, stream, rates, state, out / "runs" / sw / config)
                result["runs"].append(asdict(r))
                if save is not None:
                    save(result)
                say(
                    f"    {config:16s} makespan {r.makespan:6.2f} s, wait {r.mean_wait:5.2f} s,"
                    f" response {r.mean_response:5.2f} s, failed {r.failed} ({r.seconds:.0f} s)"
                )
    first = result["rates"][spec.switches[0]]
    result["sim"] = simulate_all(spec, stream, first, sweep)
    result["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def _run(result: Mapping[str, Any], config: str, switch: str) -> Mapping[str, Any] | None:
    return next(
        (r for r in result["runs"] if r["config"] == config and r["switch"] == switch), None
    )


_LIVE_CLAIMS = (
    (
        "fig9",
        "§6, Fig. 9",
        "mean wait decreases significantly from 1 to more slots",
        "mean_wait",
        "gang-greedy:1",
        "gang-greedy:3",
    ),
    (
        "fig6",
        "§6, Fig. 6",
        "gang's average wait is far less than backfill's",
        "mean_wait",
        "lookahead",
        "gang-greedy:3",
    ),
    (
        "fig5",
        "§6, Fig. 5",
        "the backfill makespan is always more than gang's",
        "makespan",
        "lookahead",
        "gang-greedy:3",
    ),
    (
        "greedy",
        "§6, Fig. 5",
        "gang with greedy admission seems superior to gang with backfilling admission",
        "makespan",
        "gang-backfill:3",
        "gang-greedy:3",
    ),
)


def claims(result: Mapping[str, Any]) -> list[Claim]:
    """Rajaei et al. 2008's findings as the live runs show them: one run per configuration
    and switch mechanism, so at best a direction (docs/reproduction.md)."""
    out = []
    switches = list(dict.fromkeys(r["switch"] for r in result["runs"]))
    for cid, where, says, what, a, b in _LIVE_CLAIMS:
        pairs = [(sw, _run(result, a, sw), _run(result, b, sw)) for sw in switches]
        got = [(sw, x[what], y[what]) for sw, x, y in pairs if x is not None and y is not None]
        if not got:
            continue
        measured = f"{what.replace('_', ' ')}, {a} vs {b}, s: " + "; ".join(
            f"{sw} {x:.2f} vs {y:.2f}" for sw, x, y in got
        )
        bad = [sw for sw, x, y in got if not x > y]
        if bad:
            verdict, why = Verdict.NOT_REPRODUCED, "the opposite direction: " + ", ".join(bad)
        else:
            verdict, why = judge(Difference((min(x - y for _, x, y in got),)), 1)
        out.append(Claim(f"rajaei2008/live/{cid}", where + " (live)", says, measured, verdict, why))
    return out


def markdown(result: Mapping[str, Any]) -> str:
    spec = result["spec"]
    L = [
        f"# {spec['name']}: Rajaei et al.'s study live on the local cluster",
        "",
        f"{spec['nodes']} nodes ({spec['cpu_mechanism']}, {spec['cpus_per_node']} CPU each, "
        f"link {spec['link']}), quantum {spec['quantum']} s = one tick; {spec['jobs']} jobs "
        f"(seed {spec['seed']}), sizes 1–{spec['nodes']}, run times 1–{spec['max_ticks']} "
        f"ticks, offered load {spec['load']}, {spec['comm_share'] * 100:.0f} % communication "
        "preset (allreduce every barrier), the rest compute preset. Run "
        f"{result['started']} – {result['ended']}. Wait live = submit → start in the "
        "controller's record (gang: admission into the matrix); simulated = submit → first "
        "quantum (testbed/experiment/rajaei/live.py).",
        "",
        "Measured alone, barriers/s (and start-up + end, s): "
        + "; ".join(
            f"{sw}: "
            + ", ".join(
                f"{k} {v:.1f} ({r[k + '/overhead']:.2f})"
                for k, v in r.items()
                if not k.endswith("/overhead")
            )
            for sw, r in result["rates"].items()
        )
        + f". The simulation uses the {next(iter(result['rates']))} cluster's figures.",
        "",
        "| config | switch | makespan (s) | mean wait (s) | mean response (s) | failed |"
        " simulated makespan | simulated wait | simulated response |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        s = result["sim"][r["config"]]
        L.append(
            f"| {r['config']} | {r['switch']} | {r['makespan']:.2f} | {r['mean_wait']:.2f} | "
            f"{r['mean_response']:.2f} | {r['failed']} | {s['makespan']:.2f} | "
            f"{s['mean_wait']:.2f} | {s['mean_response']:.2f} |"
        )
    L += ["", *claims_markdown(claims(result), "## The paper beside ours")]
    L += ["![makespan and wait](live.png)", ""]
    return "\n".join(L) + "\n"


def plot(result: Mapping[str, Any], out: Path) -> Path:
    from testbed.experiment import plots as plotting

    plt = plotting.pyplot()
    configs = list(result["sim"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, what in zip(axes, ("makespan", "mean_wait"), strict=True):
        width = 0.8 / (1 + len({r["switch"] for r in result["runs"]}))
        xs = range(len(configs))
        ax.bar(
            [x - 0.4 + width / 2 for x in xs],
            [result["sim"][c][what] for c in configs],
            width,
            label="simulated",
        )
        for k, sw in enumerate(sorted({r["switch"] for r in result["runs"]})):
            vals = {r["config"]: r[what] for r in result["runs"] if r["switch"] == sw}
            ax.bar(
                [x - 0.4 + width * (k + 1.5) for x in xs],
                [vals.get(c, 0) for c in configs],
                width,
                label=f"live, {sw}",
            )
        ax.set_xticks(list(xs), configs, rotation=20, fontsize=8)
        ax.set_ylabel(what.replace("_", " ") + " (s)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "live.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


class RajaeiLiveStudy(Study):
    kind = "rajaei-live"
    title = "Rajaei et al. 2008, Figs. 5-9 live: gang vs lookahead backfilling, freezer and signals"
    live = True
    spec_tables: ClassVar[tuple[str, ...]] = ("rajaei_live", "quick")
    specs = ("experiments/rajaei-live.toml",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        return load_spec(doc)

    def quick(self, spec: Any) -> Any:
        return spec.quick_version()

    def plan(self, spec: Any) -> list[str]:
        return [
            f"{spec.jobs} jobs (seed {spec.seed}) on {spec.nodes} nodes, quantum {spec.quantum} s: "
            f"{', '.join(spec.configs)}, once per switch mechanism ({', '.join(spec.switches)}), "
            "each mechanism on its own cluster; then the stream simulated per configuration"
        ]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        return run_all(spec, ctx.out, ctx.say, ctx.save, ctx.sweep)

    def render(self, data: Any) -> dict[str, str]:
        return {"report.md": markdown(data)}

    def plots(self, data: Any, out: Path) -> list[Path]:
        return [plot(data, out)]

    def summary(self, data: Any) -> str:
        return terminal(claims(data))

    def claims(self, data: Any) -> list[Claim]:
        return claims(data)


STUDY = RajaeiLiveStudy()
