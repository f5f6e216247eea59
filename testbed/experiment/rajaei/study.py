"""Rajaei et al.'s study in the simulator: gang scheduling with greedy and with backfilling
admission against batch lookahead backfilling (Rajaei, Dadfar & Joshi, §3, §5–6).

The paper runs its policies on a 15-worker cluster with a randomly generated workload
("the arrival time, estimated execution time, the actual run-time and the number of
requested nodes were generated randomly", §4; "using the Linux rand() function", §5.2)
and reports makespan and mean wait against the number of jobs (Figs. 5–6), the wait of
80 jobs sorted by arrival (Fig. 7) and makespan and mean wait against the number of time
slots, 1 to 15 (Figs. 8–9). It gives no distributions, units or loads, so this module
chooses them and says so (docs/experiments.md, "Rajaei et al.'s study"):

* **Time** is counted in ticks; one tick is one quantum ("the resolution of simulation
  time and the time interval between context switches have been kept the same", §5.2).
* **Jobs**: uniform draws, as ``rand()`` gives: size 1..15 nodes, actual run time
  1..``max_runtime`` ticks, estimate = run time × uniform [1, ``max_overestimate``]
  (users overestimate; only the backfilling policies read it), interarrival uniform
  [0, 2 × mean] with the mean set so that the offered load (node-ticks asked per tick
  ÷ 15) is ``load``. The paper's pools are submitted faster than the machine drains
  them (its batch waits "increase more rapidly" with the number of jobs), so the
  default load is above 1.
* **Communication-oriented vs compute-intensive** (§6): a share ``comm_share`` of the
  jobs gets the fine-grain profile (45 % CPU, a barrier every 1/600 of the run,
  Wiseman & Feitelson 2003 §4.2.1), the rest the compute-bound profile. Under gang scheduling
  alone in
  its slot a job's progress does not depend on its profile; beside an alternate the
  execution model's interference applies (docs/simulator.md).
* **Wait** is the paper's "length of time from when a job arrives to when it enters the
  running state for the first time"; Fig. 7 plots it per job. We also report the
  response (arrival to end), which is what the paper's prose calls response time for
  gang.
* **Context switch**: each switched-in quantum loses ``context_switch`` seconds
  (testbed/sim/execution.py). ``switch_costs`` lists the values studied: ``"calibration"``
  (experiments/calibration.toml, measured on the live cluster) and fractions of the
  quantum measured on this host on other days.
* **Slots** (Figs. 8–9): ``max_slots`` of gang-greedy and gang-backfill; the number-of-
  jobs figures use ``default_slots``.

Each point is the mean over ``seeds`` independent workloads.

    python -m testbed.experiment.rajaei.study experiments/rajaei-gang-vs-backfill.toml \
        --out docs/results/rajaei-gang-vs-backfill   [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError

DEFAULT_SPEC = Path(__file__).resolve().parents[3] / "experiments" / "rajaei-gang-vs-backfill.toml"
GANG_POLICIES = ("gang-greedy", "gang-backfill")
BATCH_POLICIES = ("lookahead", "easy")
ALL_POLICIES = GANG_POLICIES + BATCH_POLICIES


class RajaeiError(UsageError):
    """A Rajaei et al. 2008 study spec that cannot be run."""


@dataclass(frozen=True, slots=True)
class SwitchCost:
    label: str
    seconds: float  # per switched-in quantum


@dataclass(slots=True)
class RajaeiSpec:
    name: str
    path: str
    nodes: int = 15
    quantum: float = 1.0
    job_counts: list[int] = field(default_factory=lambda: [10, 20, 40, 60, 80])
    slots: list[int] = field(default_factory=lambda: [1, 2, 3, 5, 10, 15])
    slot_jobs: list[int] = field(default_factory=lambda: [80])
    default_slots: int = 5
    policies: list[str] = field(default_factory=lambda: list(ALL_POLICIES))
    seeds: int = 5
    load: float = 1.5
    max_runtime: int = 20
    max_overestimate: float = 2.0
    comm_share: float = 0.5
    switch_costs: list[Any] = field(default_factory=lambda: ["calibration"])
    fig7_jobs: int = 80
    quick: dict[str, Any] = field(default_factory=dict)

    def quick_version(self) -> RajaeiSpec:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(self.quick)
        d["quick"] = {}
        d["name"] = self.name + "-quick"
        return RajaeiSpec(**d)


_KNOWN = set(RajaeiSpec.__dataclass_fields__) - {"name", "path", "quick"}


def load_spec(path: str | Path) -> RajaeiSpec:
    """Read and check a ``[rajaei]`` spec; every error is one line naming file and key."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise RajaeiError(f"{p}: no such spec", fix="give the path of a TOML spec") from None
    except tomllib.TOMLDecodeError as e:
        raise RajaeiError(f"{p}: not valid TOML: {e}", fix="fix the TOML syntax") from None
    t = raw.get("rajaei")
    if not isinstance(t, dict):
        raise RajaeiError(f"{p}: no [rajaei] table", fix="start the spec with [rajaei]")
    kwargs: dict[str, Any] = {"name": str(t.get("name", p.stem)), "path": str(p)}
    for key, value in t.items():
        if key == "name":
            continue
        if key not in _KNOWN:
            raise RajaeiError(
                f"{p}: [rajaei] has no key {key!r}",
                fix="valid keys: " + ", ".join(sorted(_KNOWN | {"name"})),
            )
        kwargs[key] = value
    quick = raw.get("quick", {})
    if not isinstance(quick, dict):
        raise RajaeiError(f"{p}: [quick] must be a table", fix="write [quick] with keys")
    for key in quick:
        if key not in _KNOWN:
            raise RajaeiError(
                f"{p}: [quick] has no key {key!r}", fix="valid keys: " + ", ".join(sorted(_KNOWN))
            )
    kwargs["quick"] = dict(quick)
    spec = RajaeiSpec(**kwargs)
    check(spec)
    return spec


