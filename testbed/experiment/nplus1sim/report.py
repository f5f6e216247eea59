"""The report of the N + 1 study (study.py): per job kind, the rate and response time of
each policy with 95 % confidence intervals over the seeds, N + 1 gangs against paired
gang and strict gang seed by seed (a verdict only where the difference is larger than
its seed-to-seed spread, testbed/experiment/claims.py), each device's use, and a plot of
each device's use over time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.experiment import plots as plotting
from testbed.experiment.claims import Difference
from testbed.experiment.nplus1sim.study import KINDS, per_seed, per_seed_use
from testbed.experiment.pairedscale.study import Estimate

DEVICES = ("cpu", "disk", "net")
IO = ("disk", "net")


def _est(values: list[float], fmt: str = "{:.3f}") -> str:
    e = Estimate(tuple(values))
    if math.isnan(e.ci):
        return fmt.format(e.mean)
    return f"{fmt.format(e.mean)} ± {fmt.format(e.ci)}"


def _policies(data: Mapping[str, Any]) -> list[str]:
    return list(data["spec"]["policies"])


def comparisons(data: Mapping[str, Any], other: str) -> list[tuple[str, Difference, str]]:
    """(what, N + 1 minus ``other`` per seed, unit) for the report's comparison table."""
    out: list[tuple[str, Difference, str]] = []

    def rel(a: list[float], b: list[float]) -> Difference:
        return Difference(tuple(100.0 * (x / y - 1.0) for x, y in zip(a, b, strict=True)))

    n = "nplus1"
    out.append(
        (
            "rate of disk- and network-bound jobs",
            rel(per_seed(data, n, "rate", IO), per_seed(data, other, "rate", IO)),
            "%",
        )
    )
    for kind in KINDS:
        out.append(
            (
                f"rate of {kind}-bound jobs",
                rel(per_seed(data, n, "rate", (kind,)), per_seed(data, other, "rate", (kind,))),
                "%",
            )
        )
    out.append(
        (
            "response time, all jobs",
            rel(per_seed(data, n, "response"), per_seed(data, other, "response")),
            "%",
        )
    )
    for kind in KINDS:
        out.append((f"response time of {kind}-bound jobs", rel(
            per_seed(data, n, "response", (kind,)),
            per_seed(data, other, "response", (kind,))), "%"))  # fmt: skip
    return out


def verdict(d: Difference) -> str:
    if d.spread is None:
        return "no verdict: one seed"
    if not d.beyond_spread():
        return "no verdict: within the seed-to-seed spread"
    return "N + 1 higher" if d.mean > 0 else "N + 1 lower"


