"""N + 1 gangs against paired gang and strict gang in the simulator (issue 31 item 1;
Wiseman & Feitelson 2003 §5), from an ``[nplus1]`` spec (experiments/nplus1-sim.toml).

Each seed draws one open job stream on ``nodes`` nodes: Poisson arrivals scaled to the
offered ``load`` (the sum of size x run time over nodes x the arrival span), sizes drawn
from ``sizes``, run times exponential with mean ``runtime`` (clipped to ``[runtime / 20,
runtime * 5]``), and each job compute-, disk- or network-bound with equal odds
(testbed/sim/workloads/synthetic.py ``DEVICE_KINDS``). Every policy runs the same stream
in the exact loop with the three-device model (``SimConfig.network``); what a run keeps:

* per job: its kind, response time (end - submit) and *rate*, its run time over the
  time from its start to its end (dedicated seconds of progress per second; §4.1's
  barriers per second, per job: the throughput a job gets while it is in the matrix);
* per device: the share of the machine used over time (binned), and its mean;
* for N + 1 gangs: how many rows ran together.

    cosched experiment run experiments/nplus1-sim.toml [--quick] [--out DIR] [--workers N]
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from controller.policies.registry import lookup
from testbed.experiment.fields import SpecError, Table
from testbed.sweep import RunSpec, SweepOptions, run_sweep

KINDS = ("compute", "disk", "net")
POLICIES = ("gang", "paired-gang", "nplus1")
_KEYS = ("name", "nodes", "jobs", "seeds", "load", "sizes", "runtime", "quantum",
         "interference", "policies", "n", "bins")  # fmt: skip


@dataclass
class Nplus1Spec:
    name: str = "nplus1-sim"
    nodes: int = 16
    jobs: int = 120
    seeds: int = 5
    load: float = 0.8
    sizes: list[int] = field(default_factory=lambda: [2, 4, 8, 16])
    runtime: float = 300.0  # mean run time, seconds
    quantum: float = 1.0
    interference: float = 0.05
    policies: list[str] = field(default_factory=lambda: list(POLICIES))
    n: int = 2  # N + 1 gangs' N
    bins: int = 200  # points of each device-use series
    quick: dict[str, Any] = field(default_factory=dict)

    def quick_version(self) -> Nplus1Spec:
        return replace(self, **self.quick, quick={})


def _values(t: Table) -> dict[str, Any]:
    t.only(_KEYS)
    out: dict[str, Any] = {}
    for k in ("nodes", "jobs", "seeds", "n", "bins"):
        if t.has(k):
            out[k] = t.integer(k, minimum=1)
    if t.has("name"):
        out["name"] = t.text("name")
    if t.has("load"):
        out["load"] = t.number("load", above=0)
    for k in ("runtime", "quantum"):
        if t.has(k):
            out[k] = t.number(k, above=0)
    if t.has("interference"):
        out["interference"] = t.number("interference", minimum=0, below=1)
    if t.has("sizes"):
        out["sizes"] = t.items("sizes", int, minimum=1, example="[2, 4, 8, 16]")
    if t.has("policies"):
        out["policies"] = t.items("policies", str, choices=POLICIES, unique=True)
    return out


def load_spec(doc: Table) -> Nplus1Spec:
    """An ``[nplus1]`` spec and its ``[quick]`` table."""
    spec = Nplus1Spec(**_values(doc.table("nplus1", required=True)))
    spec.quick = _values(doc.table("quick"))
    for s in (spec, spec.quick_version()):
        if max(s.sizes) > s.nodes:
            raise SpecError(
                f"{doc.path}: a size of {max(s.sizes)} > {s.nodes} nodes",
                fix="sizes no larger than nodes",
            )
    return spec


# ---- the runs ------------------------------------------------------------------------


def stream(spec: Mapping[str, Any], seed: int) -> list[tuple[int, float, int, float, str]]:
    """(id, submit, size, run time, kind) of the seed's jobs (module docstring)."""
    rng = random.Random(seed)
    mean = float(spec["runtime"])
    rows = []
    t = 0.0
    for i in range(int(spec["jobs"])):
        t += rng.expovariate(1.0)
        size = rng.choice(spec["sizes"])
        rt = min(mean * 5, max(mean / 20, rng.expovariate(1.0 / mean)))
        rows.append((i + 1, t, size, rt, rng.choice(KINDS)))
    work = sum(r[2] * r[3] for r in rows)
    span = work / (int(spec["nodes"]) * float(spec["load"]))
    scale = span / rows[-1][1]
    return [(i, s * scale, size, rt, k) for i, s, size, rt, k in rows]


RESULT_VERSION = 2  # 2: N + 1 runs keep the matrix's rows per quantum


def run_spec(spec: Nplus1Spec, policy: str, seed: int) -> RunSpec:
    params = {
        "policy": policy,
        "nodes": spec.nodes,
        "jobs": spec.jobs,
        "load": spec.load,
        "sizes": list(spec.sizes),
        "runtime": spec.runtime,
        "quantum": spec.quantum,
        "interference": spec.interference,
        "n": spec.n,
        "bins": spec.bins,
    }
    return RunSpec("nplus1-sim", params, seed, run_one, RESULT_VERSION)