def check(s: RajaeiSpec) -> None:
    where = s.path

    def bad(what: str, fix: str) -> RajaeiError:
        return RajaeiError(f"{where}: {what}", fix=fix)

    if not isinstance(s.nodes, int) or s.nodes < 1:
        raise bad(f"nodes = {s.nodes!r}", "a positive whole number (Rajaei et al. 2008: 15)")
    if not isinstance(s.quantum, (int, float)) or s.quantum <= 0:
        raise bad(f"quantum = {s.quantum!r}", "a positive number of seconds")
    for key in ("job_counts", "slots", "slot_jobs"):
        v = getattr(s, key)
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and x > 0 for x in v):
            raise bad(f"{key} = {v!r}", "a non-empty list of positive whole numbers")
    if not all(isinstance(x, str) for x in s.policies) or not s.policies:
        raise bad(f"policies = {s.policies!r}", "a list of policy names")
    unknown = [x for x in s.policies if x not in ALL_POLICIES]
    if unknown:
        raise bad(f"unknown policy {unknown[0]!r}", "valid: " + ", ".join(ALL_POLICIES))
    if not isinstance(s.seeds, int) or s.seeds < 1:
        raise bad(f"seeds = {s.seeds!r}", "a positive whole number")
    if not isinstance(s.load, (int, float)) or s.load <= 0:
        raise bad(f"load = {s.load!r}", "a positive number (offered node-ticks per tick / nodes)")
    if not isinstance(s.max_runtime, int) or s.max_runtime < 1:
        raise bad(f"max_runtime = {s.max_runtime!r}", "a positive whole number of ticks")
    if not isinstance(s.max_overestimate, (int, float)) or s.max_overestimate < 1:
        raise bad(f"max_overestimate = {s.max_overestimate!r}", "a number >= 1")
    if not isinstance(s.comm_share, (int, float)) or not 0 <= s.comm_share <= 1:
        raise bad(f"comm_share = {s.comm_share!r}", "a fraction in [0, 1]")
    if not isinstance(s.default_slots, int) or s.default_slots < 1:
        raise bad(f"default_slots = {s.default_slots!r}", "a positive whole number")
    for c in s.switch_costs:
        if c != "calibration" and not (isinstance(c, (int, float)) and 0 <= c < 1):
            raise bad(
                f"switch_costs entry {c!r}",
                'use "calibration" or a fraction of the quantum in [0, 1)',
            )


