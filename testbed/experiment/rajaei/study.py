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

Each point is the mean over ``seeds`` independent workloads; every figure runs at every
switch cost, so each finding is judged over the measured range of the cost
(rajaei/report.py). The runs are independent and go through the sweep executor
(testbed.sweep): one :class:`testbed.sweep.RunSpec` per point.

    cosched experiment run experiments/rajaei-gang-vs-backfill.toml \
        --out docs/results/rajaei-gang-vs-backfill   [--quick]
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from testbed.experiment.fields import Table
from testbed.experiment.protocol import Say
from testbed.sweep import RunSpec, SweepOptions, run_sweep

DEFAULT_SPEC = Path(__file__).resolve().parents[3] / "experiments" / "rajaei-gang-vs-backfill.toml"
GANG_POLICIES = ("gang-greedy", "gang-backfill")
BATCH_POLICIES = ("lookahead", "easy")
ALL_POLICIES = GANG_POLICIES + BATCH_POLICIES


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
        return replace(self, **self.quick, quick={}, name=self.name + "-quick")


_KNOWN = tuple(f.name for f in fields(RajaeiSpec) if f.name not in ("name", "path", "quick"))


def _values(t: Table) -> dict[str, Any]:
    """The keys of a [rajaei] or [quick] table, each checked (module docstring)."""
    t.only(_KNOWN + (("name",) if t.name == "rajaei" else ()))
    out: dict[str, Any] = {}
    for k in ("nodes", "default_slots", "seeds", "max_runtime", "fig7_jobs"):
        if t.has(k):
            out[k] = t.integer(k, minimum=1)
    for k in ("job_counts", "slots", "slot_jobs"):
        if t.has(k):
            out[k] = t.items(k, int, minimum=1, example="[1, 5, 15]")
    if t.has("quantum"):
        out["quantum"] = t.number("quantum", above=0)
    if t.has("load"):
        out["load"] = t.number("load", above=0)
    if t.has("max_overestimate"):
        out["max_overestimate"] = t.number("max_overestimate", minimum=1)
    if t.has("comm_share"):
        out["comm_share"] = t.number("comm_share", minimum=0, maximum=1)
    if t.has("policies"):
        out["policies"] = t.items("policies", str, choices=ALL_POLICIES, unique=True)
    if t.has("switch_costs"):
        costs = t.items("switch_costs", (str, int, float))
        for c in costs:
            if c != "calibration" and not (isinstance(c, int | float) and 0 <= c < 1):
                raise t.error(
                    "switch_costs",
                    f"entry {c!r}",
                    fix='use "calibration" or a fraction of the quantum in [0, 1)',
                )
        out["switch_costs"] = costs
    if t.has("name"):
        out["name"] = t.text("name")
    return out


def load_spec(doc: Table) -> RajaeiSpec:
    """A ``[rajaei]`` spec and its ``[quick]`` table; every error is one line."""
    main = _values(doc.table("rajaei", required=True))
    spec = RajaeiSpec(name=main.pop("name", doc.path.stem), path=str(doc.path), **main)
    spec.quick = _values(doc.table("quick"))
    return spec


def read_spec(path: str | Path) -> RajaeiSpec:
    from testbed.experiment.fields import read_toml

    return load_spec(Table.document(read_toml(path), path))


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


def make_jobs(spec: RajaeiSpec | Mapping[str, Any], n: int, seed: int) -> list[Any]:
    """``n`` jobs of the module docstring's workload, reproducible from ``seed``.
    ``spec``: the study's spec, or the parameters of one run (:func:`point_params`)."""
    from testbed.sim.job import COMPUTE_BOUND, Phase, SimJob
    from testbed.sim.workloads.synthetic import HOMOGENEOUS_BARRIER, HOMOGENEOUS_CPU

    g = spec if isinstance(spec, Mapping) else _workload(spec)
    nodes, max_runtime, quantum = int(g["nodes"]), int(g["max_runtime"]), float(g["quantum"])
    rng = random.Random(seed)
    comm = (Phase(1.0, HOMOGENEOUS_CPU),)
    mean_size = (1 + nodes) / 2
    mean_runtime = (1 + max_runtime) / 2
    # load = mean_size * mean_runtime / (mean interarrival * nodes)
    mean_gap = mean_size * mean_runtime / (float(g["load"]) * nodes) * quantum
    jobs, t = [], 0.0
    for k in range(n):
        size = rng.randint(1, nodes)
        runtime = rng.randint(1, max_runtime) * quantum
        estimate = runtime * rng.uniform(1.0, float(g["max_overestimate"]))
        is_comm = rng.random() < float(g["comm_share"])
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


