"""What capacity loss Wiseman & Feitelson 2003's "nearly six times" (§4.2.1, Fig. 10) would
take, and how much capacity each term of our model costs (issue 25, docs/paired-fidelity.md).

Two parts, on the setup and measured model of experiments/paired-scale-fig10-12.toml:

* **Measured: throughput under overload.** Each policy runs the stream at a nominal load
  above what it can serve (``overload``), with each model term switched off in turn. Its
  throughput is the work it served while the arrivals lasted, per node-second::

      served = work arrived in (t0, t1] + backlog(t0) - backlog(t1)
      throughput = served / (nodes * (t1 - t0))     t0, t1: first and last arrival

  in realised node-seconds (the program model's run times), and in the load's own units
  (nominal run times) by the stream's nominal ÷ realised work. With the system never empty
  over the window this is the capacity the policy has for this workload, packing waste
  included; the report gives the fewest jobs in the system over the window's second half
  to show it was.
* **What-if, not a measurement: strict gang with less capacity.** Every job's run time
  under strict gang divided by ``c`` (the same work served at rate ``c``), paired gang
  unchanged, at the paper's loads: which ``c`` the paper's ratios would imply, and whether
  one ``c`` gives both of them (about 2 at 0.5 and nearly 6 at 0.95). It decides nothing.

A study (kind ``paired-capacity``; every run through the sweep executor)::

    cosched experiment run experiments/paired-capacity.toml --workers 1 \\
        --out docs/results/paired-capacity

Spec: ``[study] seeds, overload, capacities, loads, streams``; ``[quick] seeds,
capacities, loads``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from controller.policies.matrix import FIRST_FIT, PLACEMENTS
from testbed.experiment.fields import Table
from testbed.experiment.pairedscale.decompose import ALL, VARIANTS, Variant
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
#: the decomposition's term switches (and strict gang without alternates) under overload
TERM_VARIANTS = ("full", "no-launch", "early-end", "no-barrier-growth", "sec", "none",
                 "gang-no-alternates")  # fmt: skip
PAPER = {0.5: 2.0, 0.95: 6.0}  # §4.2.1: "about twice", "nearly six times"
#: the what-if's workloads: the paper's Lublin stream, and a control with its sizes and
#: arrivals but exponential run times (study.exponential_runtimes)
STREAMS = {
    "lublin": "the Lublin stream (the paper's workload model)",
    "exp-runtimes": "control, not the paper's workload: Lublin's sizes and arrivals, run "
    "times exponential with the same mean",
}


# ---------------------------------------------------------------- pure parts
def served_per_node_second(
    t: Sequence[float],
    backlog: Sequence[float],
    arrivals: Sequence[tuple[float, float]],
    t0: float,
    t1: float,
    nodes: int,
) -> float:
    """Work served over (t0, t1] per node-second: what arrived in it (``arrivals``: (submit,
    work)) plus the backlog step series at t0 less the backlog at t1."""
    if not t1 > t0:
        raise ValueError(f"the window must have t1 > t0, got {t0}, {t1}")
    arrived = math.fsum(w for s, w in arrivals if t0 < s <= t1)
    served = arrived + value_at(t, backlog, t0) - value_at(t, backlog, t1)
    return served / (nodes * (t1 - t0))


def slowed(jobs: Sequence[Any], c: float) -> list[Any]:
    """The what-if: each job's run time divided by ``c`` (a policy with capacity ``c``)."""
    if not 0 < c <= 1:
        raise ValueError(f"capacity must be in (0, 1], got {c}")
    return list(jobs) if c == 1 else [j.copy_with(runtime=j.runtime / c) for j in jobs]


def crossing(xs: Sequence[float], ys: Sequence[float], target: float) -> float | None:
    """Where the piecewise-linear ``ys`` over ``xs`` first reaches ``target`` going along
    ``xs`` (None if it never does)."""
    pts = list(zip(xs, ys, strict=True))
    for (xa, ya), (xb, yb) in itertools.pairwise(pts):
        if ya == target:
            return xa
        if (ya - target) * (yb - target) < 0:
            return xa + (target - ya) * (xb - xa) / (yb - ya)
    if pts and pts[-1][1] == target:
        return pts[-1][0]
    return None


