"""Why gang ÷ paired response stays near 2 at load 0.95 in our model (Wiseman & Feitelson
2003 §4.2.1 reports "nearly six times"): the Figs. 10-11 setup run with each model term
switched off in turn, beyond the paper's loads, and over a longer stream, with what each
run loses measured quantum by quantum (issue 25, docs/paired-fidelity.md).

Per run, besides the responses: the share of node-time strict gang leaves idle while jobs
wait (packing and fragmentation: a node with nothing to run in a quantum while some job in
the system is not running), the share of node-time spent launching and tearing down, the
share of busy node-time run as a pair (paired gang), and the jobs in the system. The
ratios are taken seed by seed (each seed one workload both policies ran).

A study (kind ``paired-decompose``; every run through the sweep executor)::

    cosched experiment run experiments/paired-scale-decompose.toml --workers 1 \
        --out docs/results/paired-decomposition

Spec: ``[study] seeds = [...]`` (the setup and the model are those of
experiments/paired-scale-fig10-12.toml); ``[quick] seeds``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from testbed.experiment.fields import Table
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
ALL = ("barrier", "launch", "occupancy", "program")


@dataclass(frozen=True)
class Variant:
    """One line of the decomposition: a change to the full model, run by both policies."""

    label: str
    what: str
    loads: tuple[float, ...]
    terms: tuple[str, ...] = ALL
    gang_params: tuple[tuple[str, str], ...] = ()
    jobs: int = 1000
    cap: float | None = None  # run times cut at this quantile of the stream's
    what_if: bool = False  # not the measured model: labelled, decides nothing


VARIANTS: tuple[Variant, ...] = (
    Variant("full", "all four terms, as measured", (0.5, 0.95)),
    Variant("no-launch", "launch and teardown off", (0.5, 0.95),
            terms=("barrier", "occupancy", "program")),
    Variant("early-end", "quanta end when their jobs do", (0.5, 0.95),
            terms=("barrier", "launch", "program")),
    Variant("no-barrier-growth", "barrier cost the same at every size", (0.5, 0.95),
            terms=("launch", "occupancy", "program")),
    Variant("sec", "runtime = sec (no program, no barrier)", (0.5, 0.95),
            terms=("launch", "occupancy")),
    Variant("none", "no term (the model before issue 25)", (0.5, 0.95), terms=()),
    Variant("gang-no-alternates", "strict gang without alternate scheduling (§2.6)",
            (0.5, 0.95), gang_params=(("alternate", "false"),)),
    Variant("jobs-3000", "3,000 jobs: a stream three times as long", (0.95,), jobs=3000),
    Variant("cap-0.99", "run times cut at the stream's 99th percentile (load kept)",
            (0.5, 0.95), cap=0.99, what_if=True),
    Variant("cap-0.9", "run times cut at the 90th percentile (load kept)", (0.95,), cap=0.9,
            what_if=True),
    Variant("load-1.2", "nominal load 1.2: what if the paper's load understated the work",
            (1.2,), what_if=True),
    Variant("load-1.5", "nominal load 1.5, likewise", (1.5,), what_if=True),
)  # fmt: skip


class _Meter:
    """Wraps a policy: per quantum, who is in the system, who runs, where."""

    def __init__(self, policy: Any, nodes: int, quantum: float) -> None:
        self.policy, self.nodes, self.q = policy, nodes, quantum
        self.in_system: set[int] = set()
        self.last: tuple[float, int, int, int] | None = None  # (t, idle, paired, waiting)
        self.busy_ns = 0.0  # node-seconds with a job in the system
        self.idle_waiting_ns = 0.0  # node-seconds idle while some job was not running
        self.paired_ns = 0.0  # node-seconds with two jobs runnable
        self.waiting_s = 0.0  # seconds in which some job in the system was not running
        inner_submit, inner_finish, inner_next = policy.submit, policy.finish, policy.next_quantum

        def submit(req: Any, now: float) -> None:
            self.in_system.add(req.job_id)
            inner_submit(req, now)

        def finish(job_id: int, now: float) -> None:
            self.in_system.discard(job_id)
            inner_finish(job_id, now)

        def next_quantum(now: float) -> Any:
            self._close(now)
            plan = inner_next(now)
            used = [len(js) for js in plan.node_jobs]
            idle = sum(1 for u in used if u == 0) + (nodes - len(used))
            paired = sum(1 for u in used if u >= 2)
            waiting = len(self.in_system - set(plan.running))
            self.last = (now, idle, paired, waiting)
            return plan

        policy.submit, policy.finish, policy.next_quantum = submit, finish, next_quantum

    def _close(self, now: float) -> None:
        if self.last is None:
            return
        t, idle, paired, waiting = self.last
        dt = min(max(0.0, now - t), self.q)  # a gap to the next arrival is no quantum
        self.busy_ns += self.nodes * dt
        self.paired_ns += paired * dt
        if waiting:
            self.idle_waiting_ns += idle * dt
            self.waiting_s += dt
        self.last = None

    def close(self, end: float) -> None:
        self._close(end)


def run_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One policy, one variant, one load, one seed (a sweep run)."""
    from controller.policies.registry import lookup, make_policy, parse_params
    from testbed.sim.engine import simulate
    from testbed.sim.metrics import job_table, summarize

    nodes, q = int(params["nodes"]), float(params["quantum"])
    pol = str(params["policy"])
    policy = make_policy(pol, nodes, parse_params(lookup(pol), dict(params["params"])))
    jobs, nominal, realised = build_jobs(params, seed)
    config = sim_config(params)
    meter = _Meter(policy, nodes, q)
    res = simulate(jobs, policy, config)
    table = job_table(res)
    s = summarize(res, table)
    meter.close(max(table.end))
    first = min(j.submit for j in jobs)
    span = max(j.submit for j in jobs) - first
    launch_ns = math.fsum(j.size for j in jobs) * (config.launch + config.teardown)
    resp = sorted(table.response)
    # by work (size x run time): the half of the jobs with the least, the tenth with the most
    work = [sz * rt for sz, rt in zip(table.size, table.runtime, strict=True)]
    order = sorted(range(len(work)), key=work.__getitem__)
    small, big = order[: len(order) // 2], order[-max(1, len(order) // 10) :]
    at_last = value_at(res.series_t, res.series_n, max(j.submit for j in jobs))
    busy = meter.busy_ns or math.nan
    return {
        "variant": params["variant"],
        "policy": pol,
        "load": float(params["load"]),
        "seed": seed,
        "mean_response": s.mean_response,
        "median_response": statistics.median(resp),
        "mean_slowdown": s.mean_slowdown,
        "mean_jobs": s.mean_jobs_in_system,
        "in_system_at_last_arrival": at_last,
        "small_half_response": statistics.fmean(table.response[k] for k in small),
        "big_tenth_response": statistics.fmean(table.response[k] for k in big),
        "offered_realised": realised / (nodes * span),
        "arrival_span_h": span / 3600.0,
        "drain_h": (s.makespan - span) / 3600.0,
        "idle_waiting": meter.idle_waiting_ns / busy,
        "waiting_time": meter.waiting_s * nodes / busy,
        "launch_share": launch_ns / busy,
        "paired_share": meter.paired_ns / busy,
        "work_share_top1pc": _top_share(jobs, 0.01),
        "nominal_node_h": nominal / 3600.0,
    }


def _top_share(jobs: Sequence[Any], frac: float) -> float:
    """The share of the work (size x runtime) carried by the largest ``frac`` of the jobs."""
    w = sorted((j.size * j.runtime for j in jobs), reverse=True)
    k = max(1, round(frac * len(w)))
    return math.fsum(w[:k]) / math.fsum(w)


def plan(seeds: Sequence[int], variants: Sequence[Variant] = VARIANTS) -> list[RunSpec]:
    spec = load_study(REPO / SPEC)
    model = model_figures(spec)
    specs = []
    for v in variants:
        for pol in ("gang", "paired-gang"):
            for load in v.loads:
                for seed in seeds:
                    params = {
                        "variant": v.label,
                        "policy": pol,
                        "params": dict(v.gang_params) if pol == "gang" else {},
                        "profile": "homogeneous",
                        "terms": sorted(v.terms),
                        "load": load,
                        "nodes": spec.nodes,
                        "quantum": spec.quantum,
                        "jobs": v.jobs,
                        "runtime_cap_quantile": v.cap,
                        "runtime_scale": spec.runtime_scale,
                        "reference_size": spec.reference_size,
                        "model": {k: x for k, x in model.items() if k not in ("source", "barrier")},
                        "barrier": model["barrier"],
                    }
                    specs.append(RunSpec("paired-decompose", params, seed, run_one))
    return specs


def run(seeds: Sequence[int], opts: SweepOptions) -> dict[str, Any]:
    specs = plan(seeds)
    began = time.perf_counter()
    res = run_sweep(specs, opts)
    res.check()
    return {
        "meta": {
            "spec": SPEC,
            "seeds": list(seeds),
            "variants": [
                v.__dict__ | {"loads": list(v.loads), "terms": list(v.terms)} for v in VARIANTS
            ],
            "runs": len(specs),
            "wall_seconds": round(time.perf_counter() - began, 1),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "runs": [dict(r) for r in res.results if r is not None],
    }


# ---------------------------------------------------------------- the report
def _vals(
    rows: Sequence[Mapping[str, Any]], v: str, pol: str, load: float, key: str
) -> dict[int, float]:
    return {
        int(r["seed"]): float(r[key])
        for r in rows
        if r["variant"] == v and r["policy"] == pol and abs(r["load"] - load) < 1e-9
    }


def _ratio(rows: Sequence[Mapping[str, Any]], v: str, load: float, key: str) -> Estimate:
    r = _ratio_by_seed(rows, v, load, key)
    return Estimate(tuple(r[s] for s in sorted(r)))


def _est(rows: Sequence[Mapping[str, Any]], v: str, pol: str, load: float, key: str) -> Estimate:
    d = _vals(rows, v, pol, load, key)
    return Estimate(tuple(d[s] for s in sorted(d)))


def _label(v: Mapping[str, Any]) -> str:
    """A variant's name in the tables; a what-if (not the measured model) says so."""
    return str(v["label"]) + (" (what-if)" if v["what_if"] else "")


def _line(rows: Sequence[Mapping[str, Any]], v: Mapping[str, Any], load: float) -> str:
    lab = _label(v)

    def r(k: str) -> str:
        return _ratio(rows, v["label"], load, k).text("{:.2f}")

    def g(k: str, fmt: str = "{:.3f}", pol: str = "gang") -> str:
        return _est(rows, v["label"], pol, load, k).text(fmt)

    return (
        f"| {lab}: {v['what']} | {load:g} | {g('offered_realised', '{:.2f}')} | "
        f"{r('mean_response')} | {r('median_response')} | {r('mean_slowdown')} | "
        f"{r('small_half_response')} | {r('big_tenth_response')} | "
        f"{g('mean_jobs', '{:.1f}')} | {g('mean_jobs', '{:.1f}', 'paired-gang')} | "
        f"{g('in_system_at_last_arrival', '{:.0f}')} | "
        f"{g('idle_waiting')} | {g('launch_share')} | "
        f"{g('paired_share', pol='paired-gang')} | {g('drain_h', '{:.2f}')} |"
    )


def _delta(rows: Sequence[Mapping[str, Any]], v: Mapping[str, Any], load: float) -> str:
    from testbed.experiment.claims import Difference

    a = _ratio_by_seed(rows, v["label"], load)
    ref = load if load in (0.5, 0.95) else 0.95  # the loads beyond: against the full 0.95
    b = _ratio_by_seed(rows, "full", ref)
    seeds = sorted(set(a) & set(b))
    d = Difference.of([a[s] for s in seeds], [b[s] for s in seeds])
    per = ", ".join(f"{x:+.2f}" for x in d.values)
    e = Estimate(d.values)
    lab = _label(v)
    at = f"{load:g}" if ref == load else f"{load:g} (against 0.95)"
    yes = "yes" if d.beyond_spread() else "no"
    return f"| {lab} | {at} | {e.mean:+.2f} ± {e.ci:.2f} | {per} | {yes} |"


def _ratio_by_seed(
    rows: Sequence[Mapping[str, Any]], v: str, load: float, key: str = "mean_response"
) -> dict[int, float]:
    """Gang ÷ paired of ``key``, seed by seed (the seeds both ran, paired's nonzero)."""
    g, p = _vals(rows, v, "gang", load, key), _vals(rows, v, "paired-gang", load, key)
    return {s: g[s] / p[s] for s in g if p.get(s)}


def markdown(data: Mapping[str, Any]) -> str:
    rows = data["runs"]
    meta = data["meta"]
    seeds = meta["seeds"]
    lines = [
        "# Gang ÷ paired at the paper's scale: what moves the ratio",
        "",
        "Wiseman & Feitelson 2003 §4.2.1: paired gang's mean response about 2 times faster "
        "than strict gang's at load 0.5 and nearly 6 times at 0.95. The Figs. 10-11 setup "
        f"({meta['spec']}: 16 nodes, 1 s quanta, Lublin jobs with times ÷ 40, homogeneous "
        f"45 % jobs) over seeds {', '.join(map(str, seeds))}, each line a change to the full "
        "measured model run by both policies on the same workloads. Ratios are gang ÷ "
        "paired, seed by seed; mean ± 95 % CI over the seeds.",
        "",
        "Columns: *idle while waiting* is the share of gang's node-time in which a node had "
        "nothing to run while some job in the system was not running (packing and "
        "fragmentation); *launch* the share of gang's node-time spent launching and tearing "
        "down; *paired* the share of paired gang's node-time run as a pair; *jobs* the "
        "time-weighted mean number of jobs in the system (by Little's law the response "
        "ratio); the *least-work half* and *most-work tenth* are the jobs ranked by size × "
        "run time; *realised load* the work the program model gives the jobs over the arrival "
        "span.",
        "",
        "| variant | load | realised load | response ratio | median response ratio | "
        "slowdown ratio | ratio, least-work half | ratio, most-work tenth | gang jobs | "
        "paired jobs | gang jobs at the last arrival | gang idle while waiting | gang launch | "
        "paired run as a pair | gang drain (h) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in meta["variants"]:
        for load in v["loads"]:
            lines.append(_line(rows, v, load))
    lines += [
        "",
        "How much each change moves the response ratio: per seed, the variant's gang ÷ "
        "paired less the full model's at the same load (mean ± 95 % CI; *beyond spread*: "
        "the same sign in every seed and a mean larger than half the range, "
        "testbed/experiment/claims.py):",
        "",
        "| variant | load | change of the ratio | per seed | beyond spread |",
        "|---|---|---|---|---|",
    ]
    for v in meta["variants"]:
        for load in v["loads"]:
            if v["label"] != "full":
                lines.append(_delta(rows, v, load))
    lines += ["", "Per seed, the full model at 0.95 (gang ÷ paired mean response; the top 1 % "
              "of the jobs' share of the work):", ""]  # fmt: skip
    g = _vals(rows, "full", "gang", 0.95, "mean_response")
    p = _vals(rows, "full", "paired-gang", 0.95, "mean_response")
    top = _vals(rows, "full", "gang", 0.95, "work_share_top1pc")
    for s in sorted(g):
        lines.append(f"* seed {s}: {g[s]:.1f} s ÷ {p[s]:.1f} s = {g[s] / p[s]:.2f}; "
                     f"top 1 % of the jobs carry {top[s]:.0%} of the work")  # fmt: skip
    lines += ["", f"{meta['runs']} simulations, {meta['wall_seconds']:g} s through the sweep "
              f"executor, {meta['date']}.", ""]  # fmt: skip
    return "\n".join(lines)


class DecomposeStudy(Study):
    kind = "paired-decompose"
    title = (
        "Wiseman & Feitelson 2003 §4.2.1, Fig. 10: what moves gang ÷ paired at the paper's "
        "scale, each model term switched off, with per-quantum meters"
    )
    spec_tables: ClassVar[tuple[str, ...]] = ("study", "quick")
    specs = ("experiments/paired-scale-decompose.toml",)
    has_quick = True

    def load(self, doc: Table) -> Any:
        st = doc.table("study", required=True)
        st.only({"name", "seeds"})
        q = doc.table("quick")
        q.only({"seeds"})
        seeds = st.items("seeds", int, [1, 2, 3], unique=True, minimum=1)
        return {
            "name": st.text("name", "paired-decomposition"),
            "seeds": seeds,
            "quick": q.items("seeds", int, seeds[:1], unique=True, minimum=1),
        }

    def quick(self, spec: Any) -> Any:
        return {**spec, "name": spec["name"] + "-quick", "seeds": spec["quick"]}

    def name(self, spec: Any) -> str:
        return str(spec["name"])

    def plan(self, spec: Any) -> list[str]:
        return [f"{len(plan(spec['seeds']))} simulations, seeds {spec['seeds']}"]

    def run(self, spec: Any, ctx: RunContext) -> Any:
        return run(spec["seeds"], replace(ctx.sweep, desc="decomposition runs"))

    def dump(self, data: Any) -> str:
        return runs_json(data)

    def render(self, data: Any) -> dict[str, str]:
        return {"report.md": markdown(data)}


STUDY = DecomposeStudy()
