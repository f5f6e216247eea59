"""Wiseman & Feitelson 2003 §4.2 at the paper's own scale, in the simulator: Figs. 10-12
(and Fig. 14's QCRD-like stream) over several workload seeds, with the execution model
that has what ParPar had (issue 25; docs/paired-fidelity.md).

The setup is the paper's: 16 nodes, 1 s quanta, 1,000 Lublin jobs with times divided by
40, loads 0.5-0.95 reached by stretching the arrivals, each job the Fig. 6 program of
``N = 600 x sec`` barriers (testbed/sim/program.py). The model's terms come from the
live calibration (``cosched calibrate``; testbed/sim/calibration.py) and are switched on
by name (``terms``); a run may switch some off (``[[runs]] terms``) to show what each
contributes. Every configuration runs on every seed's workload; the report gives the
mean over the seeds and a 95 % confidence interval (Student's t), the paper's statements
beside ours and a verdict per claim (:func:`claims`).

Spec::

    [study]
    name = "paired-scale-fig10-12"
    nodes = 16
    loads = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    seeds = [1, 2, 3, 4, 5]
    quantum = 1.0
    jobs = 1000
    runtime_scale = 0.025           # times divided by 40 (§4.2)
    calibration = "default"         # default (the committed file) | PATH
    terms = ["launch", "occupancy", "barrier", "program"]
    reference_size = 2              # the size at which a job takes ``sec`` (program.py)

    [[runs]]
    label = "gang"
    policy = "gang"
    profile = "homogeneous"         # homogeneous | heterogeneous | qcrd
    params = {}                     # policy parameters
    terms = ["launch", "occupancy"] # optional: this run's terms instead of the study's
    loads = [0.5, 0.95]             # optional: this run at these loads only
    series = true                   # keep the jobs / backlog series (Figs. 11, 12)
    reference_size = 16             # optional: this run's reference size

    [quick]                         # --quick (CI): fewer jobs, loads and seeds
    jobs = 150
    loads = [0.5, 0.95]
    seeds = [1, 2]

Every simulated run goes to the sweep executor (testbed/sweep): its parameters hold
everything the result depends on, the calibration's figures included.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import UsageError
from testbed.experiment.pairedsim.study import count_quanta
from testbed.sweep import RunSpec, SweepOptions, run_sweep

if TYPE_CHECKING:
    from testbed.sim.results import SimConfig

STUDY = "paired-scale"
PROFILES = ("homogeneous", "heterogeneous", "qcrd")
SERIES_POINTS = 300


class StudyError(UsageError):
    """A spec that cannot be run, or runs that failed."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    label: str
    policy: str
    profile: str = "homogeneous"
    params: dict[str, Any] = field(default_factory=dict)
    terms: tuple[str, ...] | None = None  # None: the study's
    loads: tuple[float, ...] | None = None  # None: the study's
    series: bool = False
    reference_size: int | None = None  # None: the study's
    # what-if (not a measurement): the barrier's per-process growth set so that
    # b(16) / b(2) is this, to show how much growth the paper's results would need
    barrier_growth: float | None = None


@dataclass(frozen=True, slots=True)
class StudySpec:
    name: str
    nodes: int
    loads: tuple[float, ...]
    seeds: tuple[int, ...]
    quantum: float
    jobs: int
    runtime_scale: float
    calibration: str
    terms: tuple[str, ...]
    reference_size: int
    runs: tuple[RunConfig, ...]
    origin: str = ""
    quick: dict[str, Any] = field(default_factory=dict)
    is_quick: bool = False

    def quick_variant(self) -> StudySpec:
        q = self.quick
        return replace(
            self,
            jobs=int(q.get("jobs", 150)),
            loads=tuple(float(x) for x in q.get("loads", self.loads[:2])),
            seeds=tuple(int(x) for x in q.get("seeds", self.seeds[:2])),
            is_quick=True,
        )


_STUDY_KEYS = {
    "name", "nodes", "loads", "seeds", "quantum", "jobs", "runtime_scale", "calibration",
    "terms", "reference_size",
}  # fmt: skip
_RUN_KEYS = {
    "label", "policy", "profile", "params", "terms", "loads", "series", "reference_size",
    "barrier_growth",
}  # fmt: skip