def _binned(t: list[float], values: list[float], bins: int, end: float) -> list[float]:
    """Time-weighted mean of a per-quantum series over ``bins`` equal spans of [0, end]."""
    acc = [0.0] * bins
    width = end / bins
    prev = 0.0
    for ti, v in zip(t, values, strict=True):
        # the quantum (prev, ti] used the device at v: spread over the bins it covers
        for b in range(min(bins - 1, int(prev / width)), min(bins - 1, int(ti / width)) + 1):
            overlap = min(ti, (b + 1) * width) - max(prev, b * width)
            if overlap > 0:
                acc[b] += v * overlap
        prev = ti
    return [round(a / width, 4) for a in acc]


def run_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    from controller.policies.registry import make_policy
    from testbed.sim.engine import simulate
    from testbed.sim.job import Phase, SimJob
    from testbed.sim.results import SimConfig
    from testbed.sim.workloads.synthetic import DEVICE_KINDS

    rows = stream(params, seed)
    jobs = [
        SimJob(job_id=i, submit=s, size=size, runtime=rt, estimate=rt,
               phases=(Phase(1.0, *DEVICE_KINDS[k]),))
        for i, s, size, rt, k in rows
    ]  # fmt: skip
    name = params["policy"]
    policy = make_policy(name, params["nodes"], {"n": params["n"]} if name == "nplus1" else {})
    cfg = SimConfig(
        nodes=params["nodes"],
        quantum=params["quantum"],
        interference=params["interference"],
        network=True,
    )
    res = simulate(jobs, policy, cfg)
    # per kind: jobs, summed response time and summed rate (the report takes means)
    kinds: dict[str, list[float]] = {k: [0, 0.0, 0.0] for k in KINDS}
    for k, j in enumerate(res.jobs):
        start, end = res.start[k], res.end[k]
        acc = kinds[rows[j.job_id - 1][4]]
        acc[0] += 1
        acc[1] += end - j.submit
        acc[2] += j.runtime / (end - start) if end > start else 1.0
    t = list(res.series_t)
    end = t[-1] if t else 0.0
    steps = [b - a for a, b in zip([0.0, *t[:-1]], t, strict=True)]
    use = {}
    mean_use = {}
    for dev, values in res.series_devices.items():
        v = list(values)
        use[dev] = _binned(t, v, int(params["bins"]), end) if end > 0 else []
        mean_use[dev] = sum(x * s for x, s in zip(v, steps, strict=True)) / end if end else 0.0
    out: dict[str, Any] = {
        "policy": name,
        "seed": seed,
        "makespan": round(end, 3),
        "kinds": {
            k: {"jobs": int(a[0]), "response": round(a[1], 3), "rate": round(a[2], 5)}
            for k, a in kinds.items()
        },
        "use": use,
        "mean_use": {d: round(x, 5) for d, x in mean_use.items()},
    }
    stats = getattr(policy, "stats", None)
    if name == "nplus1" and stats is not None:
        out["groups"] = {str(k): v for k, v in sorted(stats.sizes.items())}
        out["rows"] = {str(k): v for k, v in sorted(stats.rows.items())}
    if res.matching is not None and res.matching.quanta:
        out["matched"] = round(res.matching.matched / res.matching.quanta, 5)
    return out


def run_study(spec: Nplus1Spec, options: SweepOptions | None = None) -> dict[str, Any]:
    for p in spec.policies:
        lookup(p)
    t0 = time.monotonic()
    specs = [run_spec(spec, p, s) for s in range(1, spec.seeds + 1) for p in spec.policies]
    done = run_sweep(specs, options)
    done.check()
    return {
        "spec": {k: v for k, v in asdict(spec).items() if k != "quick"},
        "runs": [r for r in done.results if r is not None],
        "seconds": round(time.monotonic() - t0, 1),
    }


# ---- what the report reads -----------------------------------------------------------


def per_seed(
    data: Mapping[str, Any], policy: str, metric: str, kinds: tuple[str, ...] = KINDS
) -> list[float]:
    """Per seed (in seed order), the mean of ``metric`` (``response`` or ``rate``) over
    the jobs of ``kinds``."""
    out = []
    for r in sorted((r for r in data["runs"] if r["policy"] == policy), key=lambda r: r["seed"]):
        n = sum(r["kinds"][k]["jobs"] for k in kinds)
        total = sum(r["kinds"][k][metric] for k in kinds)
        out.append(total / n if n else math.nan)
    return out


def per_seed_use(data: Mapping[str, Any], policy: str, device: str) -> list[float]:
    """Per seed, the mean share of ``device`` the machine used over the run."""
    runs = sorted((r for r in data["runs"] if r["policy"] == policy), key=lambda r: r["seed"])
    return [float(r["mean_use"].get(device, math.nan)) for r in runs]