def switch_costs(spec: RajaeiSpec) -> list[SwitchCost]:
    """The studied context-switch costs in seconds per switched-in quantum."""
    from testbed.sim.calibration import resolve_calibration

    out = []
    for c in spec.switch_costs:
        if c == "calibration":
            cal = resolve_calibration(None)
            # the calibration is per its own quantum; carry the fraction over to ours
            frac = cal.context_switch / cal.quantum if cal.quantum else 0.0
            out.append(SwitchCost(f"calibrated ({frac * 100:.1f} % of q)", frac * spec.quantum))
        else:
            out.append(SwitchCost(f"{float(c) * 100:.1f} % of q", float(c) * spec.quantum))
    return out


def make_jobs(spec: RajaeiSpec, n: int, seed: int) -> list[Any]:
    """``n`` jobs of the module docstring's workload, reproducible from ``seed``."""
    from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob
    from testbed.sim.workloads.synthetic import HOMOGENEOUS_BARRIER, HOMOGENEOUS_CPU

    rng = random.Random(seed)
    comm = (Phase(1.0, HOMOGENEOUS_CPU),)
    mean_size = (1 + spec.nodes) / 2
    mean_runtime = (1 + spec.max_runtime) / 2
    # load = mean_size * mean_runtime / (mean interarrival * nodes)
    mean_gap = mean_size * mean_runtime / (spec.load * spec.nodes) * spec.quantum
    jobs, t = [], 0.0
    for k in range(n):
        size = rng.randint(1, spec.nodes)
        runtime = rng.randint(1, spec.max_runtime) * spec.quantum
        estimate = runtime * rng.uniform(1.0, spec.max_overestimate)
        is_comm = rng.random() < spec.comm_share
        jobs.append(
            SimJob(
                job_id=k + 1,
                submit=t,
                size=size,
                runtime=runtime,
                estimate=estimate,
                phases=comm if is_comm else COMPUTE_BOUND,
                barrier=HOMOGENEOUS_BARRIER * runtime if is_comm else 0.0,
                user=1 if is_comm else 0,
            )
        )
        t += rng.uniform(0.0, 2.0 * mean_gap)
    return jobs


@dataclass(slots=True)
class Point:
    """One policy on one workload."""

    policy: str
    slots: int | None  # gang policies' max_slots; None for batch
    jobs: int
    seed: int
    switch: str
    makespan: float
    mean_wait: float
    mean_response: float
    waits: list[float] = field(default_factory=list)  # by arrival, only for Fig. 7
    responses: list[float] = field(default_factory=list)


def run_point(
    spec: RajaeiSpec, policy: str, slots: int | None, n: int, seed: int, cost: SwitchCost,
    keep_jobs: bool = False,
) -> Point:  # fmt: skip
    from controller.policies.registry import make_policy
    from testbed.sim.calibration import resolve_calibration
    from testbed.sim.engine import simulate
    from testbed.sim.results import SimConfig

    jobs = make_jobs(spec, n, seed)
    params: dict[str, object] = {"max_slots": slots} if policy in GANG_POLICIES else {}
    pol = make_policy(policy, spec.nodes, params)
    cal = resolve_calibration(None)
    res = simulate(
        jobs,
        pol,
        SimConfig(
            nodes=spec.nodes,
            quantum=spec.quantum,
            context_switch=cost.seconds,
            interference=cal.interference,
            mode="exact",
        ),
    )
    waits = [res.start[i] - j.submit for i, j in enumerate(res.jobs)]
    resp = [res.end[i] - j.submit for i, j in enumerate(res.jobs)]
    first = min(j.submit for j in res.jobs)
    makespan = max(res.end) - first
    order = sorted(range(len(res.jobs)), key=lambda i: (res.jobs[i].submit, res.jobs[i].job_id))
    return Point(
        policy=policy,
        slots=slots,
        jobs=n,
        seed=seed,
        switch=cost.label,
        makespan=makespan,
        mean_wait=math.fsum(waits) / len(waits),
        mean_response=math.fsum(resp) / len(resp),
        waits=[waits[i] for i in order] if keep_jobs else [],
        responses=[resp[i] for i in order] if keep_jobs else [],
    )