def load_study(path: str | Path, doc: Mapping[str, Any] | None = None) -> StudySpec:
    """Read a spec (``doc``: already parsed from ``path``); every problem is one line
    naming the key."""
    from controller.policies.base import PolicyError
    from controller.policies.registry import lookup, parse_params
    from testbed.sim.calibration import CalibrationError, parse_terms

    p = Path(path)
    fix = "see the docstring of testbed/experiment/pairedscale/study.py"
    if doc is None:
        try:
            doc = tomllib.loads(p.read_text())
        except OSError as e:
            raise StudyError(f"{p}: {e.strerror or e}", fix=fix) from None
        except tomllib.TOMLDecodeError as e:
            raise StudyError(f"{p}: not TOML ({e})", fix=fix) from None
    st = doc.get("study")
    if not isinstance(st, dict):
        raise StudyError(f"{p}: no [study] table", fix=fix)
    unknown = set(st) - _STUDY_KEYS
    if unknown:
        raise StudyError(f"{p}: [study].{sorted(unknown)[0]}: unknown key", fix=fix)
    runs_raw = doc.get("runs")
    if not isinstance(runs_raw, list) or not runs_raw:
        raise StudyError(f"{p}: no [[runs]]", fix=fix)
    runs = []
    try:
        terms = tuple(sorted(parse_terms(st.get("terms", []))))
        for r in runs_raw:
            bad = set(r) - _RUN_KEYS
            if bad:
                raise StudyError(f"{p}: [[runs]].{sorted(bad)[0]}: unknown key", fix=fix)
            profile = str(r.get("profile", "homogeneous"))
            if profile not in PROFILES:
                raise StudyError(f"{p}: [[runs]] {r.get('label')!r}: profile must be one of "
                                 f"{', '.join(PROFILES)}")  # fmt: skip
            params = dict(r.get("params", {}))
            parse_params(lookup(str(r["policy"])), {k: str(v) for k, v in params.items()})
            runs.append(
                RunConfig(
                    label=str(r["label"]),
                    policy=str(r["policy"]),
                    profile=profile,
                    params=params,
                    terms=tuple(sorted(parse_terms(r["terms"]))) if "terms" in r else None,
                    loads=tuple(float(x) for x in r["loads"]) if "loads" in r else None,
                    series=bool(r.get("series", False)),
                    reference_size=int(r["reference_size"]) if "reference_size" in r else None,
                    barrier_growth=float(r["barrier_growth"]) if "barrier_growth" in r else None,
                )
            )
        spec = StudySpec(
            name=str(st.get("name", p.stem)),
            nodes=int(st.get("nodes", 16)),
            loads=tuple(float(x) for x in st.get("loads", [0.5, 0.7, 0.9, 0.95])),
            seeds=tuple(int(x) for x in st.get("seeds", [1, 2, 3, 4, 5])),
            quantum=float(st.get("quantum", 1.0)),
            jobs=int(st.get("jobs", 1000)),
            runtime_scale=float(st.get("runtime_scale", 0.025)),
            calibration=str(st.get("calibration", "default")),
            terms=terms,
            reference_size=int(st.get("reference_size", 2)),
            runs=tuple(runs),
            origin=str(p),
            quick=dict(doc.get("quick", {})),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise StudyError(f"{p}: bad value ({e})", fix=fix) from None
    except (CalibrationError, PolicyError) as e:
        raise StudyError(f"{p}: {e}", fix=fix) from None
    if len({r.label for r in runs}) != len(runs):
        raise StudyError(f"{p}: [[runs]] labels must be unique", fix=fix)
    if not spec.seeds or not spec.loads or any(not 0 < x < 2 for x in spec.loads):
        raise StudyError(f"{p}: [study] needs seeds and loads in (0, 2)", fix=fix)
    return spec


# --------------------------------------------------------------------- one run
def _thin(t: Sequence[float], ys: Sequence[Sequence[float]], points: int) -> list[list[float]]:
    """Every ``len/points``-th sample of ``t`` and each series in ``ys``, and the last."""
    if not t:
        return []
    step = max(1, len(t) // points)
    idx = list(range(0, len(t), step))
    if idx[-1] != len(t) - 1:
        idx.append(len(t) - 1)
    return [[round(t[i], 1), *(round(y[i], 2) for y in ys)] for i in idx]


def _slope(t: Sequence[float], y: Sequence[float], t0: float, t1: float) -> float:
    """Least-squares slope of ``y`` against ``t`` over [t0, t1], per second."""
    pts = [(a, b) for a, b in zip(t, y, strict=True) if t0 <= a <= t1]
    if len(pts) < 3:
        return 0.0
    mx = sum(a for a, _ in pts) / len(pts)
    my = sum(b for _, b in pts) / len(pts)
    sxx = sum((a - mx) ** 2 for a, _ in pts)
    if sxx == 0:
        return 0.0
    return sum((a - mx) * (b - my) for a, b in pts) / sxx


def runs_json(data: Mapping[str, Any]) -> str:
    """A ``{"meta", "runs"}`` results document with one run per line: a large file that
    stays diffable (paired-scale's and paired-decompose's results.json)."""
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in data["runs"])
    return '{"meta": ' + json.dumps(data["meta"]) + ',\n "runs": [\n' + body + "]}"


def value_at(t: Sequence[float], y: Sequence[float], when: float) -> float:
    """The step series ``y`` over times ``t`` at ``when`` (its last value at or before)."""
    value = 0.0
    for a, b in zip(t, y, strict=True):
        if a > when:
            break
        value = b
    return value


def build_jobs(params: Mapping[str, Any], seed: int) -> tuple[list[Any], float, float]:
    """The run's workload: Lublin, times scaled, load set on the nominal run times, the
    profile, then the program model. Returns (jobs, nominal work, realised work)."""
    from testbed.sim.calibration import BARRIER, PROGRAM
    from testbed.sim.program import BarrierCost, ProgramModel, realise_all
    from testbed.sim.workloads.load import scale_time, scale_to_load
    from testbed.sim.workloads.lublin import generate_lublin
    from testbed.sim.workloads.synthetic import apply_profile

    nodes = int(params["nodes"])
    jobs = generate_lublin(int(params["jobs"]), nodes, seed)
    jobs = scale_time(jobs, float(params["runtime_scale"]))
    if params.get("runtime_cap_quantile") is not None:  # a what-if of decompose.py
        jobs = cap_runtimes(jobs, float(params["runtime_cap_quantile"]))
    if params.get("runtimes") == "exponential":  # a control of capacity.py
        jobs = exponential_runtimes(jobs, seed)
    jobs = scale_to_load(jobs, nodes, float(params["load"]))
    jobs = apply_profile(jobs, str(params["profile"]), seed=seed)
    nominal = math.fsum(j.size * j.runtime for j in jobs)
    terms = set(params["terms"])
    if PROGRAM in terms:
        b = params["barrier"]
        model = ProgramModel(
            BarrierCost(b["wall_base"], b["wall_per_rank"], b["cpu_base"], b["cpu_per_rank"]),
            reference_size=int(params["reference_size"]),
            grow=BARRIER in terms,
        )
        jobs = realise_all(jobs, model)
    return jobs, nominal, math.fsum(j.size * j.runtime for j in jobs)


def cap_runtimes(jobs: Sequence[Any], quantile: float) -> list[Any]:
    """The jobs with every run time above the stream's ``quantile`` cut to it (a what-if
    on the workload's tail; the load is then set on the cut run times)."""
    rts = sorted(j.runtime for j in jobs)
    cap = rts[min(len(rts) - 1, int(quantile * len(rts)))]
    return [j.copy_with(runtime=cap, estimate=min(j.estimate, cap)) if j.runtime > cap else j
            for j in jobs]  # fmt: skip


def exponential_runtimes(jobs: Sequence[Any], seed: int) -> list[Any]:
    """The jobs with run times drawn exponential with the stream's mean run time (seeded
    by ``seed``): Lublin's sizes and arrivals without its heavy, size-correlated tail (a
    control workload, not the paper's)."""
    import numpy as np

    if not jobs:
        return []
    mean = math.fsum(j.runtime for j in jobs) / len(jobs)
    draws = np.random.default_rng([seed, 25]).exponential(mean, len(jobs))
    return [j.copy_with(runtime=float(rt), estimate=float(rt))
            for j, rt in zip(jobs, np.maximum(draws, 1e-3), strict=True)]  # fmt: skip


def sim_config(params: Mapping[str, Any]) -> SimConfig:
    """A run's simulator configuration: the measured model (``params["model"]``) with the
    launch and occupancy terms on only if ``params["terms"]`` names them."""
    from testbed.sim.calibration import LAUNCH, OCCUPANCY, RESIDENT
    from testbed.sim.results import EARLY_END, FULL, SimConfig

    terms = set(params["terms"])
    cal = params["model"]
    on = LAUNCH in terms
    return SimConfig(
        nodes=int(params["nodes"]),
        quantum=float(params["quantum"]),
        context_switch=float(cal["context_switch"]),
        interference=float(cal["interference"]),
        launch=float(cal["launch"]) if on else 0.0,
        launch_cpu=float(cal["launch_cpu"]) if on else 0.0,
        teardown=float(cal["teardown"]) if on else 0.0,
        occupancy=FULL if OCCUPANCY in terms else EARLY_END,
        resident_cost=float(cal.get("resident_cost") or 0.0) if RESIDENT in terms else 0.0,
    )


def simulate_run(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One configuration at one load on one seed's workload (a sweep run: JSON in and out)."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate
    from testbed.sim.metrics import summarize

    nodes = int(params["nodes"])
    entry = lookup(str(params["policy"]))
    pparams = parse_params(entry, {k: str(v) for k, v in params["params"].items()})
    policy = make_policy(str(params["policy"]), nodes, pparams)
    jobs, nominal, realised = build_jobs(params, seed)
    config = sim_config(params)
    counts = count_quanta(policy)
    t0 = time.perf_counter()
    res = simulate(jobs, policy, config)
    seconds = time.perf_counter() - t0
    s = summarize(res)
    t, n, w = list(res.series_t), list(res.series_n), list(res.series_w)
    first = min(j.submit for j in jobs)
    last = max(j.submit for j in jobs)
    span = last - first
    ran = sum(counts)
    row: dict[str, Any] = {
        "label": params["label"],
        "policy": params["policy"],
        "profile": params["profile"],
        "terms": list(params["terms"]),
        "load": float(params["load"]),
        "seed": seed,
        "mean_response": s.mean_response,
        "mean_slowdown": s.mean_slowdown,
        "median_slowdown": s.median_slowdown,
        "utilization": s.utilization,
        "makespan_h": s.makespan / 3600.0,
        "arrival_span_h": span / 3600.0,
        "offered_nominal": nominal / (nodes * span) if span > 0 else math.nan,
        "offered_realised": realised / (nodes * span) if span > 0 else math.nan,
        "mean_jobs_in_system": s.mean_jobs_in_system,
        "max_jobs_in_system": s.max_jobs_in_system,
        "in_system_at_last_arrival": value_at(t, n, last),
        "backlog_at_last_arrival_h": value_at(t, w, last) / 3600.0,
        "rise_per_1000s": 1000.0 * _slope(t, n, first, last),
        "backlog_growth_nodes": _slope(t, w, first, last),  # node-s of work gained per s
        "drain_h": (s.makespan - span) / 3600.0,
        "matching_success_rate": s.matching_success_rate,
        "one_row": counts[0] / ran if ran else math.nan,
        "unpaired": counts[1] / ran if ran else math.nan,
        "paired": counts[2] / ran if ran else math.nan,
        "seconds": seconds,
    }
    if params.get("series"):
        row["series"] = _thin(t, [n, [x / 3600.0 for x in w]], SERIES_POINTS)
    return row


# --------------------------------------------------------------------- the study
def model_figures(spec: StudySpec) -> dict[str, Any]:
    """The calibration's figures the runs use (in every run's parameters)."""
    from testbed.sim.calibration import CalibrationError, model_config, program_model
    from testbed.sim.calibration import resolve_calibration as resolve

    try:
        cal = resolve(None if spec.calibration == "default" else spec.calibration)
        all_terms = set(spec.terms).union(*(set(r.terms or ()) for r in spec.runs))
        model_config(cal, all_terms, nodes=spec.nodes, quantum=spec.quantum)  # checks
        program_model(cal, all_terms, spec.reference_size)
    except CalibrationError as e:
        raise StudyError(f"{spec.origin}: {e}") from None
    b = cal.barrier
    return {
        "source": cal.source,
        "interference": cal.interference,
        "context_switch": cal.context_switch,
        "launch": cal.launch or 0.0,
        "launch_cpu": cal.launch_cpu or 0.0,
        "teardown": cal.teardown or 0.0,
        # only where measured, so runs without the term keep the parameters they had
        **({} if cal.resident_cost is None else {"resident_cost": cal.resident_cost}),
        "barrier": None
        if b is None
        else {
            "wall_base": b.wall_base,
            "wall_per_rank": b.wall_per_rank,
            "cpu_base": b.cpu_base,
            "cpu_per_rank": b.cpu_per_rank,
        },
    }


def plan(spec: StudySpec) -> list[RunSpec]:
    model = model_figures(spec)
    specs = []
    for run in spec.runs:
        terms = run.terms if run.terms is not None else spec.terms
        loads = run.loads if run.loads is not None else spec.loads
        for load in loads:
            if spec.is_quick and load not in spec.loads:
                continue
            for seed in spec.seeds:
                params = {
                    "label": run.label,
                    "policy": run.policy,
                    "profile": run.profile,
                    "params": dict(run.params),
                    "terms": list(terms),
                    "load": load,
                    "nodes": spec.nodes,
                    "quantum": spec.quantum,
                    "jobs": spec.jobs,
                    "runtime_scale": spec.runtime_scale,
                    "reference_size": run.reference_size or spec.reference_size,
                    "series": run.series,
                    "model": {k: v for k, v in model.items() if k not in ("source", "barrier")},
                    "barrier": _grown(model["barrier"], run.barrier_growth),
                }
                specs.append(RunSpec(STUDY, params, seed, simulate_run))
    return specs


def _grown(barrier: dict[str, float] | None, growth: float | None) -> dict[str, float] | None:
    """The measured barrier with its per-process growth replaced so that b(16) / b(2) is
    ``growth``, b(2) kept: b(16) = b(2) + 14 p = g b(2) gives p = (g - 1) b(2) / 14."""
    if barrier is None or growth is None:
        return barrier
    if not 1.0 <= growth <= 15.0:
        raise StudyError(f"barrier_growth {growth}: b(16) / b(2) must be in [1, 15]")
    b2 = barrier["wall_base"] + barrier["wall_per_rank"]
    per = (growth - 1.0) * b2 / 14.0
    base = b2 - per
    return {**barrier, "wall_base": base, "wall_per_rank": per}


def run_study(spec: StudySpec, sweep: SweepOptions | None = None) -> dict[str, Any]:
    """Every run of the spec through the sweep executor; the study's data."""
    specs = plan(spec)
    began = time.perf_counter()
    res = run_sweep(specs, sweep or SweepOptions(desc=f"{spec.name} runs"))
    if res.failed:
        f = res.failed[0]
        raise StudyError(
            f"{len(res.failed)} of {len(specs)} runs failed; first: "
            f"{f.spec.params['label']} load {f.spec.params['load']} seed {f.spec.seed}: {f.error}"
        )
    rows = [dict(r) for r in res.results if r is not None]
    model = model_figures(spec)
    return {
        "meta": {
            "name": spec.name,
            "spec": spec.origin,
            "nodes": spec.nodes,
            "quantum": spec.quantum,
            "jobs": spec.jobs,
            "runtime_scale": spec.runtime_scale,
            "seeds": list(spec.seeds),
            "loads": list(spec.loads),
            "terms": list(spec.terms),
            "reference_size": spec.reference_size,
            "model": model,
            "quick": spec.is_quick,
            "runs": len(specs),
            "wall_seconds": round(time.perf_counter() - began, 1),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "runs": rows,
    }


# --------------------------------------------------------------------- statistics
# the two-sided 95 % quantile of Student's t with df degrees of freedom
def t975(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds and the half-width of its 95 % confidence interval."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def ci(self) -> float:
        n = len(self.values)
        if n < 2:
            return math.nan
        return t975(n - 1) * statistics.stdev(self.values) / math.sqrt(n)

    def text(self, fmt: str = "{:.1f}") -> str:
        if not self.values:
            return "—"
        if len(self.values) < 2:
            return fmt.format(self.mean)
        return f"{fmt.format(self.mean)} ± {fmt.format(self.ci)}"


def per_seed(
    rows: Iterable[Mapping[str, Any]], label: str, load: float, key: str
) -> dict[int, float]:
    return {
        int(r["seed"]): float(r[key])
        for r in rows
        if r["label"] == label and abs(float(r["load"]) - load) < 1e-9
    }


def estimate(rows: Sequence[Mapping[str, Any]], label: str, load: float, key: str) -> Estimate:
    by = per_seed(rows, label, load, key)
    return Estimate(tuple(by[s] for s in sorted(by)))


def ratio(rows: Sequence[Mapping[str, Any]], a: str, b: str, load: float, key: str) -> Estimate:
    """Seed by seed ``a / b`` of ``key`` (each seed one workload both ran)."""
    x, y = per_seed(rows, a, load, key), per_seed(rows, b, load, key)
    seeds = sorted(set(x) & set(y))
    return Estimate(tuple(x[s] / y[s] for s in seeds if y[s]))


def labels_loads(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[float]]:
    labels = list(dict.fromkeys(str(r["label"]) for r in rows))
    loads = sorted({float(r["load"]) for r in rows})
    return labels, loads
