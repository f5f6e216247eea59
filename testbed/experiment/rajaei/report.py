"""The report of Rajaei et al.'s study (rajaei/study.py): Figs. 5–9 as tables and PNGs, each
finding of the paper's §6 beside ours with a verdict (testbed/experiment/claims.py).

The paper states directions, not numbers, so each finding is a difference between two
schemes (or two slot counts), taken seed by seed (each seed one workload both ran), and
judged in every condition the study ran: every number of jobs, and every switch cost of the
measured range (from the calibrated cost, clamped at 0, to the 1.2 % of a quantum measured
on another day). A finding's verdict is the worst over its conditions; the section "Every
comparison" lists each. Conditions where every seed ties exactly (the last arrival's own run
sets both makespans) are left out of a direction and counted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.experiment import plots as plotting
from testbed.experiment.claims import Claim, Difference, Verdict, judge, terminal, worst
from testbed.experiment.claims import markdown as claims_markdown
from testbed.experiment.rajaei.study import GANG_POLICIES, Point

PAPER = {
    "fig5": "gang outperforms backfill with lookahead in makespan; the backfill makespan is "
    "always more than gang's (Fig. 5)",
    "fig6": "gang's average wait is far less than backfill's, whose wait increases more "
    "rapidly with the number of jobs (Fig. 6)",
    "fig7": "under backfill the jobs arriving later suffer longer waits; gang's stay "
    "consistently lower (Fig. 7, 80 jobs)",
    "greedy": "gang with greedy admission seems superior to gang with backfilling "
    "admission (Fig. 5)",
    "fig8": "makespan improves appreciably from 1 to 5 slots and tends to worsen beyond 5, "
    "by about 10 ticks, as context switches grow (Fig. 8)",
    "fig9": "mean wait decreases significantly from 1 to 5 slots (Fig. 9)",
}


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan


Key = tuple[str, int | None, int, str]
Table = dict[Key, dict[str, float]]


def table(points: Sequence[Point]) -> Table:
    """Means over seeds per (policy, slots, jobs, switch cost)."""
    acc: dict[Key, list[Point]] = defaultdict(list)
    for p in points:
        acc[(p.policy, p.slots, p.jobs, p.switch)].append(p)
    return {
        k: {
            "makespan": _mean([p.makespan for p in v]),
            "wait": _mean([p.mean_wait for p in v]),
            "response": _mean([p.mean_response for p in v]),
            "n": float(len(v)),
        }
        for k, v in acc.items()
    }


def _base(meta: dict[str, Any]) -> str:
    return str(meta["switch_costs"][0]["label"])


def _by_jobs(
    t: Table, meta: dict[str, Any], policy: str, what: str, switch: str | None = None
) -> list[float]:
    slots = meta["default_slots"] if policy in GANG_POLICIES else None
    return [t[(policy, slots, n, switch or _base(meta))][what] for n in meta["job_counts"]]


def _by_slots(
    t: Table, policy: str, n: int, switch: str, slots: Sequence[int], what: str
) -> list[float]:
    return [t[(policy, s, n, switch)][what] for s in slots]


@dataclass(frozen=True)
class Comparison:
    """One finding in one condition."""

    finding: str  # fig5, fig6, ...
    policy: str
    condition: str  # "80 jobs, switch 1.2 % of q"
    ours: str  # the two means
    diff: Difference | None  # None: every seed tied
    verdict: Verdict | None
    why: str


class _Seeds:
    """Per-seed values of a (policy, slots, jobs, switch) point."""

    def __init__(self, points: Sequence[Point]) -> None:
        self.by: dict[Key, dict[int, Point]] = defaultdict(dict)
        for p in points:
            self.by[(p.policy, p.slots, p.jobs, p.switch)][p.seed] = p

    def values(self, key: Key, what: Callable[[Point], float]) -> list[float]:
        pts = self.by[key]
        return [what(pts[s]) for s in sorted(pts)]


def _slots_of(meta: dict[str, Any], policy: str) -> int | None:
    return meta["default_slots"] if policy in GANG_POLICIES else None


def _late(p: Point) -> float:
    return _mean(p.waits[len(p.waits) // 2 :])


def _early(p: Point) -> float:
    return _mean(p.waits[: len(p.waits) // 2])


def comparisons(points: Sequence[Point], meta: dict[str, Any]) -> list[Comparison]:
    """Every finding in every condition (module docstring)."""
    seeds = _Seeds(points)
    pols = meta["policies"]
    gangs = [p for p in GANG_POLICIES if p in pols]
    costs = [c["label"] for c in meta["switch_costs"]]
    out: list[Comparison] = []

    def cmp(
        finding: str,
        policy: str,
        cond: str,
        a: list[float],
        b: list[float],
        fmt: str = "{:.1f}",
        sign: int = 1,
        label: str = "",
    ) -> None:
        d = Difference.of(a, b)
        ours = f"{label}{fmt.format(_mean(a))} vs {fmt.format(_mean(b))}"
        if all(v == 0 for v in d.values):
            out.append(Comparison(finding, policy, cond, ours, None, None, "every seed ties"))
            return
        verdict, why = judge(d, sign)
        out.append(Comparison(finding, policy, cond, ours, d, verdict, why))

    def ms(p: Point) -> float:
        return p.makespan

    def wt(p: Point) -> float:
        return p.mean_wait

    for cost in costs:
        for n in meta["job_counts"]:
            cond = f"{n} jobs, switch {cost}"
            la = ("lookahead", None, n, cost)
            if "lookahead" in pols:
                for g in gangs:
                    gk = (g, _slots_of(meta, g), n, cost)
                    cmp(
                        "fig5",
                        g,
                        cond,
                        seeds.values(la, ms),
                        seeds.values(gk, ms),
                        label="lookahead vs gang ",
                    )
                    cmp(
                        "fig6",
                        g,
                        cond,
                        seeds.values(la, wt),
                        seeds.values(gk, wt),
                        label="lookahead vs gang ",
                    )
            if len(gangs) == 2:
                gr, bf = ((g, meta["default_slots"], n, cost) for g in GANG_POLICIES)
                cmp(
                    "greedy",
                    "gang-greedy",
                    cond,
                    seeds.values(bf, ms),
                    seeds.values(gr, ms),
                    label="backfill vs greedy admission ",
                )
        if "lookahead" in pols and len(meta["job_counts"]) > 1:
            lo, hi = meta["job_counts"][0], meta["job_counts"][-1]
            for g in gangs:

                def growth(
                    policy: str, lo: int = lo, hi: int = hi, cost: str = cost
                ) -> list[float]:
                    s = _slots_of(meta, policy)
                    a = seeds.values((policy, s, hi, cost), wt)
                    b = seeds.values((policy, s, lo, cost), wt)
                    return [x - y for x, y in zip(a, b, strict=True)]

                cmp(
                    "fig6-growth",
                    g,
                    f"{lo} -> {hi} jobs, switch {cost}",
                    growth("lookahead"),
                    growth(g),
                    label="growth of the wait, lookahead vs gang ",
                )
        n7 = meta["fig7_jobs"]
        la7 = seeds.by.get(("lookahead", None, n7, cost), {})
        if la7 and all(p.waits for p in la7.values()):
            a = [_late(la7[s]) for s in sorted(la7)]
            b = [_early(la7[s]) for s in sorted(la7)]
            cmp(
                "fig7-later",
                "lookahead",
                f"{n7} jobs, switch {cost}",
                a,
                b,
                label="late half vs early half ",
            )
            for g in gangs:
                g7 = seeds.by.get((g, _slots_of(meta, g), n7, cost), {})
                if g7 and all(p.waits for p in g7.values()):
                    cmp(
                        "fig7",
                        g,
                        f"{n7} jobs, switch {cost}",
                        a,
                        [_late(g7[s]) for s in sorted(g7)],
                        label="late half, lookahead vs gang ",
                    )
        slots = meta["slots"]
        if 1 in slots and 5 in slots:
            beyond = [s for s in slots if s > 5]
            for n in meta["slot_jobs"]:
                cond = f"{n} jobs, switch {cost}"
                for g in gangs:

                    def at(
                        s: int,
                        what: Callable[[Point], float],
                        g: str = g,
                        n: int = n,
                        cost: str = cost,
                    ) -> list[float]:
                        return seeds.values((g, s, n, cost), what)

                    cmp("fig8", g, cond, at(1, ms), at(5, ms), label="1 vs 5 slots ")
                    if beyond:
                        worse = [_mean(v) for v in zip(*(at(s, ms) for s in beyond), strict=True)]
                        cmp(
                            "fig8-beyond",
                            g,
                            cond,
                            worse,
                            at(5, ms),
                            label=f"{'/'.join(map(str, beyond))} vs 5 slots ",
                        )
                    cmp("fig9", g, cond, at(1, wt), at(5, wt), label="1 vs 5 slots ")
    return out


_CLAIMS = (
    ("fig5", "§6, Fig. 5", PAPER["fig5"], ("fig5",)),
    ("fig6", "§6, Fig. 6", PAPER["fig6"], ("fig6", "fig6-growth")),
    ("fig7", "§6, Fig. 7", PAPER["fig7"], ("fig7-later", "fig7")),
    ("greedy", "§6, Fig. 5", PAPER["greedy"], ("greedy",)),
    ("fig8", "§6, Fig. 8", PAPER["fig8"], ("fig8", "fig8-beyond")),
    ("fig9", "§6, Fig. 9", PAPER["fig9"], ("fig9",)),
)


def claims(points: Sequence[Point], meta: dict[str, Any]) -> list[Claim]:
    """One claim per finding and gang policy, over every condition (module docstring)."""
    comps = comparisons(points, meta)
    pols = [p for p in GANG_POLICIES if p in meta["policies"]]
    out = []
    for cid, where, says, findings in _CLAIMS:
        for g in ["gang-greedy"] if cid == "greedy" else pols:
            mine = [c for c in comps if c.finding in findings and c.policy in (g, "lookahead")]
            if cid == "fig7":
                mine = [c for c in comps if c.finding == "fig7-later"] + [
                    c for c in comps if c.finding == "fig7" and c.policy == g
                ]
            judged = [c for c in mine if c.verdict is not None]
            if not judged:
                continue
            verdict = worst([c.verdict for c in judged if c.verdict is not None])
            counts: dict[str, int] = defaultdict(int)
            for c in judged:
                counts[str(c.verdict)] += 1
            tally = ", ".join(f"{k} in {v}" for k, v in sorted(counts.items()))
            ties = len(mine) - len(judged)
            bad = [c for c in judged if c.verdict == verdict]
            example = bad[0]
            measured = (
                f"{len(judged)} conditions: {tally}"
                + (f"; {ties} tied in every seed" if ties else "")
                + f"; e.g. {example.condition}: {example.ours} "
                + f"(difference {example.diff.text() if example.diff else '0'})"
            )
            why = "the worst over the conditions: " + example.why
            name = "" if cid == "greedy" else f" ({g})"
            out.append(Claim(f"rajaei2008/{cid}/{g}", where + name, says, measured, verdict, why))
    return out


def summary(points: Sequence[Point], meta: dict[str, Any]) -> str:
    return terminal(claims(points, meta))


def markdown(points: Sequence[Point], meta: dict[str, Any]) -> str:
    t = table(points)
    pols = meta["policies"]
    L = [
        f"# {meta['name']}: Rajaei et al.'s study in the simulator",
        "",
        f"{meta['nodes']} nodes, quantum = 1 tick = {meta['quantum']} s, offered load "
        f"{meta['load']}, run times 1–{meta['max_runtime']} ticks, estimates up to "
        f"{meta['max_overestimate']}× the run time, {meta['comm_share'] * 100:.0f} % "
        f"communication-oriented jobs (45 % CPU, fine-grain barriers), the rest compute-bound; "
        f"each point the mean over {meta['seeds']} seeded workloads. Gang policies use "
        f"{meta['default_slots']} slots unless the row says otherwise. Context switch, the "
        "measured range: "
        + ", ".join(f"{c['label']} = {c['seconds'] * 1e3:.1f} ms" for c in meta["switch_costs"])
        + f". Written {meta['written']} in {meta['seconds']} s "
        "(testbed/experiment/rajaei/study.py explains every choice).",
        "",
    ]
    L += claims_markdown(claims(points, meta), "## Findings of Rajaei et al. 2008 §6, checked")
    L += [
        "## Every comparison",
        "",
        "Each finding in each condition: the two means over the seeds, the difference per "
        "seed and its verdict (the finding's verdict above is the worst of its rows).",
        "",
        "| finding | policy | condition | ours | difference | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in comparisons(points, meta):
        d = c.diff.text() if c.diff else "0 in every seed"
        v = f"**{c.verdict}**" if c.verdict else "tie (left out)"
        L.append(f"| {c.finding} | {c.policy} | {c.condition} | {c.ours} | {d} | {v} |")
    for cost in meta["switch_costs"]:
        label = cost["label"]
        L += [
            "",
            f"## Figs. 5–6: makespan and mean wait vs number of jobs (ticks), switch {label}",
            "",
        ]
        L.append("| jobs | " + " | ".join(f"{p} makespan | {p} wait" for p in pols) + " |")
        L.append("|---" * (1 + 2 * len(pols)) + "|")
        for k, n in enumerate(meta["job_counts"]):
            cells = []
            for p in pols:
                cells.append(f"{_by_jobs(t, meta, p, 'makespan', label)[k]:.1f}")
                cells.append(f"{_by_jobs(t, meta, p, 'wait', label)[k]:.1f}")
            L.append(f"| {n} | " + " | ".join(cells) + " |")
    L += ["", "![Fig. 5](fig5.png) ![Fig. 6](fig6.png)", ""]
    L += ["## Fig. 7: wait of each job, sorted by arrival", "", "![Fig. 7](fig7.png)", ""]
    L += ["## Figs. 8–9: makespan and mean wait vs number of time slots (ticks)", ""]
    gangs = [g for g in GANG_POLICIES if g in pols]
    for cost in meta["switch_costs"]:
        for n in meta["slot_jobs"]:
            L.append(f"{n} jobs, context switch {cost['label']}:")
            L.append("")
            L.append("| slots | " + " | ".join(f"{g} makespan | {g} wait" for g in gangs) + " |")
            L.append("|---" * (1 + 2 * len(gangs)) + "|")
            for s in meta["slots"]:
                cells = []
                for g in gangs:
                    row = t[(g, s, n, cost["label"])]
                    cells += [f"{row['makespan']:.1f}", f"{row['wait']:.1f}"]
                L.append(f"| {s} | " + " | ".join(cells) + " |")
            L.append("")
    L += ["![Fig. 8](fig8.png) ![Fig. 9](fig9.png)", ""]
    return "\n".join(L) + "\n"


def plots(points: Sequence[Point], meta: dict[str, Any], out: Path) -> list[Path]:
    plt = plotting.pyplot()
    t = table(points)
    pols = meta["policies"]
    counts = meta["job_counts"]
    written = []
    for name, what, ylabel in (
        ("fig5", "makespan", "makespan (ticks)"),
        ("fig6", "wait", "mean wait (ticks)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for p in pols:
            ax.plot(counts, _by_jobs(t, meta, p, what), marker="o", label=p)
        ax.set_xscale("log")
        ax.set_xlabel("number of jobs")
        ax.set_ylabel(ylabel)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    base = _base(meta)
    for p in points:
        if p.waits and p.seed == 0 and p.switch == base:  # one workload, as the paper's
            ax.plot(range(1, len(p.waits) + 1), p.waits, label=p.policy)
    ax.set_xlabel("job, in order of arrival")
    ax.set_ylabel("wait (ticks)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "fig7.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)
    gangs = [g for g in GANG_POLICIES if g in pols]
    for name, what, ylabel in (
        ("fig8", "makespan", "makespan (ticks)"),
        ("fig9", "wait", "mean wait (ticks)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for cost in meta["switch_costs"]:
            for n in meta["slot_jobs"]:
                for g in gangs:
                    ax.plot(
                        meta["slots"],
                        _by_slots(t, g, n, cost["label"], meta["slots"], what),
                        marker="o",
                        label=f"{g}, {n} jobs, {cost['label']}",
                    )
        ax.set_xlabel("number of time slots")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