def run_study(spec: RajaeiSpec, say: Any = print) -> tuple[list[Point], dict[str, Any]]:
    """Every point of Figs. 5–9 (see the module docstring)."""
    costs = switch_costs(spec)
    t0 = time.perf_counter()
    plan: list[tuple[str, int | None, int, int, SwitchCost, bool]] = []
    base = costs[0]
    for n in spec.job_counts:
        for seed in range(spec.seeds):
            for pol in spec.policies:
                slots = spec.default_slots if pol in GANG_POLICIES else None
                plan.append((pol, slots, n, seed, base, n == spec.fig7_jobs and seed == 0))
    for cost in costs:
        for n in spec.slot_jobs:
            for seed in range(spec.seeds):
                for pol in (p for p in spec.policies if p in GANG_POLICIES):
                    for slots in spec.slots:
                        if cost is base and slots == spec.default_slots and n in spec.job_counts:
                            continue  # already in the first sweep
                        plan.append((pol, slots, n, seed, cost, False))
    points = []
    for k, (pol, slots, n, seed, cost, keep) in enumerate(plan, 1):
        points.append(run_point(spec, pol, slots, n, seed, cost, keep))
        if k % 50 == 0 or k == len(plan):
            say(f"  {k}/{len(plan)} simulations ({time.perf_counter() - t0:.1f} s)")
    meta = {
        "spec": spec.path,
        "name": spec.name,
        "nodes": spec.nodes,
        "quantum": spec.quantum,
        "load": spec.load,
        "seeds": spec.seeds,
        "max_runtime": spec.max_runtime,
        "max_overestimate": spec.max_overestimate,
        "comm_share": spec.comm_share,
        "default_slots": spec.default_slots,
        "switch_costs": [asdict(c) for c in costs],
        "policies": spec.policies,
        "job_counts": spec.job_counts,
        "slots": spec.slots,
        "slot_jobs": spec.slot_jobs,
        "fig7_jobs": spec.fig7_jobs,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return points, meta


def save(points: list[Point], meta: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    p = out / "results.json"
    p.write_text(json.dumps({"meta": meta, "points": [asdict(x) for x in points]}, indent=1))
    return p


def read_results(path: Path) -> tuple[list[Point], dict[str, Any]]:
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise RajaeiError(f"{path}: no such file", fix="run the study first") from None
    return [Point(**x) for x in d["points"]], d["meta"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.experiment.rajaei.study",
        description="Rajaei et al.'s study in the simulator: gang-greedy and gang-backfill against "
        "lookahead backfilling (and EASY) on 15 nodes, as the number of jobs and the number of "
        "time slots grow (Figs. 5-9); writes report.md, PNGs and results.json.",
    )
    ap.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC),
                    help="default experiments/rajaei-gang-vs-backfill.toml")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="default results/<name>")
    ap.add_argument("--quick", action="store_true", help="the [quick] table (under a minute)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from OUT/results.json")  # fmt: skip
    args = ap.parse_args(argv)
    from testbed.experiment.rajaei import report as rajaeireport

    try:
        spec = load_spec(args.spec)
        if args.quick:
            spec = spec.quick_version()
        out = args.out or Path("results") / spec.name
        if args.report_only:
            points, meta = read_results(out / "results.json")
        else:
            points, meta = run_study(spec)
            print(save(points, meta, out))
        for p in rajaeireport.write_report(points, meta, out):
            print(p)
        for ok, line in rajaeireport.findings(points, meta):
            print(("reproduced: " if ok else "differs:    ") + line)
    except CoschedError as e:
        print(f"rajaei: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("rajaei: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
