"""Report of a job-stream experiment (Yu & Byun 2011 §5.3, §5.5): Markdown, PNGs, the paper beside
us.

Yu & Byun's Figs. 7, 8, 10 and 11 are bar charts whose heights its text does
not give; what the text states are relative differences between schemes
(:data:`PAPER_CLAIMS`). The report sets each of them beside the same ratio
computed from our runs and draws our bars, without inventing the paper's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.experiment.cdc.run import StreamResult, StreamRun
from testbed.experiment.claims import Claim, Difference, Verdict, judge, judge_value
from testbed.experiment.claims import markdown as claims_markdown

CC = ("cc-s", "cc-b")
# The schemes of the paper's Figs. 7-11 besides CC (IB is in its Table 1, not its figures).
OTHER_CDC = ("local", "dcs", "pb", "sb", "hybrid")
SPINNING = ("local", "dcs", "pb", "cc-s")  # §5.3's two groups
BLOCKING = ("sb", "hybrid", "cc-b")
PLOTS = (
    "fig7_response.png",
    "fig8_bcr_md.png",
    "fig10_mpl_response.png",
    "fig11_mpl_bcr_md.png",
    "claims.png",
)


@dataclass(frozen=True)
class Stated:
    """A figure Yu & Byun's text states: ``ours`` vs ``base``, relative change in %."""

    where: str  # section and figure
    text: str
    paper_pct: float
    metric: str  # response_s | bcr | md | exec_s
    load: str
    mpl: int
    ours: str  # a scheme, or "cc" for the best of CC-S/CC-B against the others
    base: str  # a scheme, or "others"
    app: str | None = None  # only jobs of this application
    note: str = ""


PAPER_CLAIMS: tuple[Stated, ...] = (
    Stated(
        "§5.3, Fig. 7(a)",
        "CC-B vs SB, avg. response time, heavy load",
        -36.6,
        "response_s",
        "heavy",
        5,
        "cc-b",
        "sb",
        note="paper: 'up to'",
    ),
    Stated(
        "§5.3, Fig. 7(a)",
        "CC-B vs HYBRID, avg. response time, heavy load",
        -24.7,
        "response_s",
        "heavy",
        5,
        "cc-b",
        "hybrid",
        note="paper: 'up to'",
    ),
    Stated(
        "§5.3, Fig. 7(a)",
        "CC-S vs PB, avg. response time, heavy load",
        -8.02,
        "response_s",
        "heavy",
        5,
        "cc-s",
        "pb",
        note="paper: 'up to'",
    ),
    Stated(
        "§5.3, Fig. 8(a)",
        "CC-B vs SB, BCR, heavy load",
        -22.0,
        "bcr",
        "heavy",
        5,
        "cc-b",
        "sb",
        note="paper: 'up to'",
    ),
    Stated(
        "§5.3, Fig. 8(a)",
        "CC-B vs SB, MD, heavy load",
        -25.0,
        "md",
        "heavy",
        5,
        "cc-b",
        "sb",
        note="paper: 'up to'",
    ),
    Stated(
        "§5.5, Fig. 10",
        "CC vs other CDC schemes, avg. response time",
        -20.3,
        "response_s",
        "heavy",
        3,
        "cc",
        "others",
        note="paper: 'up to'; ours: the better of CC-S and CC-B against the best of LOCAL,"
        " DCS, PB, SB and HYBRID (the schemes of its Fig. 10); the paper does not say"
        " which load Fig. 10 ran, we use heavy",
    ),
    Stated(
        "§5.4, Fig. 9 (WL5)",
        "CC-B vs SB, avg. execution time of CG",
        -26.8,
        "exec_s",
        "heavy",
        5,
        "cc-b",
        "sb",
        app="cg",
        note="paper: 50 CG jobs at once (WL5); ours: the CG jobs of the WL6 stream",
    ),
    Stated(
        "§5.4, Fig. 9 (WL5)",
        "CC-B vs HYBRID, avg. execution time of CG",
        -13.6,
        "exec_s",
        "heavy",
        5,
        "cc-b",
        "hybrid",
        app="cg",
        note="paper: 50 CG jobs at once (WL5); ours: the CG jobs of the WL6 stream",
    ),
)

