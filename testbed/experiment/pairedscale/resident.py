"""Can a cost per resident job explain Wiseman & Feitelson 2003's "nearly six times"
(§4.2.1, Fig. 10)? Gang ÷ paired mean response at the paper's loads with the model's
``resident`` term (issue 25; docs/paired-fidelity.md "A cost per resident job").

The capacity study (capacity.py) showed that no *fixed* capacity loss of strict gang gives
both "about 2" at load 0.5 and "nearly 6" at 0.95; a loss that grows with the number of
jobs the machine holds could. The ``resident`` term is such a loss: every job placed on a
node and frozen in a quantum costs the jobs running there ``resident_cost`` of their speed
(SimConfig.resident_cost; testbed/sim/execution.py). Strict gang holds more jobs than
paired gang, and more at higher load, so the term slows it more where it already waits.

The runs: the setup and measured model of experiments/paired-scale-fig10-12.toml (16
nodes, 1 s quanta, 1,000 Lublin jobs with times ÷ 40, homogeneous 45 % jobs, all four
terms on), both policies, at each cost:

* 0 (the model without the term) and the **measured** cost (``[model] resident_cost`` of
  the calibration file, ``cosched calibrate --only resident``);
* ``multiples`` of the measured cost and absolute ``costs``: a sensitivity, labelled
  what-if; it decides nothing.

A run is stopped ``horizon_h`` hours of simulated time after the last arrival (a large
cost can slow a full machine to a crawl: with ``f`` frozen residents per node a job runs
at ``1 - cost * f``, nothing at ``f >= 1 / cost``); its unfinished jobs then count as
responding at the stop, so its mean response is a lower bound, and the report says so.

A study (kind ``paired-resident``; every run through the sweep executor)::

    cosched experiment run experiments/paired-resident.toml --workers 1 \\
        --out docs/results/paired-resident

Spec: ``[study] seeds, loads, multiples, costs, horizon_h``; ``[quick] seeds, loads,
multiples, costs``.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from testbed.experiment.fields import Table
from testbed.experiment.pairedscale.capacity import crossing
from testbed.experiment.pairedscale.decompose import ALL
from testbed.experiment.pairedscale.study import (
    Estimate,
    build_jobs,
    load_study,
    model_figures,
    runs_json,
    sim_config,
    value_at,
)
from testbed.experiment.protocol import RunContext, Study
from testbed.experiment.results import REPO
from testbed.sweep import RunSpec, SweepOptions, run_sweep

SPEC = "experiments/paired-scale-fig10-12.toml"  # the setup and the measured model
PAPER = {0.5: 2.0, 0.95: 6.0}  # §4.2.1: "about twice", "nearly six times"
POLICIES = ("gang", "paired-gang")


# ---------------------------------------------------------------- pure parts
def costs_to_run(measured: float, multiples: Sequence[float], costs: Sequence[float]) -> list[
    tuple[float, str]
]:  # fmt: skip
    """(cost, label) in increasing cost: 0, the measured cost, its multiples, the
    absolute costs; a cost that appears twice is run once, under its first label."""
    out: dict[float, str] = {0.0: "no term"}
    out.setdefault(round(measured, 9), "measured")
    for m in multiples:
        c = round(measured * m, 9)
        if 0 <= c < 1:
            out.setdefault(c, f"{m:g} × measured (what-if)")
    for c in costs:
        out.setdefault(round(c, 9), "what-if")
    return sorted(out.items())


def mean_response_until(
    submits: Sequence[float], ends: Sequence[float], stop: float
) -> tuple[float, int]:
    """(mean response, unfinished jobs): a job without an end responds at ``stop`` (the
    mean is then a lower bound)."""
    resp, unfinished = [], 0
    for s, e in zip(submits, ends, strict=True):
        if math.isnan(e):
            unfinished += 1
            e = stop
        resp.append(e - s)
    return (statistics.fmean(resp) if resp else math.nan), unfinished


# ---------------------------------------------------------------- runs
def run_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One policy, one cost, one load, one seed (a sweep run)."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate

    nodes = int(params["nodes"])
    pol = str(params["policy"])
    policy = make_policy(pol, nodes, parse_params(lookup(pol), {}))
    jobs, _nominal, _realised = build_jobs(params, seed)
    t0, t1 = min(j.submit for j in jobs), max(j.submit for j in jobs)
    until = t1 + float(params["horizon_h"]) * 3600.0
    res = simulate(jobs, policy, sim_config(params), until=until)
    stop = res.series_t[-1] if res.series_t else until
    mean, unfinished = mean_response_until([j.submit for j in res.jobs], list(res.end), stop)
    ts, ns = res.series_t, res.series_n
    area = sum(n * (b - a) for a, b, n in zip([t0, *ts[:-1]], ts, ns, strict=True))
    ended = [e for e in res.end if not math.isnan(e)]
    return {
        "policy": pol,
        "cost": float(params["model"].get("resident_cost") or 0.0),
        "load": float(params["load"]),
        "seed": seed,
        "mean_response": mean,
        "unfinished": unfinished,
        "mean_jobs": area / max(stop - t0, 1e-9),
        "in_system_at_last_arrival": value_at(ts, ns, t1),
        "drain_h": (max(ended) - t1) / 3600.0 if ended and not unfinished else math.nan,
        "stopped_h": (stop - t1) / 3600.0,
    }


def measured_cost() -> tuple[float, str]:
    """The calibration's resident cost (0 where it has none) and the file it came from."""
    model = model_figures(load_study(REPO / SPEC))
    source = Path(str(model["source"]))
    with contextlib.suppress(ValueError):
        source = source.resolve().relative_to(REPO)  # the same in every checkout
    return float(model.get("resident_cost") or 0.0), str(source)