# ---------------------------------------------------------------- runs
def run_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One policy, one variant (or capacity), one load, one seed (a sweep run)."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate
    from testbed.sim.metrics import summarize

    nodes = int(params["nodes"])
    pol = str(params["policy"])
    policy = make_policy(pol, nodes, parse_params(lookup(pol), dict(params["params"])))
    jobs, nominal, realised = build_jobs(params, seed)
    jobs = slowed(jobs, float(params["capacity"]))
    res = simulate(jobs, policy, sim_config(params))
    s = summarize(res)
    t0, t1 = min(j.submit for j in jobs), max(j.submit for j in jobs)
    arrivals = [(j.submit, j.size * j.runtime) for j in jobs]
    thr = served_per_node_second(res.series_t, res.series_w, arrivals, t0, t1, nodes)
    half = [n for t, n in zip(res.series_t, res.series_n, strict=True) if (t0 + t1) / 2 <= t <= t1]
    return {
        "part": params["part"],
        "stream": params["stream"],
        "variant": params["variant"],
        "policy": pol,
        "capacity": float(params["capacity"]),
        "load": float(params["load"]),
        "seed": seed,
        "mean_response": s.mean_response,
        "mean_jobs": s.mean_jobs_in_system,
        "in_system_at_last_arrival": value_at(res.series_t, res.series_n, t1),
        "drain_h": (s.makespan - (t1 - t0)) / 3600.0,
        "throughput_realised": thr,
        "nominal_per_realised": nominal / realised,
        "throughput_nominal": thr * nominal / realised,
        "fewest_jobs_late": min(half) if half else math.nan,
    }


def plan(spec: Mapping[str, Any]) -> list[RunSpec]:
    st = load_study(REPO / SPEC)
    model = model_figures(st)
    by = {v.label: v for v in VARIANTS}

    def params(
        part: str, v: Variant, pol: str, load: float, c: float, stream: str = "lublin"
    ) -> dict[str, Any]:
        return {
            "part": part,
            "stream": stream,
            "runtimes": "exponential" if stream == "exp-runtimes" else "lublin",
            "variant": v.label,
            "policy": pol,
            "params": dict(v.gang_params) if pol == "gang" else {},
            "capacity": c,
            "profile": "homogeneous",
            "terms": sorted(v.terms),
            "load": load,
            "nodes": st.nodes,
            "quantum": st.quantum,
            "jobs": v.jobs,
            "runtime_cap_quantile": None,
            "runtime_scale": st.runtime_scale,
            "reference_size": st.reference_size,
            "model": {k: x for k, x in model.items() if k not in ("source", "barrier")},
            "barrier": model["barrier"],
        }

    runs: list[dict[str, Any]] = []
    variants = spec.get("variants", TERM_VARIANTS)
    for label in variants:
        # alternates are strict gang's: paired gang's run is the full model's
        pols = ("gang",) if by[label].gang_params else ("gang", "paired-gang")
        runs += [params("overload", by[label], p, spec["overload"], 1.0) for p in pols]
    for v in placement_variants(spec):
        for p in ("gang", "paired-gang") if v["label"] == v["placement"] else ("gang",):
            run = params("overload", by["full"], p, spec["overload"], 1.0)
            pp = {"placement": v["placement"]}
            if v["label"] != v["placement"]:
                pp["alternate"] = "false"
            runs.append({**run, "variant": v["label"], "params": pp})
    for stream in spec["streams"]:
        for load in spec["loads"]:
            runs.append(params("capacity", by["full"], "paired-gang", load, 1.0, stream))
            runs += [params("capacity", by["full"], "gang", load, c, stream)
                     for c in spec["capacities"]]  # fmt: skip
    return [RunSpec("paired-capacity", p, seed, run_one) for p in runs for seed in spec["seeds"]]