BARS_NOTE = (
    "The paper's Figs. 7, 8, 10 and 11 are bar charts; their heights are not in its text, so "
    "we do not reproduce them. The table below sets every figure the text states beside the "
    "same ratio from our runs; the plots show our bars only."
)


# ---- lookups ---------------------------------------------------------------------------


def find(runs: Sequence[StreamRun], scheme: str, load: str, mpl: int) -> StreamRun | None:
    """The run of ``scheme`` at ``load`` and ``mpl`` (batch: its one run per load)."""
    want = 1 if scheme == "batch" else mpl
    return next((r for r in runs if r.scheme == scheme and r.load == load and r.mpl == want), None)


def value(run: StreamRun | None, metric: str, app: str | None = None) -> float | None:
    if run is None:
        return None
    if metric == "bcr":
        return run.bcr
    if metric == "md":
        return run.md_mean_s
    return run.avg(metric, app)


def change_pct(ours: float | None, base: float | None) -> float | None:
    """(ours ÷ base − 1) in %: negative when ours is lower (better)."""
    if ours is None or base is None or base == 0:
        return None
    return (ours / base - 1.0) * 100.0


def claim_ours(runs: Sequence[StreamRun], c: Stated) -> tuple[float | None, str]:
    """Our counterpart of a stated figure, in %, and how it was computed."""
    if c.ours == "cc":  # CC at its best against the best of the other schemes
        best_cc = _best(runs, CC, c)
        best_other = _best(runs, OTHER_CDC, c)
        if best_cc is None or best_other is None:
            return None, ""
        pct = change_pct(best_cc[0], best_other[0])
        return pct, f"{best_cc[1].upper()} vs {best_other[1].upper()}"
    pct = change_pct(
        value(find(runs, c.ours, c.load, c.mpl), c.metric, c.app),
        value(find(runs, c.base, c.load, c.mpl), c.metric, c.app),
    )
    return pct, ""


def _best(runs: Sequence[StreamRun], schemes: Sequence[str], c: Stated) -> tuple[float, str] | None:
    vals = [(value(find(runs, s, c.load, c.mpl), c.metric, c.app), s) for s in schemes]
    got = [(v, s) for v, s in vals if v is not None]
    return min(got) if got else None


# ---- verdicts (claims.py) ------------------------------------------------------------


def _resp(runs: Sequence[StreamRun], s: str, load: str, mpl: int) -> float | None:
    return value(find(runs, s, load, mpl), "response_s")


def _groups(
    cid: str,
    where: str,
    says: str,
    what: str,
    pairs: Sequence[tuple[str, float | None, float | None]],
    fmt: str = "{:.2f}",
) -> Claim:
    """A claim that ``a > b`` in every condition (label, a, b); ``what`` names a and b. One
    run each, so at best a direction; not reproduced if any condition goes the other way."""
    got = [(lab, a, b) for lab, a, b in pairs if a is not None and b is not None]
    if not got:
        return Claim(cid, where, says, "–", Verdict.NOT_ATTEMPTED, "not in these runs")
    shown = f"{what}: " + "; ".join(
        f"{lab} {fmt.format(a)} vs {fmt.format(b)}" for lab, a, b in got
    )
    bad = [lab for lab, a, b in got if not a > b]
    if bad:
        return Claim(
            cid,
            where,
            says,
            shown,
            Verdict.NOT_REPRODUCED,
            "the opposite direction: " + ", ".join(bad),
        )
    verdict, why = judge(Difference((min(a - b for _, a, b in got),)), 1)
    return Claim(cid, where, says, shown, verdict, why)


def _fastest(
    runs: Sequence[StreamRun],
    schemes: Sequence[str],
    load: str,
    mpl: int,
    metric: str = "response_s",
    scale: float = 1.0,
    top: bool = False,
) -> float | None:
    """The lowest (``top``: the highest) of ``metric`` over ``schemes``; None if one is missing."""
    vals = [value(find(runs, s, load, mpl), metric) for s in schemes]
    if None in vals or not vals:
        return None
    return (max if top else min)(vals) * scale  # type: ignore[type-var, operator]