def plan(spec: Mapping[str, Any]) -> list[RunSpec]:
    st = load_study(REPO / SPEC)
    model = model_figures(st)
    measured = float(model.get("resident_cost") or 0.0)
    runs = []
    for cost, _label in costs_to_run(measured, spec["multiples"], spec["costs"]):
        for load in spec["loads"]:
            for pol in POLICIES:
                runs.append({
                    "policy": pol,
                    "profile": "homogeneous",
                    "terms": sorted({*ALL, "resident"} if cost > 0 else set(ALL)),
                    "load": load,
                    "nodes": st.nodes,
                    "quantum": st.quantum,
                    "jobs": st.jobs,
                    "runtime_cap_quantile": None,
                    "runtime_scale": st.runtime_scale,
                    "reference_size": st.reference_size,
                    "model": {**{k: x for k, x in model.items() if k not in ("source", "barrier")},
                              "resident_cost": cost},
                    "barrier": model["barrier"],
                    "horizon_h": spec["horizon_h"],
                })  # fmt: skip
    return [RunSpec("paired-resident", p, seed, run_one) for p in runs for seed in spec["seeds"]]


def run(spec: Mapping[str, Any], opts: SweepOptions) -> dict[str, Any]:
    specs = plan(spec)
    measured, source = measured_cost()
    began = time.perf_counter()
    res = run_sweep(specs, opts)
    res.check()
    return {
        "meta": {
            "spec": SPEC,
            "calibration": source,
            "measured_cost": measured,
            "costs": [
                {"cost": c, "label": label}
                for c, label in costs_to_run(measured, spec["multiples"], spec["costs"])
            ],
            "seeds": list(spec["seeds"]),
            "loads": list(spec["loads"]),
            "horizon_h": spec["horizon_h"],
            "runs": len(specs),
            "wall_seconds": round(time.perf_counter() - began, 1),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "runs": [dict(r) for r in res.results if r is not None],
    }


# ---------------------------------------------------------------- the report
def _by_seed(rows: Sequence[Mapping[str, Any]], key: str, **match: Any) -> dict[int, float]:
    return {
        int(r["seed"]): float(r[key])
        for r in rows
        if all(
            abs(float(r[k]) - v) < 1e-12 if isinstance(v, float) else r[k] == v
            for k, v in match.items()
        )
    }


def ratios(rows: Sequence[Mapping[str, Any]], load: float, cost: float) -> dict[int, float]:
    """Gang ÷ paired mean response at ``cost``, seed by seed."""
    g = _by_seed(rows, "mean_response", policy="gang", load=load, cost=cost)
    p = _by_seed(rows, "mean_response", policy="paired-gang", load=load, cost=cost)
    return {s: g[s] / p[s] for s in g if p.get(s)}


def _est(d: Mapping[int, float]) -> Estimate:
    return Estimate(tuple(d[s] for s in sorted(d)))


def _per(d: Mapping[int, float], fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(d[s]) for s in sorted(d))


def markdown(data: Mapping[str, Any]) -> str:
    meta, rows = data["meta"], data["runs"]
    loads = sorted(meta["loads"])
    lines = [
        "# A cost per resident job and gang ÷ paired response (Fig. 10)",
        "",
        "Wiseman & Feitelson 2003 §4.2.1: paired gang's mean response about 2 times "
        "faster than strict gang's at load 0.5 and nearly 6 times at 0.95. The setup and "
        f"measured model of {meta['spec']} (16 nodes, 1 s quanta, 1,000 Lublin jobs with "
        "times ÷ 40, homogeneous 45 % jobs, launch, full quanta, barrier growth and the "
        "program on), with the `resident` term: each job placed on a node and frozen in a "
        "quantum costs the jobs running there that fraction of their speed. Measured cost "
        f"{meta['measured_cost'] * 100:.4f} % per resident job ({meta['calibration']}); "
        "the other costs are a sensitivity (what-if, decides nothing). Seeds "
        f"{', '.join(map(str, meta['seeds']))}, each one workload both policies ran; "
        "mean ± 95 % CI over the seeds (per seed). A run stops "
        f"{meta['horizon_h']:g} h after the last arrival; where jobs were left "
        "unfinished their response counts to the stop (a lower bound, marked ≥).",
        "",
        "| cost per resident job | what | load | gang ÷ paired | per seed | gang mean "
        "response (s) | paired (s) | gang jobs in system (mean) | gang jobs at the last "
        "arrival | gang drain (h) | unfinished (gang) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in meta["costs"]:
        cost, label = float(c["cost"]), c["label"]
        for load in loads:
            r = ratios(rows, load, cost)
            m = {"load": load, "cost": cost}
            g = _by_seed(rows, "mean_response", policy="gang", **m)
            p = _by_seed(rows, "mean_response", policy="paired-gang", **m)
            mj = _by_seed(rows, "mean_jobs", policy="gang", **m)
            jl = _by_seed(rows, "in_system_at_last_arrival", policy="gang", **m)
            dr = {s: v for s, v in _by_seed(rows, "drain_h", policy="gang", **m).items()
                  if not math.isnan(v)}  # fmt: skip
            un = _by_seed(rows, "unfinished", policy="gang", **m)
            unp = _by_seed(rows, "unfinished", policy="paired-gang", **m)
            bound = "≥ " if any(un.values()) or any(unp.values()) else ""
            lines.append(
                f"| {cost * 100:.4g} % | {label} | {load:g} | {bound}{_est(r).text('{:.2f}')} | "
                f"{_per(r)} | {_est(g).text('{:.1f}')} | {_est(p).text('{:.1f}')} | "
                f"{_est(mj).text('{:.1f}')} | {_est(jl).text('{:.0f}')} | "
                f"{_est(dr).text('{:.2f}') if dr else '—'} | "
                f"{sum(un.values()):.0f} of {1000 * len(un)} |"
            )
    costs = [float(c["cost"]) for c in meta["costs"]]
    lines += ["", "The cost at which the mean ratio first reaches the paper's figure "
              "(linear between the costs run), and the ratio at the highest load ÷ at the "
              "lowest (the paper's: about 3):", ""]  # fmt: skip
    for load in loads:
        target = PAPER.get(load)
        if target is None:
            continue
        means = [_est(ratios(rows, load, c)).mean for c in costs]
        at = crossing(costs, means, target)
        if at is None:
            where = f"not reached (at {costs[-1] * 100:.4g} %: {means[-1]:.2f})"
        else:
            where = f"{at * 100:.3g} % per resident job"
        per = [(c, list(ratios(rows, load, c).values())) for c in costs]
        seeds = "; ".join(
            f"{c * 100:.4g} %: {sum(1 for v in vs if v >= target)} of {len(vs)}, median "
            f"{statistics.median(vs):.2f}"
            for c, vs in per
            if vs
        )
        lines.append(f"* load {load:g}, the paper's {target:g}: the mean {where}; seeds at or "
                     f"above it, and the median ratio, per cost: {seeds}")  # fmt: skip
    lo, hi = loads[0], loads[-1]
    growth = []
    for c in costs:
        a, b = ratios(rows, hi, c), ratios(rows, lo, c)
        g = {s: a[s] / b[s] for s in a if s in b}
        growth.append(f"{c * 100:.4g} %: {_est(g).text('{:.2f}')}")
    lines += [f"* ratio at {hi:g} ÷ ratio at {lo:g}: " + "; ".join(growth), ""]
    lines += [f"Strict gang at load {hi:g}, seed by seed: jobs in the system at the last "
              "arrival / drain after it in hours (— where jobs were left unfinished):", "",
              "| cost per resident job | " + " | ".join(f"seed {s}" for s in meta["seeds"])
              + " |", "|---|" + "---|" * len(meta["seeds"])]  # fmt: skip
    for c in costs:
        m = {"policy": "gang", "load": hi, "cost": c}
        jl = _by_seed(rows, "in_system_at_last_arrival", **m)
        dr = _by_seed(rows, "drain_h", **m)
        cells = [
            f"{jl[s]:.0f} / " + ("—" if math.isnan(dr.get(s, math.nan)) else f"{dr[s]:.2f}")
            if s in jl
            else "—"
            for s in meta["seeds"]
        ]
        lines.append(f"| {c * 100:.4g} % | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"{meta['runs']} simulations, {meta['wall_seconds']:g} s through the sweep executor, "
        f"{meta['date']}.",
        "",
    ]
    return "\n".join(lines)


class ResidentStudy(Study):
    kind = "paired-resident"
    title = (
        "Wiseman & Feitelson 2003 §4.2.1, Fig. 10: gang ÷ paired response with the measured "
        "cost per resident job, and a sensitivity to larger costs (what-if)"
    )
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "quick")
    specs = ("experiments/paired-resident.toml",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        st = doc.table("study", required=True)
        st.only({"name", "seeds", "loads", "multiples", "costs", "horizon_h"})
        q = doc.table("quick")
        q.only({"seeds", "loads", "multiples", "costs"})
        seeds = st.items("seeds", int, [1, 2, 3, 4, 5], unique=True, minimum=1)
        loads = [float(x) for x in st.items("loads", (int, float), [0.5, 0.95], unique=True,
                                            above=0.0, below=2.0)]  # fmt: skip
        mults = [float(x) for x in st.items("multiples", (int, float), [1.0, 10.0],
                                            unique=True, nonempty=False, above=0.0)]  # fmt: skip
        costs = [float(x) for x in st.items("costs", (int, float), [], unique=True,
                                            nonempty=False, above=0.0, below=1.0)]  # fmt: skip
        return {
            "name": st.text("name", "paired-resident"),
            "seeds": seeds,
            "loads": loads,
            "multiples": mults,
            "costs": costs,
            "horizon_h": st.number("horizon_h", 12.0, minimum=0.5),
            "quick": {
                "seeds": q.items("seeds", int, seeds[:1], unique=True, minimum=1),
                "loads": _floats(q, "loads", loads[-1:], above=0.0, below=2.0),
                "multiples": _floats(q, "multiples", mults[:1], nonempty=False, above=0.0),
                "costs": _floats(q, "costs", costs[:1], nonempty=False, above=0.0, below=1.0),
            },
        }

    def quick(self, spec: Any) -> Any:
        return {**spec, "name": spec["name"] + "-quick", **spec["quick"]}

    def name(self, spec: Any) -> str:
        return str(spec["name"])

    def plan(self, spec: Any) -> list[str]:
        return [f"{len(plan(spec))} simulations, seeds {spec['seeds']}"]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        return run(spec, replace(ctx.sweep, desc="resident-cost runs"))

    def dump(self, data: Any) -> str:
        return runs_json(data)

    def render(self, data: Any) -> dict[str, str]:
        return {"report.md": markdown(data)}


def _floats(t: Table, key: str, default: list[float], **bounds: Any) -> list[float]:
    return [float(x) for x in t.items(key, (int, float), default, **bounds)]


STUDY = ResidentStudy()