def placement_variants(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The overload runs of ``[study] placements`` (the matrix's rule for a new gang,
    controller/policies/matrix.py): both policies under each rule with the full model, and
    strict gang without alternates where the spec runs that variant; each compared with
    its first-fit counterpart (``base``)."""
    out: list[dict[str, Any]] = []
    for place in spec.get("placements", []):
        out.append({"label": place, "placement": place, "base": "full",
                    "what": f"placement {place} (full model)", "terms": sorted(ALL)})  # fmt: skip
        if "gang-no-alternates" in spec.get("variants", TERM_VARIANTS):
            out.append({
                "label": f"{place}-no-alternates", "placement": place,
                "base": "gang-no-alternates",
                "what": f"placement {place}, strict gang without alternate scheduling",
                "terms": sorted(ALL)})  # fmt: skip
    return out


def run(spec: Mapping[str, Any], opts: SweepOptions) -> dict[str, Any]:
    specs = plan(spec)
    began = time.perf_counter()
    res = run_sweep(specs, opts)
    res.check()
    return {
        "meta": {
            "spec": SPEC,
            "seeds": list(spec["seeds"]),
            "overload": spec["overload"],
            "capacities": list(spec["capacities"]),
            "loads": list(spec["loads"]),
            "streams": list(spec["streams"]),
            "variants": [
                {"label": v.label, "what": v.what, "terms": list(v.terms)}
                for v in VARIANTS
                if v.label in spec.get("variants", TERM_VARIANTS)
            ]
            + placement_variants(spec),
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
            abs(float(r[k]) - v) < 1e-9 if isinstance(v, float) else r[k] == v
            for k, v in match.items()
        )
    }


def _est(d: Mapping[int, float]) -> Estimate:
    return Estimate(tuple(d[s] for s in sorted(d)))


def _per(d: Mapping[int, float], fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(d[s]) for s in sorted(d))


def ratios(
    rows: Sequence[Mapping[str, Any]], load: float, c: float, stream: str = "lublin"
) -> dict[int, float]:
    """Gang at capacity ``c`` ÷ paired gang, mean response, seed by seed."""
    m = {"part": "capacity", "stream": stream, "load": load}
    g = _by_seed(rows, "mean_response", policy="gang", capacity=c, **m)
    p = _by_seed(rows, "mean_response", policy="paired-gang", **m)
    return {s: g[s] / p[s] for s in g if p.get(s)}


def _overload_section(data: Mapping[str, Any]) -> list[str]:
    from testbed.experiment.claims import Difference

    rows, meta = data["runs"], data["meta"]
    out = [
        f"## Measured: throughput at nominal load {meta['overload']:g} (overload)",
        "",
        "Work served from the first to the last arrival per node-second, in the load's units "
        "(nominal run times; the realised work converted by the stream's nominal ÷ realised) "
        "and in realised node-seconds; *fewest jobs* is the least number of jobs in the "
        "system over the window's second half (above 0: the policy never ran dry).",
        "",
        "| variant | policy | throughput (load's units) | per seed | realised | "
        "fewest jobs | change against full (per seed) | beyond spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in meta["variants"]:
        for pol in ("gang", "paired-gang"):
            m = {"part": "overload", "variant": v["label"], "policy": pol}
            thr = _by_seed(rows, "throughput_nominal", **m)
            if not thr:
                continue
            real = _by_seed(rows, "throughput_realised", **m)
            few = _by_seed(rows, "fewest_jobs_late", **m)
            base = str(v.get("base", "full"))
            full = _by_seed(rows, "throughput_nominal", part="overload", variant=base,
                            policy=pol)  # fmt: skip
            if v["label"] == "full":
                change, beyond = "—", "—"
            else:
                seeds = sorted(set(thr) & set(full))
                d = Difference.of([thr[s] for s in seeds], [full[s] for s in seeds])
                e = Estimate(d.values)
                change = f"{e.mean:+.3f} ± {e.ci:.3f} ({', '.join(f'{x:+.3f}' for x in d.values)})"
                if base != "full":
                    change = f"against {base}: {change}"
                beyond = "yes" if d.beyond_spread() else "no"
            out.append(
                f"| {v['label']}: {v['what']} | {pol} | {_est(thr).text('{:.3f}')} | "
                f"{_per(thr, '{:.3f}')} | {_est(real).text('{:.3f}')} | "
                f"{min(few.values()):.0f} | {change} | {beyond} |"
            )
    g = _by_seed(rows, "throughput_nominal", part="overload", variant="full", policy="gang")
    p = _by_seed(rows, "throughput_nominal", part="overload", variant="full",
                 policy="paired-gang")  # fmt: skip
    gp = {s: p[s] / g[s] for s in g if s in p}
    out += [
        "",
        f"Paired ÷ strict gang throughput, full model: {_est(gp).text('{:.2f}')} "
        f"(per seed {_per(gp)}).",
        "",
    ]
    return out


def _capacity_section(data: Mapping[str, Any]) -> list[str]:
    rows, meta = data["runs"], data["meta"]
    if not meta["streams"]:
        return []
    caps = sorted(meta["capacities"], reverse=True)
    out = [
        "## What-if, not a measurement: strict gang with capacity c",
        "",
        "Every job's run time under strict gang divided by c (the full model otherwise); "
        "paired gang as measured. Gang ÷ paired mean response, mean ± 95 % CI over the "
        "seeds (per seed); strict gang's jobs in the system at the last arrival and its "
        "drain after it.",
        "",
    ]
    for stream in meta["streams"]:
        out += [
            f"### {stream}: {STREAMS[stream]}",
            "",
            "| load | c | gang ÷ paired | per seed | gang jobs at the last arrival | "
            "gang drain (h) |",
            "|---|---|---|---|---|---|",
        ]
        for load in meta["loads"]:
            for c in caps:
                r = ratios(rows, load, c, stream)
                m = {"part": "capacity", "stream": stream, "policy": "gang", "load": load,
                     "capacity": c}  # fmt: skip
                jl = _by_seed(rows, "in_system_at_last_arrival", **m)
                dr = _by_seed(rows, "drain_h", **m)
                out.append(
                    f"| {load:g} | {c:g} | {_est(r).text('{:.2f}')} | {_per(r)} | "
                    f"{_est(jl).text('{:.0f}')} | {_est(dr).text('{:.2f}')} |"
                )
        out += ["", "The c at which the mean ratio reaches the paper's figure (linear "
                "between the c run), and the ratio at the highest load ÷ at the lowest per "
                "c (the paper's: about 3):", ""]  # fmt: skip
        for load in meta["loads"]:
            target = PAPER.get(load)
            if target is None:
                continue
            means = [_est(ratios(rows, load, c, stream)).mean for c in caps]
            at = crossing(caps, means, target)
            if means and means[0] > target:
                where = f"above it already at c = {caps[0]:g} ({means[0]:.2f})"
            elif at is None:
                where = f"not reached at the c run (at c = {caps[-1]:g}: {means[-1]:.2f})"
            else:
                where = f"c = {at:.2f}"
            out.append(f"* load {load:g}, the paper's {target:g}: {where}")
        lo, hi = min(meta["loads"]), max(meta["loads"])
        growth = []
        for c in caps:
            a, b = ratios(rows, hi, c, stream), ratios(rows, lo, c, stream)
            g = {s: a[s] / b[s] for s in a if s in b}
            growth.append(f"c = {c:g}: {_est(g).text('{:.2f}')}")
        out += [f"* ratio at {hi:g} ÷ ratio at {lo:g}: " + "; ".join(growth), ""]
    return out


def markdown(data: Mapping[str, Any]) -> str:
    meta = data["meta"]
    lines = [
        "# Strict gang's capacity and gang ÷ paired at the paper's scale",
        "",
        "Wiseman & Feitelson 2003 §4.2.1: paired gang's mean response about 2 times faster "
        "than strict gang's at load 0.5 and nearly 6 times at 0.95, strict gang saturating "
        f"at 0.9-0.95. The setup and measured model of {meta['spec']} (16 nodes, 1 s quanta, "
        "1,000 Lublin jobs with times ÷ 40, homogeneous 45 % jobs), seeds "
        f"{', '.join(map(str, meta['seeds']))}; each seed one workload every run used.",
        "",
        *_overload_section(data),
        *_capacity_section(data),
        f"{meta['runs']} simulations, {meta['wall_seconds']:g} s through the sweep executor, "
        f"{meta['date']}.",
        "",
    ]
    return "\n".join(lines)


class CapacityStudy(Study):
    kind = "paired-capacity"
    title = (
        "Wiseman & Feitelson 2003 §4.2.1, Fig. 10: strict gang's capacity per model term "
        "under overload, and the capacity loss the paper's ratios imply (what-if)"
    )
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "quick")
    specs = ("experiments/paired-capacity.toml", "experiments/paired-placement-capacity.toml")
    has_quick = True

    def load(self, doc: Table) -> Any:
        st = doc.table("study", required=True)
        st.only({"name", "seeds", "overload", "capacities", "loads", "streams", "variants",
                 "placements"})  # fmt: skip
        q = doc.table("quick")
        q.only({"seeds", "capacities", "loads"})
        seeds = st.items("seeds", int, [1, 2, 3], unique=True, minimum=1)
        caps = [
            float(c) for c in st.items("capacities", (int, float), [1.0, 0.8, 0.6], unique=True)
        ]
        variants = st.items(
            "variants", str, list(TERM_VARIANTS), unique=True, choices=list(TERM_VARIANTS)
        )
        placements = st.items(
            "placements", str, [], unique=True, choices=[p for p in PLACEMENTS if p != FIRST_FIT]
        )
        if placements and "full" not in variants:
            from testbed.experiment.fields import SpecError

            raise SpecError("[study].placements: the variants must include full (first-fit)",
                            fix='add "full" to variants')  # fmt: skip
        return {
            "name": st.text("name", "paired-capacity"),
            "seeds": seeds,
            "overload": st.number("overload", 2.0, minimum=1.0),
            "capacities": _capacities(caps, "[study].capacities"),
            "streams": st.items(
                "streams", str, ["lublin"], nonempty=False, unique=True, choices=list(STREAMS)
            ),
            # the overload variants to run (default all) and the placement rules beside them
            "variants": variants,
            "placements": placements,
            "loads": [
                float(x)
                for x in st.items(
                    "loads", (int, float), [0.5, 0.95], unique=True, above=0.0, below=2.0
                )
            ],
            "quick": {
                "loads": [
                    float(x) for x in q.items("loads", (int, float), [0.95], above=0.0, below=2.0)
                ],
                "seeds": q.items("seeds", int, seeds[:1], unique=True, minimum=1),
                "capacities": _capacities(
                    [float(c) for c in q.items("capacities", (int, float), caps[:2], unique=True)],
                    "[quick].capacities",
                ),
            },
        }

    def quick(self, spec: Any) -> Any:
        return {**spec, "name": spec["name"] + "-quick", **spec["quick"]}

    def name(self, spec: Any) -> str:
        return str(spec["name"])

    def plan(self, spec: Any) -> list[str]:
        return [f"{len(plan(spec))} simulations, seeds {spec['seeds']}"]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        return run(spec, replace(ctx.sweep, desc="capacity runs"))

    def dump(self, data: Any) -> str:
        return runs_json(data)

    def render(self, data: Any) -> dict[str, str]:
        return {"report.md": markdown(data)}


def _capacities(caps: list[float], where: str) -> list[float]:
    from testbed.experiment.fields import SpecError

    if 1.0 not in caps or any(not 0 < c <= 1 for c in caps):
        raise SpecError(f"{where}: capacities must lie in (0, 1] and include 1.0 (the model)",
                        fix="e.g. capacities = [1.0, 0.8, 0.6]")  # fmt: skip
    return caps


STUDY = CapacityStudy()