def claims(result: StreamResult) -> list[Claim]:
    """Yu & Byun 2011 §5.3 and §5.5's results these runs measure (one stream, one run per
    scheme, load and MPL: at best a direction)."""
    runs = result.runs
    out: list[Claim] = []
    loads = list(dict.fromkeys(r.load for r in runs))
    mpls = sorted({r.mpl for r in runs if r.scheme != "batch"})
    top = max(mpls) if mpls else 5
    cols = [(ld, top) for ld in loads] + [("heavy", m) for m in mpls if m != top]
    paper = ("batch", *OTHER_CDC, *CC)
    f7 = "§5.3, Fig. 7"

    def up(names: Sequence[str]) -> str:
        return ", ".join(n.upper() for n in names)

    if "heavy" in loads and "light" in loads:
        out.append(
            _groups(
                "yb2011/fig7/heavy-above-light",
                f7,
                "every scheme's average response time is much longer under heavy load than light",
                "response time heavy vs light, s",
                [
                    (s.upper(), _resp(runs, s, "heavy", top), _resp(runs, s, "light", top))
                    for s in paper
                ],
            )
        )
    for cid, says, scheme, others in (
        (
            "local-worst",
            "LOCAL has the worst response time",
            "local",
            [s for s in paper if s != "local"],
        ),
        (
            "dcs-next",
            "DCS follows next (the worst after LOCAL)",
            "dcs",
            [s for s in paper if s not in ("local", "dcs")],
        ),
        (
            "batch-next",
            "of the other six schemes, BATCH generally gives the next highest response time",
            "batch",
            ["pb", "sb", "hybrid", "cc-s", "cc-b"],
        ),
    ):
        out.append(
            _groups(
                f"yb2011/fig7/{cid}",
                f7,
                says,
                f"response time, {scheme.upper()} vs the slowest of {up(others)}, s",
                [
                    (ld, _resp(runs, scheme, ld, top), _fastest(runs, others, ld, top, top=True))
                    for ld in loads
                ],
            )
        )
    out.append(
        _groups(
            "yb2011/fig7/blocking-beats-spinning",
            "§5.3, Figs. 7 and 10",
            "the blocking schemes (SB, HYBRID, CC-B) outperform the spinning ones (LOCAL, DCS, "
            "PB, CC-S) in all cases",
            "response time, the fastest spinning vs the slowest blocking, s",
            [
                (
                    f"{ld} MPL {m}",
                    _fastest(runs, SPINNING, ld, m),
                    _fastest(runs, BLOCKING, ld, m, top=True),
                )
                for ld, m in cols
            ],
        )
    )
    others = [s for s in paper if s != "cc-b"]
    out.append(
        _groups(
            "yb2011/fig7/ccb-best",
            f7,
            "CC-B performs the best of all schemes",
            f"response time, the fastest of {up(others)} vs CC-B, s",
            [(ld, _fastest(runs, others, ld, top), _resp(runs, "cc-b", ld, top)) for ld in loads],
        )
    )
    out.append(
        _groups(
            "yb2011/fig7/ccs-best-spinning",
            f7,
            "CC-S improves significantly over the other spinning schemes",
            "response time, the fastest of LOCAL, DCS, PB vs CC-S, s",
            [
                (ld, _fastest(runs, ("local", "dcs", "pb"), ld, top), _resp(runs, "cc-s", ld, top))
                for ld in loads
            ],
        )
    )
    for c in PAPER_CLAIMS:
        ours, how = claim_ours(runs, c)
        key = c.text.split(",")[0].lower().replace(" vs ", "-vs-").replace(" ", "-")
        metric = {"response_s": "response", "bcr": "bcr", "md": "md", "exec_s": "exec"}[c.metric]
        fig = re.sub(r"[()]", "", c.where.split(", ")[-1].lower().replace(". ", ""))
        fig = fig.replace(" ", "-")
        cid = f"yb2011/{fig}/{key}-{metric}"
        says = f"{c.text}: {c.paper_pct:+.1f} % ('up to')"
        note = f" ({how})" if how else ""
        if c.app:
            note += f"; {c.note.split('; ')[-1]}"
        measured = f"{_pct(ours)}{note}"
        if ours is None:
            out.append(Claim(cid, c.where, says, measured, Verdict.NOT_ATTEMPTED, "not run"))
            continue
        # "up to" bounds a reduction: the same direction, and at least half of it, is within
        verdict, why = judge(Difference((-ours,)), 1, ours <= c.paper_pct / 2)
        out.append(Claim(cid, c.where, says, measured, verdict, why))
    if "light" in loads and "heavy" in loads:
        for metric, label in (("bcr", "BCR"), ("md", "MD")):
            out.append(_load_insensitive(runs, metric, label, top))
    for metric, label in (("bcr", "BCR"), ("md", "MD")):
        scale = 1e3 if metric == "md" else 1.0
        out.append(
            _groups(
                f"yb2011/fig8/spinning-{metric}-higher",
                "§5.3, Fig. 8",
                f"the {label} of DCS, PB and CC-S is larger than that of SB, HYBRID and CC-B",
                f"{label}{' (ms)' if metric == 'md' else ''}, the lowest of DCS, PB, CC-S vs the "
                "highest of SB, HYBRID, CC-B",
                [
                    (
                        f"{ld} MPL {m}",
                        _fastest(runs, ("dcs", "pb", "cc-s"), ld, m, metric, scale),
                        _fastest(runs, BLOCKING, ld, m, metric, scale, top=True),
                    )
                    for ld, m in cols
                ],
                "{:.3f}" if metric == "bcr" else "{:.2f}",
            )
        )
    if 3 in mpls and 5 in mpls:
        out.append(
            _groups(
                "yb2011/fig10/exec-rises-with-mpl",
                "§5.5, Fig. 10",
                "from MPL 3 to 5 the average execution time of every scheme is prolonged",
                "execution time at MPL 5 vs MPL 3, s",
                [
                    (
                        s.upper(),
                        value(find(runs, s, "heavy", 5), "exec_s"),
                        value(find(runs, s, "heavy", 3), "exec_s"),
                    )
                    for s in (*OTHER_CDC, *CC)
                ],
            )
        )
        out.append(
            _groups(
                "yb2011/fig10/response-falls-with-mpl",
                "§5.5, Fig. 10",
                "except LOCAL and DCS, the average response time falls from MPL 3 to 5",
                "response time at MPL 3 vs MPL 5, s",
                [
                    (s.upper(), _resp(runs, s, "heavy", 3), _resp(runs, s, "heavy", 5))
                    for s in ("pb", "sb", "hybrid", "cc-s", "cc-b")
                ],
            )
        )
        steep = [
            (
                s.upper(),
                value(find(runs, s, "heavy", 5), "exec_s"),
                value(find(runs, s, "heavy", 3), "exec_s"),
            )
            for s in (*OTHER_CDC, *CC)
        ]
        rise = {s: a - b for s, a, b in steep if a is not None and b is not None}
        tolerant = [v for s, v in rise.items() if s not in ("LOCAL", "DCS")]
        out.append(
            _groups(
                "yb2011/fig10/local-dcs-steep",
                "§5.5, Fig. 10",
                "LOCAL and DCS have a very steep increase in execution time with the MPL; the "
                "other schemes are much more tolerant",
                "rise of the execution time from MPL 3 to 5, s: the smaller of LOCAL's and DCS's "
                "vs the largest of the others",
                [
                    (
                        "heavy",
                        min(rise.get("LOCAL", 0.0), rise.get("DCS", 0.0)),
                        max(tolerant) if tolerant else None,
                    )
                ],
            )
        )
        out.append(
            _groups(
                "yb2011/fig10/cc-best-all-mpls",
                "§5.5, Fig. 10",
                "the CC schemes outperform the other schemes at all MPLs",
                f"response time, the fastest of {up(OTHER_CDC)} vs the faster CC scheme, s",
                [
                    (
                        f"heavy MPL {m}",
                        _fastest(runs, OTHER_CDC, "heavy", m),
                        _fastest(runs, CC, "heavy", m),
                    )
                    for m in mpls
                ],
            )
        )
        gain = []
        for m in (5, 3):
            cc = value(find(runs, "cc-b", "heavy", m), "md")
            best = _fastest(runs, OTHER_CDC, "heavy", m, "md")
            gain.append(None if cc is None or best is None else (best - cc) * 1e3)
        out.append(
            _groups(
                "yb2011/fig11/md-gain-grows",
                "§5.5, Fig. 11",
                "CC's advantage in message delay grows with the MPL",
                f"the lowest MD of {up(OTHER_CDC)} minus CC-B's, ms, MPL 5 vs MPL 3",
                [("heavy", gain[0], gain[1])],
            )
        )
    return out


