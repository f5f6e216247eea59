"""Rajaei et al.'s study live, scaled to the local cluster (issue 14, item 2).

The same policies as the simulated study (testbed/experiment/rajaei.py) run a seeded
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

    sudo python -m testbed.experiment.rajaei.live experiments/rajaei-live.toml \
        --out docs/results/rajaei-live
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SPEC = REPO / "experiments" / "rajaei-live.toml"


class RajaeiLiveError(UsageError):
    """A live Rajaei et al. 2008 spec that cannot be run."""


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
    drain_timeout: float = 300.0
    switch: str = "freezer"  # the cluster's mechanism while a run is on (set per run)


_KNOWN = set(LiveSpec.__dataclass_fields__) - {"name", "path", "switch"}


def load_spec(path: str | Path) -> LiveSpec:
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise RajaeiLiveError(f"{p}: no such spec", fix="give a TOML spec path") from None
    except tomllib.TOMLDecodeError as e:
        raise RajaeiLiveError(f"{p}: not valid TOML: {e}", fix="fix the TOML syntax") from None
    t = raw.get("rajaei_live")
    if not isinstance(t, dict):
        raise RajaeiLiveError(f"{p}: no [rajaei_live] table", fix="start with [rajaei_live]")
    kw: dict[str, Any] = {"name": str(t.get("name", p.stem)), "path": str(p)}
    for k, v in t.items():
        if k == "name":
            continue
        if k not in _KNOWN:
            raise RajaeiLiveError(
                f"{p}: [rajaei_live] has no key {k!r}", fix="valid: " + ", ".join(sorted(_KNOWN))
            )
        kw[k] = v
    spec = LiveSpec(**kw)
    for c in spec.configs:
        policy, _, slots = c.partition(":")
        if policy not in ("gang-greedy", "gang-backfill", "lookahead", "easy"):
            raise RajaeiLiveError(
                f"{p}: configs entry {c!r}",
                fix="use gang-greedy:K, gang-backfill:K, lookahead or easy",
            )
        if policy.startswith("gang") and not slots.isdigit():
            raise RajaeiLiveError(
                f"{p}: configs entry {c!r} needs :SLOTS", fix="e.g. gang-greedy:3"
            )
    for s in spec.switches:
        if s not in ("freezer", "signals"):
            raise RajaeiLiveError(f"{p}: switches entry {s!r}", fix="use freezer or signals")
    return spec


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
    argv = [sys.executable, "-m", "apps.synthetic", "--iterations", str(iterations),
            "--wait", "block", "--connect-timeout", "120"]  # fmt: skip
    if kind == "comm":
        return [*argv, "--gcomp", str(spec.comm_gcomp), "--comm", "allreduce",
                "--msg-bytes", str(spec.comm_bytes)]  # fmt: skip
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


def _submit(client: Any, name: str, size: int, argv: list[str], estimate: float) -> int:
    spec = {"name": name, "size": size, "argv": argv, "class": "production",
            "cwd": str(REPO), "estimate": estimate}  # fmt: skip
    return int(client.request("submit", spec=spec)["job_id"])


def _records(client: Any) -> dict[int, dict[str, Any]]:
    return {int(r["job_id"]): r for r in client.request("jobs", all=True)}


def measure_rates(spec: LiveSpec, state: str, run_dir: Path, say: Any) -> dict[str, float]:
    """Each preset and size alone (FCFS, one job at a time): barriers per second from rank
    0's own report, and the start-up and end overhead: the controller's start-to-end time
    less the loop (``kind/size`` and ``kind/size/overhead``). The controller's times are
    only as fine as its quantum, so the rate does not come from them."""
    from testbed.experiment.simvslive.study import _controller, _rank0_report, _wait_ended

    rates: dict[str, float] = {}
    probe = 400
    with _controller(state, "fcfs", spec.quantum, run_dir / "rates") as c:
        for kind in ("compute", "comm"):
            for size in range(1, spec.nodes + 1):
                jid = _submit(c, f"rate-{kind}-{size}", size, job_argv(spec, kind, probe), 60.0)
                rec = _wait_ended(c, [jid], 180)[jid]
                wall = (rec.get("end_time") or 0) - (rec.get("start_time") or 0)
                rate = float(_rank0_report(c, jid).get("barriers_per_second") or 0.0)
                if rec["state"] != "done" or wall <= 0 or rate <= 0:
                    raise RajaeiLiveError(
                        f"rate probe {kind}/{size} ended {rec['state']} (rate {rate})"
                    )
                overhead = max(0.0, wall - probe / rate)
                rates[f"{kind}/{size}"] = rate
                rates[f"{kind}/{size}/overhead"] = overhead
                say(f"    {kind} size {size}: {rate:.1f} barriers/s alone, start-up and end "
                    f"{overhead:.2f} s")  # fmt: skip
    return rates


def dedicated(spec: LiveSpec, j: StreamJob, rates: dict[str, float]) -> tuple[int, float]:
    """A job's iterations (its ticks of work at the measured rate) and its dedicated time
    (those plus the start-up and end measured alone): the simulator runs that time."""
    rate = rates[f"{j.kind}/{j.size}"]
    iters = max(1, round(j.ticks * spec.quantum * rate))
    return iters, rates[f"{j.kind}/{j.size}/overhead"] + iters / rate


def run_config(
    spec: LiveSpec, config: str, stream: list[StreamJob], rates: dict[str, float], state: str,
    run_dir: Path,
) -> LiveRun:  # fmt: skip
    from testbed.experiment.simvslive.study import TERMINAL, _controller

    policy, _, slots = config.partition(":")
    params = [f"max_slots={slots}"] if slots else []
    with _controller(state, policy, spec.quantum, run_dir, params) as c:
        ids: dict[int, int] = {}
        t0 = time.monotonic()
        for j in stream:
            delay = t0 + j.arrival - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            iters, ded = dedicated(spec, j, rates)
            argv = job_argv(spec, j.kind, iters)
            est = ded * j.estimate_ticks / j.ticks  # the same overestimate as the draw
            ids[j.index] = _submit(c, f"r{j.index}-{j.kind}", j.size, argv, est)
        deadline = time.monotonic() + spec.drain_timeout
        while True:
            recs = _records(c)
            if all(recs[i]["state"] in TERMINAL for i in ids.values()):
                break
            if time.monotonic() > deadline:
                for i in ids.values():
                    if recs[i]["state"] not in TERMINAL:
                        with contextlib.suppress(Exception):
                            c.request("kill", job_id=i)
                break
            time.sleep(0.2)
        recs = _records(c)
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


def simulate(
    spec: LiveSpec, stream: list[StreamJob], config: str, rates: dict[str, float]
) -> dict[str, float]:
    """The same stream through the simulator: the same sizes and submit times, each job's
    dedicated time as measured (:func:`dedicated`)."""
    from controller.policies.registry import make_policy
    from testbed.sim.calibration import resolve_calibration
    from testbed.sim.engine import simulate as run
    from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob
    from testbed.sim.results import SimConfig
    from testbed.sim.workloads.synthetic import HOMOGENEOUS_CPU

    policy, _, slots = config.partition(":")
    jobs = [
        SimJob(
            job_id=j.index + 1, submit=j.arrival, size=j.size,
            runtime=dedicated(spec, j, rates)[1],
            estimate=dedicated(spec, j, rates)[1] * j.estimate_ticks / j.ticks,
            phases=(Phase(1.0, HOMOGENEOUS_CPU),) if j.kind == "comm" else COMPUTE_BOUND,
        )
        for j in stream
    ]  # fmt: skip
    cal = resolve_calibration(None)
    pol = make_policy(policy, spec.nodes, {"max_slots": int(slots)} if slots else {})
    res = run(jobs, pol, SimConfig(nodes=spec.nodes, quantum=spec.quantum,
                                   context_switch=cal.context_switch,
                                   interference=cal.interference))  # fmt: skip
    waits = [res.start[i] - j.submit for i, j in enumerate(res.jobs)]
    resp = [res.end[i] - j.submit for i, j in enumerate(res.jobs)]
    return {
        "makespan": max(res.end) - min(j.submit for j in res.jobs),
        "mean_wait": statistics.fmean(waits),
        "mean_response": statistics.fmean(resp),
    }


def run_all(spec: LiveSpec, out: Path, say: Any = print) -> dict[str, Any]:
    from testbed.experiment.paired.run import _cluster

    stream = make_stream(spec)
    result: dict[str, Any] = {
        "spec": spec.path,
        "stream": [asdict(j) for j in stream],
        "runs": [],
        "rates": {},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for sw in spec.switches:
        spec.switch = sw
        say(f"[{sw}] cluster of {spec.nodes} nodes, agents --switch {sw}")
        with _cluster(spec, False, say) as cluster:
            state = cluster["state"]
            rates = measure_rates(spec, state, out / "runs" / sw, say)
            result["rates"][sw] = rates
            for config in spec.configs:
                r = run_config(spec, config, stream, rates, state, out / "runs" / sw / config)
                result["runs"].append(asdict(r))
                say(
                    f"    {config:16s} makespan {r.makespan:6.2f} s, wait {r.mean_wait:5.2f} s,"
                    f" response {r.mean_response:5.2f} s, failed {r.failed} ({r.seconds:.0f} s)"
                )
    first = result["rates"][spec.switches[0]]
    result["sim"] = {c: simulate(spec, stream, c, first) for c in spec.configs}
    result["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def markdown(result: dict[str, Any], spec: LiveSpec) -> str:
    L = [
        f"# {spec.name}: Rajaei et al.'s study live on the local cluster",
        "",
        f"{spec.nodes} nodes ({spec.cpu_mechanism}, {spec.cpus_per_node} CPU each, link "
        f"{spec.link}), quantum {spec.quantum} s = one tick; {spec.jobs} jobs (seed "
        f"{spec.seed}), sizes 1–{spec.nodes}, run times 1–{spec.max_ticks} ticks, offered load "
        f"{spec.load}, {spec.comm_share * 100:.0f} % communication preset (allreduce every "
        f"barrier), the rest compute preset. Run {result['started']} – {result['ended']}. "
        "Wait live = submit → start in the controller's record (gang: admission into the "
        "matrix); simulated = submit → first quantum (testbed/experiment/rajaeilive.py).",
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
    L += ["", "![makespan and wait](live.png)", ""]
    return "\n".join(L) + "\n"


def plot(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(result["sim"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, what in zip(axes, ("makespan", "mean_wait"), strict=True):
        width = 0.8 / (1 + len({r["switch"] for r in result["runs"]}))
        xs = range(len(configs))
        ax.bar([x - 0.4 + width / 2 for x in xs], [result["sim"][c][what] for c in configs],
               width, label="simulated")  # fmt: skip
        for k, sw in enumerate(sorted({r["switch"] for r in result["runs"]})):
            vals = {r["config"]: r[what] for r in result["runs"] if r["switch"] == sw}
            ax.bar([x - 0.4 + width * (k + 1.5) for x in xs], [vals.get(c, 0) for c in configs],
                   width, label=f"live, {sw}")  # fmt: skip
        ax.set_xticks(list(xs), configs, rotation=20, fontsize=8)
        ax.set_ylabel(what.replace("_", " ") + " (s)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "live.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.experiment.rajaei.live",
        description="Rajaei et al.'s study live on the local cluster (root): gang-greedy and "
        "gang-backfill at several slot counts, lookahead and EASY, with the freezer and with "
        "SIGSTOP/SIGCONT switching; the same stream simulated beside it.",
    )
    ap.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC))
    ap.add_argument("--out", type=Path, default=None, help="default results/<name>")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        out = args.out or Path("results") / spec.name
        out.mkdir(parents=True, exist_ok=True)
        if args.report_only:
            result = json.loads((out / "results.json").read_text())
        else:
            import os

            if os.geteuid() != 0:
                raise RajaeiLiveError("the live study needs root", fix="run it with sudo")
            result = run_all(spec, out)
            (out / "results.json").write_text(json.dumps(result, indent=1))
        (out / "report.md").write_text(markdown(result, spec))
        print(out / "report.md")
        print(plot(result, out))
    except CoschedError as e:
        print(f"rajaeilive: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("rajaeilive: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