def markdown(data: Mapping[str, Any]) -> str:
    spec = data["spec"]
    pols = _policies(data)
    lines = [
        "# N + 1 gangs for N I/O devices, in the simulator",
        "",
        "Wiseman & Feitelson 2003 §5 (issue 31 item 1). Each seed is one open stream of "
        f"{spec['jobs']} jobs on {spec['nodes']} nodes at offered load {spec['load']}: sizes "
        f"{spec['sizes']}, exponential run times of mean {spec['runtime']:g} s, each job "
        "compute-, disk- or network-bound with equal odds; quantum "
        f"{spec['quantum']:g} s, interference {spec['interference']:g}, the three-device "
        f"model (docs/nplus1.md), N = {spec['n']}. {spec['seeds']} seed(s); ± is the "
        "half-width of a 95 % confidence interval over the seeds (Student's t).",
        "",
        "*Rate*: a job's run time over the time from its start to its end (dedicated "
        "seconds of progress per second in the matrix; 1 = as fast as alone).",
        "",
        "## Rate per job kind",
        "",
        "| policy | " + " | ".join(f"{k}-bound" for k in KINDS) + " | disk + net |",
        "|---|" + "---|" * (len(KINDS) + 1),
    ]
    for p in pols:
        cells = [_est(per_seed(data, p, "rate", (k,))) for k in KINDS]
        cells.append(_est(per_seed(data, p, "rate", IO)))
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Response time per job kind (s)",
        "",
        "| policy | " + " | ".join(f"{k}-bound" for k in KINDS) + " | all |",
        "|---|" + "---|" * (len(KINDS) + 1),
    ]
    for p in pols:
        cells = [_est(per_seed(data, p, "response", (k,)), "{:.0f}") for k in KINDS]
        cells.append(_est(per_seed(data, p, "response"), "{:.0f}"))
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Each device's use (share of the machine, mean over the run)",
        "",
        "| policy | " + " | ".join(DEVICES) + " | makespan s |",
        "|---|" + "---|" * (len(DEVICES) + 1),
    ]
    for p in pols:
        cells = [_est(per_seed_use(data, p, d)) for d in DEVICES]
        spans = [r["makespan"] for r in data["runs"] if r["policy"] == p]
        cells.append(_est(spans, "{:.0f}"))
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "Over time (seed 1): `device-use.png`.", ""]
    if "nplus1" in pols:
        for other in (o for o in ("paired-gang", "gang") if o in pols):
            lines += [
                f"## N + 1 gangs against {other}, seed by seed",
                "",
                "Difference in % of the other policy's figure (per seed: same stream). A "
                "verdict only where the difference has one sign in every seed and its mean "
                "is larger than half the range of the per-seed values.",
                "",
                "| figure | N + 1 vs " + other + " | verdict |",
                "|---|---|---|",
            ]
            for what, d, unit in comparisons(data, other):
                lines.append(f"| {what} | {d.text('{:+.1f}')} {unit} | {verdict(d)} |")
            lines.append("")
        groups: dict[str, int] = {}
        for r in data["runs"]:
            for k, v in r.get("groups", {}).items():
                groups[k] = groups.get(k, 0) + v
        total = sum(groups.values())
        if total:
            shares = ", ".join(
                f"{k} row(s): {100.0 * v / total:.1f} %" for k, v in sorted(groups.items())
            )
            lines += [
                f"Rows run together by N + 1 gangs, share of quanta over all seeds: {shares}.",
                "",
            ]
        rows: dict[int, int] = {}
        for r in data["runs"]:
            for k, v in r.get("rows", {}).items():
                rows[int(k)] = rows.get(int(k), 0) + v
        if rows:
            quanta = sum(rows.values())
            one, two = rows.get(1, 0), rows.get(2, 0)
            many = quanta - one - two
            three = groups.get("3", 0)
            tail = f" (a group of 3 ran in {100.0 * three / many:.1f} % of those)" if many else ""
            lines += [
                "Rows in the matrix when N + 1 gangs chose a group, share of quanta: 1 row: "
                f"{100.0 * one / quanta:.1f} %, 2 rows: {100.0 * two / quanta:.1f} %, "
                f"3 or more: {100.0 * many / quanta:.1f} %{tail}.",
                "",
            ]
    if "paired-gang" in pols:
        m = [r["matched"] for r in data["runs"] if r["policy"] == "paired-gang" and "matched" in r]
        if m:
            lines += [f"Paired gang's matching rate (paired quanta / quanta): {_est(m)}.", ""]
    lines += [f"Simulated in {data['seconds']} s.", ""]
    return "\n".join(lines)


def plots(data: Mapping[str, Any], out: Path) -> list[Path]:
    plt = plotting.pyplot()
    pols = _policies(data)
    runs = {r["policy"]: r for r in data["runs"] if r["seed"] == 1}
    fig, axes = plt.subplots(len(pols), 1, figsize=(8, 2.3 * len(pols)), sharex=True)
    if len(pols) == 1:
        axes = [axes]
    for ax, p in zip(axes, pols, strict=True):
        r = runs.get(p)
        if r is None:
            continue
        for d in DEVICES:
            values = r["use"].get(d, [])
            if values:
                width = r["makespan"] / len(values)
                ax.plot([width * (i + 0.5) for i in range(len(values))], values, label=d)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share used")
        ax.set_title(p, fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("time (s), seed 1")
    return [plotting.save(fig, out / "device-use.png")]


def summary(data: Mapping[str, Any]) -> str:
    lines = []
    if "nplus1" in _policies(data):
        for other in (o for o in ("paired-gang", "gang") if o in _policies(data)):
            for what, d, unit in comparisons(data, other)[:4]:
                lines.append(f"N + 1 vs {other}: {what} {d.text('{:+.1f}')} {unit}: {verdict(d)}")
    return "\n".join(lines)