def _load_insensitive(runs: Sequence[StreamRun], metric: str, label: str, mpl: int) -> Claim:
    rows = []
    ok = True
    for s in ("dcs", "pb"):
        h, li = (
            value(find(runs, s, "heavy", mpl), metric),
            value(find(runs, s, "light", mpl), metric),
        )
        if h is None or li is None or h == 0:
            continue
        scale, unit = (1e3, " ms") if metric == "md" else (1.0, "")
        rows.append(f"{s.upper()} {h * scale:.3f}{unit} heavy, {li * scale:.3f}{unit} light")
        ok = ok and abs(li / h - 1) <= 0.20
    if not rows:
        return Claim(
            f"yb2011/fig8/dcs-pb-{metric}-load",
            "§5.3, Fig. 8",
            "",
            "–",
            Verdict.NOT_ATTEMPTED,
            "not in these runs",
        )
    verdict, why = judge_value((ok,), "±20 % of each other")  # each scheme ran once
    return Claim(
        f"yb2011/fig8/dcs-pb-{metric}-load",
        "§5.3, Fig. 8",
        f"the load does not change DCS's and PB's {label} (they saturate even under light load)",
        "; ".join(rows),
        verdict,
        why,
    )


# ---- formatting ------------------------------------------------------------------------


def _f(v: float | None, spec: str = "{:.2f}") -> str:
    return "–" if v is None else spec.format(v)


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v * 1e3:.2f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1f} %"


