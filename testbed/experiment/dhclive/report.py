"""The dhc-live report: each policy's live figures beside the simulator's prediction, the
order of the policies on both sides, then the sim-vs-live report's tables for the same runs.

The figures are simvslive/report.py's (:func:`compare`: response = end - submit,
slowdown = response / dedicated time here, means over the jobs that ended on both sides).
One stream and one seed give no seed-to-seed spread, so the order of two policies is at
most *direction only* (docs/reproduction.md); the report says so rather than calling it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from testbed.experiment.fields import SpecError
from testbed.experiment.simvslive import report as vr
from testbed.experiment.simvslive.study import ValidationResult


def check_nodes(nodes: int, policies: Sequence[str], where: str) -> None:
    """DHC's buddy tree spans a power of two of nodes (Feitelson & Rudolph 1996 §2): one line
    otherwise, before a cluster comes up."""
    if "dhc" in policies and (nodes < 2 or nodes & (nodes - 1)):
        raise SpecError(
            f"{where}: [cluster] nodes = {nodes}, but DHC's buddy tree needs a power of two",
            fix="nodes = 2, 4 or 8",
        )


def order(values: dict[str, float]) -> list[str]:
    """Policies from the lowest value to the highest (NaN last, ties by name)."""
    return sorted(values, key=lambda p: (math.isnan(values[p]), values[p], p))


def rankings(result: ValidationResult) -> list[tuple[float, list[str], list[str]]]:
    """Per load: (load, live order, simulated order) of the policies by mean response."""
    by_load: dict[float, tuple[dict[str, float], dict[str, float]]] = {}
    for c in vr.compare(result):
        live, sim = by_load.setdefault(c.load, ({}, {}))
        live[c.policy] = c.live.mean_response
        sim[c.policy] = c.sim.mean_response
    return [(load, order(lv), order(sv)) for load, (lv, sv) in sorted(by_load.items())]


def ratio(result: ValidationResult, a: str, b: str, load: float) -> tuple[float, float]:
    """(live, simulated) mean response of ``a`` ÷ that of ``b`` at ``load`` (NaN if absent)."""
    comps = {c.policy: c for c in vr.compare(result) if c.load == load}
    if a not in comps or b not in comps:
        return math.nan, math.nan
    ca, cb = comps[a], comps[b]
    return (
        ca.live.mean_response / cb.live.mean_response,
        ca.sim.mean_response / cb.sim.mean_response,
    )


def _pair(live: float | None, sim: float | None, fmt: str = "{:.2f}") -> str:
    return f"{vr._f(live, fmt)} / {vr._f(sim, fmt)}"


def summary_lines(result: ValidationResult) -> list[str]:
    out = []
    for c in vr.compare(result):
        out.append(
            f"{c.policy:<12} load {c.load:g}: mean response live {c.live.mean_response:.2f} s, "
            f"simulated {c.sim.mean_response:.2f} s ({c.d_response:+.1%}); slowdown "
            f"{c.live.mean_slowdown:.2f} vs {c.sim.mean_slowdown:.2f}"
        )
    for load, live, sim in rankings(result):
        same = "the same" if live == sim else "NOT the same"
        out.append(
            f"load {load:g}: live order {' < '.join(live)}; simulated {' < '.join(sim)} ({same})"
        )
    return out


def markdown(result: ValidationResult) -> str:
    spec = result.meta.get("spec", {})
    quick = bool(result.meta.get("quick"))
    comps = vr.compare(result)
    variant = comps[0].variant if comps else "—"
    lines = [
        f"# {spec.get('name', 'dhc-live')}: DHC against strict and paired gang, live and "
        "simulated (Feitelson & Rudolph 1996; Wiseman & Feitelson 2003)"
        + (" — --quick" if quick else ""),
        "",
        f"One Lublin stream (seed {spec.get('seed')}, {spec.get('jobs')} jobs) on "
        f"{spec.get('nodes')} nodes ({spec.get('cpus_per_node')} CPU each, "
        f"{spec.get('cpu_mechanism')}), quantum {spec.get('quantum')} s, each policy with the "
        "registry's defaults (DHC: cube balancing, requests from any thread, minimize "
        "fragmentation, weight/uniform, selective disabling, a round over 8 quanta; "
        f"docs/dhc.md). Each cell is **live / simulated** (`{variant}`, the spec's first "
        "`[[sim]]`): the simulator's prediction for the same jobs, sizes, submit times and "
        "dedicated times.",
        "",
        "| policy | load | jobs | mean response (s) | mean slowdown | median slowdown | "
        "makespan (s) | jobs in system | matrix rows | sim ÷ live response |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comps:
        lines.append(
            f"| {c.policy} | {c.load:g} | {c.live.jobs} | "
            f"{_pair(c.live.mean_response, c.sim.mean_response)} | "
            f"{_pair(c.live.mean_slowdown, c.sim.mean_slowdown)} | "
            f"{_pair(c.live.median_slowdown, c.sim.median_slowdown)} | "
            f"{_pair(c.live.makespan, c.sim.makespan, '{:.0f}')} | "
            f"{_pair(c.live.mean_in_system, c.sim.mean_in_system)} | "
            f"{_pair(c.live.mean_rows, c.sim.mean_rows)} | {vr._pct(c.d_response)} |"
        )
    lines += ["", "## The policies' order (mean response, lowest first)", ""]
    for load, live, sim in rankings(result):
        same = (
            "the simulator predicts the live order"
            if live == sim
            else ("the simulator does **not** predict the live order")
        )
        lines.append(
            f"* load {load:g}: live {' < '.join(live)}; simulated {' < '.join(sim)} — {same}."
        )
        for a, b in (("dhc", "gang"), ("dhc", "paired-gang"), ("paired-gang", "gang")):
            lv, sv = ratio(result, a, b, load)
            if not math.isnan(lv):
                lines.append(f"  {a} ÷ {b} mean response: live {lv:.3f}, simulated {sv:.3f}.")
    lines += [
        "",
        "One stream and one seed: no seed-to-seed spread is measured, so an order of two "
        "policies here is at most *direction only* (docs/reproduction.md). How far the "
        "simulated responses move with the drift of the dedicated rate is in the table "
        '"The simulated response against the dedicated rate" below.',
        "",
    ]
    # the sim-vs-live report's tables for the same runs, its title and issue-11 target left out
    body = vr.markdown(result).splitlines()
    kept = []
    for line in body[1:]:
        if line.startswith("**Target** (issue 11)"):
            continue
        kept.append("#" + line if line.startswith("## ") else line)
    lines += ["## The runs in detail (simvslive/report.py's tables)", "", *kept]
    return "\n".join(lines).rstrip("\n") + "\n"