def _workload(spec: RajaeiSpec) -> dict[str, Any]:
    keys = ("nodes", "quantum", "load", "max_runtime", "max_overestimate", "comm_share")
    return {k: getattr(spec, k) for k in keys}


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


def point_params(
    spec: RajaeiSpec, policy: str, slots: int | None, n: int, cost: SwitchCost, keep: bool
) -> dict[str, Any]:
    """Everything one run's result depends on besides its seed (its sweep key)."""
    from testbed.sim.calibration import resolve_calibration

    return {
        **_workload(spec),
        "policy": policy,
        "slots": slots,
        "jobs": n,
        "switch": cost.label,
        "switch_seconds": cost.seconds,
        "interference": resolve_calibration(None).interference,
        "keep_jobs": keep,
    }


def simulate_point(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One policy on one workload (a sweep run: module-level, JSON in and out)."""
    from controller.policies.registry import make_policy
    from testbed.sim.engine import simulate
    from testbed.sim.results import SimConfig

    policy, slots, n = str(params["policy"]), params["slots"], int(params["jobs"])
    jobs = make_jobs(params, n, seed)
    kw: dict[str, object] = {"max_slots": slots} if policy in GANG_POLICIES else {}
    pol = make_policy(policy, int(params["nodes"]), kw)
    res = simulate(
        jobs,
        pol,
        SimConfig(
            nodes=int(params["nodes"]),
            quantum=float(params["quantum"]),
            context_switch=float(params["switch_seconds"]),
            interference=float(params["interference"]),
            mode="exact",
        ),
    )
    waits = [res.start[i] - j.submit for i, j in enumerate(res.jobs)]
    resp = [res.end[i] - j.submit for i, j in enumerate(res.jobs)]
    first = min(j.submit for j in res.jobs)
    makespan = max(res.end) - first
    order = sorted(range(len(res.jobs)), key=lambda i: (res.jobs[i].submit, res.jobs[i].job_id))
    keep = bool(params["keep_jobs"])
    return asdict(
        Point(
            policy=policy,
            slots=slots,
            jobs=n,
            seed=seed,
            switch=str(params["switch"]),
            makespan=makespan,
            mean_wait=math.fsum(waits) / len(waits),
            mean_response=math.fsum(resp) / len(resp),
            waits=[waits[i] for i in order] if keep else [],
            responses=[resp[i] for i in order] if keep else [],
        )
    )


def run_point(
    spec: RajaeiSpec, policy: str, slots: int | None, n: int, seed: int, cost: SwitchCost,
    keep_jobs: bool = False,
) -> Point:  # fmt: skip
    """One point, here (tests; the study hands its points to the sweep executor)."""
    return Point(**simulate_point(point_params(spec, policy, slots, n, cost, keep_jobs), seed))


def plan(spec: RajaeiSpec) -> list[RunSpec]:
    """Every run of Figs. 5-9 at every switch cost (module docstring), as sweep runs."""
    costs = switch_costs(spec)
    out: list[RunSpec] = []

    def add(pol: str, slots: int | None, n: int, seed: int, cost: SwitchCost, keep: bool) -> None:
        params = point_params(spec, pol, slots, n, cost, keep)
        out.append(RunSpec("rajaei-sim", params, seed, simulate_point))

    for cost in costs:
        for n in spec.job_counts:
            for seed in range(spec.seeds):
                for pol in spec.policies:
                    slots = spec.default_slots if pol in GANG_POLICIES else None
                    add(pol, slots, n, seed, cost, n == spec.fig7_jobs)
        for n in spec.slot_jobs:
            for seed in range(spec.seeds):
                for pol in (p for p in spec.policies if p in GANG_POLICIES):
                    for slots in spec.slots:
                        if slots == spec.default_slots and n in spec.job_counts:
                            continue  # already in the job-count sweep
                        add(pol, slots, n, seed, cost, False)
    return out


def run_study(
    spec: RajaeiSpec, sweep: SweepOptions | None = None, say: Say = print
) -> tuple[list[Point], dict[str, Any]]:
    """Every point of Figs. 5–9 (see the module docstring)."""

    costs = switch_costs(spec)
    t0 = time.perf_counter()
    runs = plan(spec)
    res = run_sweep(runs, sweep or SweepOptions(desc="rajaei runs"))
    res.check()  # failed runs: each listed, exit status 1; the others stay in the store
    points = [Point(**r) for r in res.results if r is not None]
    say(f"  {len(points)} simulations ({time.perf_counter() - t0:.1f} s)")
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