def _columns(result: StreamResult) -> list[tuple[str, int]]:
    """(load, mpl) of the runs, in run order (batch's MPL 1 folded into each MPL)."""
    cols: list[tuple[str, int]] = []
    for r in result.runs:
        if r.scheme == "batch":
            continue
        if (r.load, r.mpl) not in cols:
            cols.append((r.load, r.mpl))
    if not cols:  # batch alone
        cols = [(r.load, 1) for r in result.runs]
    return cols


def _schemes(result: StreamResult) -> list[str]:
    return list(dict.fromkeys(r.scheme for r in result.runs))


def markdown(result: StreamResult) -> str:
    spec, cl, runs = result.spec, result.cluster, result.runs
    cols = _columns(result)
    schemes = _schemes(result)
    means = spec.get("load_means_s", {})
    paper = spec.get("load_means_paper_s", {})
    lines = [
        f"# {spec.get('name', 'job streams')}: communication-driven coscheduling "
        "on real processes (Yu & Byun 2011)",
        "",
        f"Local cluster of {spec.get('nodes')} nodes ({', '.join(cl.get('nodes', []))}), link "
        f"`{spec.get('link')}`, delay mechanism **{cl.get('delay_mechanism', '?')}**, CPU per "
        f"node {spec.get('cpus_per_node')} ({(cl.get('cpu') or {}).get('mechanism', '?')}), "
        f"cgroups {cl.get('cgroups', '?')}; controller quantum {spec.get('quantum')} s, agents' "
        f"tick {spec.get('tick_ms') or spec.get('decision_interval_ms') or 10.0} ms, SB spin "
        f"{spec.get('spin_us')} µs, boost "
        f"{spec.get('boost')}.",
        f"Each run: {spec.get('jobs')} jobs from seed {spec.get('seed')} (the same stream for "
        f"every scheme, MPL and load), each about {spec.get('job_seconds')} s alone (the "
        f"paper's {spec.get('paper_job_seconds')} s × {_f(spec.get('time_scale'), '{:.3f}')}); "
        "mean interarrival "
        + ", ".join(
            f"{k} {_f(means.get(k))} s (paper {_f(paper.get(k))} s)" for k in spec.get("loads", [])
        )
        + f" — scaled by the job length and by our relative job width "
        f"(× {_f(spec.get('width_scale'), '{:.3f}')}), so the ratio and the offered load are "
        "the paper's. Response time = wait + execution. FIFO allocation, least-loaded nodes.",
        "",
        "Job sizes (Table 3 on 16 nodes → ours): "
        + ", ".join(f"{k} → {v}" for k, v in (spec.get("size_map") or {}).items())
        + ".",
        "",
        "| app | intensity | pattern | sizes | messages (comm, bytes, share %) | "
        "compute/iter ms | iterations | rounds/iter |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in spec.get("apps", []):
        msgs = "; ".join(f"{c} {b} B ({s:g})" for c, b, s in a.get("messages", []))
        lines.append(
            f"| {a['name'].upper()} | {a.get('intensity', '')} | {a.get('pattern', '')} | "
            f"{a.get('paper_sizes')} → {a.get('sizes')} | {msgs} | {a.get('compute_ms')} | "
            f"{a.get('iterations')} | {a.get('comm_rounds')} |"
        )
    head = " | ".join(f"{ld} MPL {m}" for ld, m in cols)
    lines += [
        "",
        "## Average response time, s (Yu & Byun 2011 Figs. 7 and 10)",
        "",
        "Mean over the jobs that completed: response (wait + execution). BATCH runs at MPL 1 "
        "in every column.",
        "",
        f"| scheme | {head} |",
        "|---|" + "---|" * len(cols),
    ]
    for s in schemes:
        cells = []
        for ld, m in cols:
            run = find(runs, s, ld, m)
            cells.append(
                "–"
                if run is None
                else f"{_f(run.avg('response_s'))} ({_f(run.avg('wait_s'))} + "
                f"{_f(run.avg('exec_s'))})"
            )
        lines.append(f"| {s.upper()} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Boost conflict ratio and message delay (Yu & Byun 2011 Figs. 8 and 11)",
        "",
        "From the agents' `cdc` counters, gained over each run, summed over the nodes: "
        "BCR = conflicts ÷ decision points, MD = mean over every completed receive, ms. "
        "`–`: not measured (no agent reported a `cdc` block). BATCH runs one job per node "
        "at MPL 1 in every column, so it never has a boost to conflict.",
        "",
        f"| scheme | {' | '.join(f'{ld} MPL {m}: BCR / MD ms' for ld, m in cols)} |",
        "|---|" + "---|" * len(cols),
    ]
    for s in schemes:
        cells = []
        for ld, m in cols:
            run = find(runs, s, ld, m)
            cells.append("–" if run is None else f"{_f(run.bcr, '{:.3f}')} / {_ms(run.md_mean_s)}")
        lines.append(f"| {s.upper()} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Runs",
        "",
        "| scheme | load | MPL | jobs done | killed | utilization | decisions | conflicts | "
        "boosts | MD samples | header ERL mean / max ms | agents' CPU | agents | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cdc = r.cdc or {}
        odd = {n: v for n, v in r.local_policy.items() if v != r.scheme}
        agents = "all on " + r.scheme if r.local_policy and not odd else (str(odd) or "–")
        lines.append(
            f"| {r.scheme.upper()} | {r.load} | {r.mpl} | {len(r.done())}/{len(r.jobs)} | "
            f"{r.killed} | {_f(r.utilization, '{:.0%}')} | {cdc.get('decisions', '–')} | "
            f"{cdc.get('conflicts', '–')} | {cdc.get('boosts', '–')} | "
            f"{cdc.get('md_count', '–')} | {_erl(r)} | "
            f"{_agent_cpu(cdc, r.wall_seconds, len(r.local_policy))} | {agents} | "
            f"{r.wall_seconds:.0f} |"
        )
    lines += [
        "",
        "## The paper's stated figures beside ours",
        "",
        BARS_NOTE,
        "",
        "| where | comparison | load | MPL | paper | ours | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in PAPER_CLAIMS:
        ours, how = claim_ours(runs, c)
        note = "; ".join(x for x in (how, c.note) if x)
        lines.append(
            f"| {c.where} | {c.text} | {c.load} | {c.mpl} | {c.paper_pct:+.1f} % | "
            f"{_pct(ours)} | {note} |"
        )
    lines += ["", "Relative change = ours ÷ base − 1; negative: the first scheme is lower.", ""]
    lines += claims_markdown(claims(result), "## The paper beside ours, with verdicts")
    for name in plot_names(result):
        lines += [f"![{name}]({name})", ""]
    return "\n".join(lines)


def _erl(run: StreamRun) -> str:
    """The ERLs the jobs' rank 0 received in message headers: the mean over the jobs of
    their means, and the largest, ms ('–' without reports)."""
    msgs = [j.report.get("messages") or {} for j in run.jobs]
    means = [m["header_erl_mean_us"] for m in msgs if "header_erl_mean_us" in m]
    tops = [m["header_erl_max_us"] for m in msgs if "header_erl_max_us" in m]
    if not means or not tops:
        return "–"
    return f"{sum(means) / len(means) / 1e3:.2f} / {max(tops) / 1e3:.2f}"


def _agent_cpu(cdc: dict[str, Any], wall_s: float, nodes: int) -> str:
    """The agents' own CPU over the run, % of a core per agent ('–' if not reported)."""
    cpu = cdc.get("agent_cpu_s")
    if not cpu or wall_s <= 0 or nodes <= 0:
        return "–"
    return f"{100 * float(cpu) / wall_s / nodes:.1f} %"


def plot_names(result: StreamResult) -> list[str]:
    """The PNGs :func:`plots` draws for these runs (Figs. 10-11 need two MPLs)."""
    schemes = _schemes(result)
    cdc = [s for s in schemes if s != "batch"]
    mpls = {r.mpl for r in result.runs if r.scheme != "batch"}
    names = [PLOTS[0]]
    if cdc:
        names.append(PLOTS[1])
        if len(mpls) > 1:
            names += [PLOTS[2], PLOTS[3]]
    names.append(PLOTS[4])
    return names


def text_summary(result: StreamResult) -> str:
    """What the terminal shows: response times, BCR/MD, the paper's figures beside ours."""
    runs = result.runs
    cols = _columns(result)
    schemes = _schemes(result)
    width = 16
    head = f"{'scheme':<8}" + "".join(f"{f'{ld} MPL {m}':>{width}}" for ld, m in cols)
    out = ["average response time, s (wait + execution; Yu & Byun 2011 Figs. 7, 10)", head]
    out.append("-" * len(head))
    for s in schemes:
        cells = "".join(
            f"{_f(value(find(runs, s, ld, m), 'response_s')):>{width}}" for ld, m in cols
        )
        out.append(f"{s:<8}{cells}")
    out += [
        "",
        "BCR / MD ms (agents' cdc counters; Yu & Byun 2011 Figs. 8, 11)",
        head,
        "-" * len(head),
    ]
    for s in schemes:
        if s == "batch":
            continue
        cells = ""
        for ld, m in cols:
            run = find(runs, s, ld, m)
            text = "–" if run is None else f"{_f(run.bcr, '{:.3f}')} / {_ms(run.md_mean_s)}"
            cells += f"{text:>{width}}"
        out.append(f"{s:<8}{cells}")
    out += ["", "the paper's stated figures beside ours (relative change; bars not in its text)"]
    for c in PAPER_CLAIMS:
        ours, how = claim_ours(runs, c)
        extra = f" [{how}]" if how else ""
        out.append(
            f"  {c.text} ({c.load}, MPL {c.mpl}): paper {c.paper_pct:+.1f} %, ours {_pct(ours)}"
            + extra
        )
    return "\n".join(out)


# ---- plots -------------------------------------------------------------------------------


def plots(result: StreamResult, out: Path) -> list[str]:
    """Write the PNGs that have data; returns their names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result.runs
    schemes = _schemes(result)
    loads = list(dict.fromkeys(r.load for r in runs))
    mpls = sorted({r.mpl for r in runs if r.scheme != "batch"})
    top = max(mpls) if mpls else 1
    written: list[str] = []
    wanted = plot_names(result)

    def bars(ax: Any, labels: list[str], values: list[float | None], **kw: Any) -> None:
        xs = [i for i, v in enumerate(values) if v is not None]
        ax.bar(xs, [values[i] for i in xs], **kw)
        ax.set_xticks(range(len(labels)), [x.upper() for x in labels], rotation=45, fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    # Fig. 7: response per scheme per load at the highest MPL, wait + execution stacked.
    fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 4.2), squeeze=False)
    for ax, ld in zip(axes[0], loads, strict=True):
        found = [find(runs, s, ld, top) for s in schemes]
        waits = [r.avg("wait_s") if r else None for r in found]
        execs = [r.avg("exec_s") if r else None for r in found]
        bars(ax, schemes, execs, label="execution", color="tab:blue")
        xs = [i for i, (w, e) in enumerate(zip(waits, execs, strict=True)) if None not in (w, e)]
        ax.bar(
            xs,
            [waits[i] for i in xs],
            bottom=[execs[i] for i in xs],
            label="wait",
            color="tab:orange",
        )
        ax.set_title(f"{ld} load, MPL {top} (BATCH: 1)")
        ax.set_ylabel("average response time, s")
        ax.legend(fontsize=8)
    fig.suptitle("Fig. 7: average job response time (ours)")
    fig.tight_layout()
    fig.savefig(out / PLOTS[0], dpi=110)
    plt.close(fig)
    written.append(PLOTS[0])

    cdc_schemes = [s for s in schemes if s != "batch"]
    if PLOTS[1] in wanted:
        # Fig. 8: BCR and MD per scheme per load at the highest MPL.
        fig, axes = plt.subplots(2, len(loads), figsize=(5.5 * len(loads), 6.5), squeeze=False)
        for k, ld in enumerate(loads):
            found = [find(runs, s, ld, top) for s in cdc_schemes]
            bars(axes[0][k], cdc_schemes, [r.bcr if r else None for r in found], color="tab:red")
            axes[0][k].set_title(f"{ld} load, MPL {top}")
            axes[0][k].set_ylabel("BCR")
            md = [r.md_mean_s * 1e3 if r and r.md_mean_s is not None else None for r in found]
            bars(axes[1][k], cdc_schemes, md, color="tab:green")
            axes[1][k].set_ylabel("MD, ms")
        fig.suptitle("Fig. 8: boost conflict ratio and message delay (ours)")
        fig.tight_layout()
        fig.savefig(out / PLOTS[1], dpi=110)
        plt.close(fig)
        written.append(PLOTS[1])

    if PLOTS[2] in wanted:
        ld = loads[0]
        width = 0.8 / len(mpls)
        # Fig. 10: response per scheme, one bar per MPL.
        fig, ax = plt.subplots(figsize=(8, 4.2))
        for n, m in enumerate(mpls):
            vals = [value(find(runs, s, ld, m), "response_s") for s in cdc_schemes]
            pos = [i - 0.4 + (n + 0.5) * width for i, v in enumerate(vals) if v is not None]
            ax.bar(pos, [v for v in vals if v is not None], width, label=f"MPL {m}")
        ax.set_xticks(range(len(cdc_schemes)), [s.upper() for s in cdc_schemes], fontsize=8)
        ax.set_ylabel("average response time, s")
        ax.set_title(f"Fig. 10: MPL {' vs '.join(map(str, mpls))}, {ld} load (ours)")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / PLOTS[2], dpi=110)
        plt.close(fig)
        written.append(PLOTS[2])
        # Fig. 11: BCR and MD per scheme, one bar per MPL.
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, metric, label in ((axes[0], "bcr", "BCR"), (axes[1], "md", "MD, ms")):
            for n, m in enumerate(mpls):
                vals = [value(find(runs, s, ld, m), metric) for s in cdc_schemes]
                if metric == "md":
                    vals = [None if v is None else v * 1e3 for v in vals]
                pos = [i - 0.4 + (n + 0.5) * width for i, v in enumerate(vals) if v is not None]
                ax.bar(pos, [v for v in vals if v is not None], width, label=f"MPL {m}")
            ax.set_xticks(range(len(cdc_schemes)), [s.upper() for s in cdc_schemes], fontsize=8)
            ax.set_ylabel(label)
            ax.legend(fontsize=8)
            ax.grid(axis="y", alpha=0.3)
        fig.suptitle(f"Fig. 11: BCR and MD, MPL {' vs '.join(map(str, mpls))}, {ld} load (ours)")
        fig.tight_layout()
        fig.savefig(out / PLOTS[3], dpi=110)
        plt.close(fig)
        written.append(PLOTS[3])

    # The stated figures: paper vs ours, relative change in %.
    rows = [(c, claim_ours(runs, c)[0]) for c in PAPER_CLAIMS]
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.5))
    ys = list(range(len(rows)))
    ax.barh(
        [y + 0.2 for y in ys],
        [c.paper_pct for c, _ in rows],
        0.4,
        label="paper (text)",
        color="0.6",
    )
    ours_y = [y - 0.2 for y, (_, v) in zip(ys, rows, strict=True) if v is not None]
    ax.barh(ours_y, [v for _, v in rows if v is not None], 0.4, label="ours", color="tab:blue")
    ax.set_yticks(ys, [f"{c.text}, MPL {c.mpl}" for c, _ in rows], fontsize=7)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("relative change, % (negative: the first scheme is lower)")
    ax.legend(fontsize=8)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / PLOTS[4], dpi=110)
    plt.close(fig)
    written.append(PLOTS[4])
    return written
