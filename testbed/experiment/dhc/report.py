"""The Feitelson & Rudolph 1996 report: each reproduced table or figure beside the paper's finding
(testbed/experiment/dhcstudy.py makes the points)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.policies.dhc import ALGORITHMS, BALANCING

PAPER_TABLE1 = {"root": 2.57, "cube": 2.61, "ring": 2.88, "random": 3.01, "none": 3.30}
Points = Sequence[dict[str, Any]]


def _pick(points: Points, family: str, label: str) -> list[dict[str, Any]]:
    return [p for p in points if p["family"] == family and p["label"] == label]


def curve(
    points: Points, family: str, label: str, key: str = "median_slowdown"
) -> dict[float, float]:
    """load -> mean over seeds of ``key`` (inf where a run saturated)."""
    acc: dict[float, list[float]] = defaultdict(list)
    for p in _pick(points, family, label):
        acc[p["load"]].append(math.inf if p["saturated"] else float(p[key]))
    return {k: statistics.fmean(v) for k, v in sorted(acc.items())}


def at_load(points: Points, family: str, label: str, load: float) -> dict[str, Any] | None:
    cands = _pick(points, family, label)
    if not cands:
        return None
    best = min(cands, key=lambda p: abs(p["load"] - load))
    return best


def score(points: Points, family: str, label: str, upto: float = 0.7) -> float:
    """Mean median slowdown over the loads <= ``upto`` (the comparison figure)."""
    c = curve(points, family, label)
    vals = [v for k, v in c.items() if k <= upto + 1e-9]
    return statistics.fmean(vals) if vals else math.nan


def _fmt(x: float) -> str:
    return "sat." if math.isinf(x) else "–" if math.isnan(x) else f"{x:.2f}"


def table1_load_note(points: Points) -> list[str]:
    """Say which load Table 1 was read at when the runs do not include 0.645 (a
    --quick spec): threads per PE grow steeply with load (Little's law)."""
    p = at_load(points, "balancing-any", "root", 0.645)
    if p is None or abs(p["load"] - 0.645) < 1e-9:
        return []
    return [
        f"Read at load {p['load']:g}, the nearest run to the paper's 0.645: threads per PE "
        "grow with the load (by Little's law, load x size-weighted slowdown), so these are "
        "above what 0.645 gives.",
        "",
    ]


def findings(points: Points, meta: dict[str, Any]) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    lp = {b: at_load(points, "balancing-any", b, 0.645) for b in BALANCING}
    vals = {b: p["load_per_pe"] for b, p in lp.items() if p}
    if vals:
        ok = vals["none"] == max(vals.values()) and vals["root"] <= min(
            vals["ring"], vals["random"]
        )
        shown = ", ".join(f"{b} {v:.2f} (paper {PAPER_TABLE1[b]})" for b, v in vals.items())
        used = next(p["load"] for p in lp.values() if p)
        out.append(
            (
                ok,
                f"Table 1, threads per PE at load {used:g} (the paper's 0.645; "
                f"harmonic): {shown}; "
                "the paper: from root lowest, no balancing highest",
            )
        )
    s_none = score(points, "balancing-pe0", "none", 0.5)
    s_bal = min(score(points, "balancing-pe0", b, 0.5) for b in ("cube", "ring", "root"))
    out.append(
        (
            s_none > 1.5 * s_bal,
            f"Fig. 3, requests all from PE #1: no balancing "
            f"{_fmt(s_none)} vs best balanced {_fmt(s_bal)} (mean median slowdown, loads "
            "<= 0.5); the paper: no balancing saturates at a very low load",
        )
    )
    f_sd, b_sd = (
        score(points, "mapping", "fragmentation, SD"),
        score(points, "mapping", "balance, SD"),
    )
    out.append(
        (
            f_sd < b_sd,
            f"Fig. 4, with selective disabling: minimize fragmentation "
            f"{_fmt(f_sd)} vs strive for balance {_fmt(b_sd)}; the paper: fragmentation "
            "significantly better",
        )
    )
    f_no = score(points, "mapping", "fragmentation, no SD")
    b_no = score(points, "mapping", "balance, no SD")
    out.append(
        (
            b_no <= f_no * 1.05,
            f"Fig. 4, without selective disabling: balance "
            f"{_fmt(b_no)} vs fragmentation {_fmt(f_no)}; the paper: balance marginally "
            "better",
        )
    )
    sd = at_load(points, "algorithms", "weight/uniform", 0.515)
    nsd = at_load(points, "algorithms", "weight/uniform, no SD", 0.515)
    if sd and nsd:
        hi_sd, hi_no = sum(sd["rf_hist"][5:]), sum(nsd["rf_hist"][5:])
        out.append(
            (
                hi_sd > hi_no,
                f"Fig. 6, run fractions >= 0.5 at load ~0.515: "
                f"{hi_sd:.2f} with selective disabling vs {hi_no:.2f} without; the paper: "
                "higher run fractions more probable with it",
            )
        )
        lv_sd, lv_no = sd["rf_by_size"], nsd["rf_by_size"]
        lo, hi = min(lv_sd, key=int), max(lv_sd, key=int)
        ok = lv_sd[lo] >= lv_no.get(lo, 0) and lv_sd[hi] >= lv_no.get(hi, 0)
        out.append(
            (
                ok,
                f"Fig. 7, run fraction of the smallest / largest gangs: "
                f"{lv_sd[lo]:.2f} / {lv_sd[hi]:.2f} with SD, {lv_no.get(lo, 0):.2f} / "
                f"{lv_no.get(hi, 0):.2f} without; the paper: both improve",
            )
        )
        ok = lv_sd[lo] > lv_sd[hi]
        out.append(
            (
                ok,
                f"Fig. 12, small gangs get a better run fraction than large ones "
                f"({lv_sd[lo]:.2f} vs {lv_sd[hi]:.2f}); the paper: always, because of SD",
            )
        )
    uu, wu = (
        score(points, "algorithms", "uniform/uniform"),
        score(points, "algorithms", "weight/uniform"),
    )
    uu_no = score(points, "algorithms", "uniform/uniform, no SD")
    out.append(
        (
            wu < uu,
            f"Fig. 9, division by weight between controllers: weight/uniform "
            f"{_fmt(wu)} vs uniform/uniform {_fmt(uu)}; the paper: weight is better",
        )
    )
    out.append(
        (
            uu_no - uu > uu - wu,
            f"Fig. 9, the gain from selective disabling "
            f"({_fmt(uu_no)} -> {_fmt(uu)}) vs from weight ({_fmt(uu)} -> {_fmt(wu)}); the "
            "paper: SD's gain about twice the other",
        )
    )
    ws = [
        score(points, "algorithms", a)
        for a in ("weight/uniform", "weight/weight", "weight/frustration")
    ]
    spread = (max(ws) - min(ws)) / min(ws) if all(math.isfinite(w) for w in ws) else math.inf
    out.append(
        (
            spread < 0.15,
            f"Fig. 9, division within a controller matters little: "
            f"weight/uniform, weight/weight, weight/frustration {', '.join(map(_fmt, ws))} "
            f"(spread {spread:.0%})",
        )
    )
    fair = {a: curve(points, "algorithms", a, "fairness") for a in ALGORITHMS}
    low = min(fair["uniform/uniform"]) if fair["uniform/uniform"] else None
    if low is not None:
        f_uu = fair["uniform/uniform"][low]
        others = min(fair[a][low] for a in ALGORITHMS if a != "uniform/uniform")
        out.append(
            (
                f_uu <= others,
                f"Fig. 11, max/min run fraction at load {low:g}: "
                f"uniform/uniform {f_uu:.2f} vs the best other {others:.2f}; the paper: "
                "uniform/uniform fairer at low loads",
            )
        )
    d = {x: score(points, "distributions", x) for x in ("uniform", "harmonic", "pow2")}
    out.append(
        (
            d["uniform"] >= d["harmonic"] >= d["pow2"],
            f"Fig. 19, mean median slowdown "
            f"uniform {_fmt(d['uniform'])}, harmonic {_fmt(d['harmonic'])}, powers of two "
            f"{_fmt(d['pow2'])}; the paper: uniform worst, powers of two best",
        )
    )
    for dist, b in meta["waste"]["bounds"].items():
        ok = (
            abs(b["table_total"] - b["paper_total"]) < 0.01
            and abs(b["packer_sd"] - b["paper_sd"]) < 0.01
        )
        out.append(
            (
                ok,
                f"§4.1 {dist}: total disabling {b['table_total']:.2%} (paper "
                f"{b['paper_total']:.2%}), selective disabling packed {b['packer_sd']:.2%} "
                f"(paper {b['paper_sd']:.2%})",
            )
        )
    fc = meta["waste"]["fcfs"]
    unit = [r["unit"] for r in fc]
    at32 = [r["exp5"] for r in fc if r["pes"] == 32]
    p2 = max((r for r in fc if r["dist"] == "pow2"), key=lambda r: r["pes"], default=None)
    out.append(
        (
            min(unit) >= 0.19 and max(unit) <= 0.26,
            f"Fig. 18, FCFS best fit, unit "
            f"times: {min(unit):.1%}-{max(unit):.1%}; the paper: 20-25 %",
        )
    )
    if at32:
        out.append(
            (
                min(at32) >= 0.30 and max(at32) <= 0.38,
                f"Fig. 18, exponential times "
                f"(mean 5) at 32 PEs: {min(at32):.1%}-{max(at32):.1%}; the paper: 31-37 %",
            )
        )
    if p2 and p2["pes"] >= 4096:
        out.append(
            (
                abs(p2["exp5"] - 0.49) < 0.03,
                f"Fig. 18, powers of two at {p2['pes']} PEs: {p2['exp5']:.1%}; "
                "the paper: 49 % at 4,096",
            )
        )
    return out


def markdown(points: Points, meta: dict[str, Any]) -> str:
    spec = meta["spec"]
    L = [f"# {spec['name']}: Feitelson & Rudolph's DHC study, reproduced in the simulator", ""]
    L += [
        f"{spec['pes']} PEs, {spec['gangs']} gangs per run (the first 10 % left out), "
        f"{spec['seeds']} seed(s), loads {spec['loads']}; {len(points)} runs in "
        f"{meta['seconds']} s. Fluid model of the appendix (testbed/sim/dhc.py); choices in "
        "docs/dhc.md. `sat.`: more than 400 gangs in the system, the run stopped.",
        "",
    ]
    L += ["## Findings beside the paper's", ""]
    for ok, line in findings(points, meta):
        L.append(f"* **{'reproduced' if ok else 'differs'}** — {line}")
    L += [
        "",
        "## Table 1: threads per PE by load balancing (harmonic, load ~0.645)",
        "",
        *table1_load_note(points),
        "| scheme | ours, any thread | ours, PE #1 | paper (any thread) |",
        "|---|---|---|---|",
    ]
    for b in ("root", "cube", "ring", "random", "none"):
        a, z = (
            at_load(points, "balancing-any", b, 0.645),
            at_load(points, "balancing-pe0", b, 0.645),
        )
        fa = f"{a['load_per_pe']:.2f}" if a else "–"
        fz = "sat." if z and z["saturated"] else f"{z['load_per_pe']:.2f}" if z else "–"
        L.append(f"| {b} | {fa} | {fz} | {PAPER_TABLE1[b]} |")
    for title, family, labels in (
        ("Figs. 2 and 3: median slowdown by load balancing (harmonic)", "balancing-any", BALANCING),
        ("Fig. 3 (requests from PE #1)", "balancing-pe0", BALANCING),
        (
            "Fig. 4: mapping, with and without selective disabling (uniform)",
            "mapping",
            ("balance, SD", "fragmentation, SD", "balance, no SD", "fragmentation, no SD"),
        ),
        (
            "Fig. 9: the four algorithms, with and without selective disabling (uniform)",
            "algorithms",
            [*ALGORITHMS, *(f"{a}, no SD" for a in ALGORITHMS)],
        ),
        ("Fig. 19: gang-size distributions", "distributions", ("uniform", "harmonic", "pow2")),
    ):
        loads = sorted({p["load"] for p in points if p["family"] == family})
        L += [
            "",
            f"## {title}",
            "",
            "| | " + " | ".join(f"{x:g}" for x in loads) + " |",
            "|---|" + "---|" * len(loads),
        ]
        for lab in labels:
            c = curve(points, family, lab)
            L.append(f"| {lab} | " + " | ".join(_fmt(c.get(x, math.nan)) for x in loads) + " |")
    L += ["", "## Fig. 11: fairness (mean max/min run fraction while >= 2 gangs run)", ""]
    loads = sorted({p["load"] for p in points if p["family"] == "algorithms"})
    L += ["| | " + " | ".join(f"{x:g}" for x in loads) + " |", "|---|" + "---|" * len(loads)]
    for alg in ALGORITHMS:
        c = curve(points, "algorithms", alg, "fairness")
        L.append(f"| {alg} | " + " | ".join(_fmt(c.get(x, math.nan)) for x in loads) + " |")
    w = meta["waste"]
    L += [
        "",
        "## §4.1: off-line waste under power-of-two partitioning",
        "",
        f"Size table of 200,000 gangs on {spec['waste_table_pes']} PEs.",
        "",
        "| sizes | total disabling: paper | ours (table) | selective: paper | ours (packer) |",
        "|---|---|---|---|---|",
    ]
    for dist, b in w["bounds"].items():
        L.append(
            f"| {dist} | {b['paper_total']:.2%} | {b['table_total']:.2%} | "
            f"{b['paper_sd']:.2%} | {b['packer_sd']:.2%} |"
        )
    L += [
        "",
        "## Fig. 18: on-line FCFS best fit (no power-of-two restriction)",
        "",
        "| sizes | PEs | unit times | exponential, mean 5 |",
        "|---|---|---|---|",
    ]
    for r in w["fcfs"]:
        L.append(f"| {r['dist']} | {r['pes']} | {r['unit']:.1%} | {r['exp5']:.1%} |")
    L += [
        "",
        "Plots: fig2-3.png, fig4.png, fig6-7.png, fig9.png, fig10-12.png, fig11.png, "
        "fig18.png, fig19.png.",
        "",
    ]
    return "\n".join(L)


def plots(points: Points, meta: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []

    def slowdown_panel(ax: Any, family: str, labels: Sequence[str], title: str) -> None:
        for lab in labels:
            c = {k: v for k, v in curve(points, family, lab).items() if math.isfinite(v)}
            if c:
                ax.plot(list(c), list(c.values()), marker="o", label=lab)
        ax.set_yscale("log")
        ax.set_xlabel("generated load")
        ax.set_ylabel("median slowdown")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    slowdown_panel(axs[0], "balancing-any", BALANCING, "Fig. 2: requests from any thread")
    slowdown_panel(axs[1], "balancing-pe0", BALANCING, "Fig. 3: requests from PE #1")
    save(fig, "fig2-3.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    slowdown_panel(
        ax,
        "mapping",
        ("balance, SD", "fragmentation, SD", "balance, no SD", "fragmentation, no SD"),
        "Fig. 4: mapping",
    )
    save(fig, "fig4.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    slowdown_panel(
        ax,
        "algorithms",
        [*ALGORITHMS, "uniform/uniform, no SD", "weight/uniform, no SD"],
        "Fig. 9: algorithms",
    )
    save(fig, "fig9.png")
    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for lab in ("weight/uniform", "weight/uniform, no SD"):
        p = at_load(points, "algorithms", lab, 0.515)
        if p:
            axs[0].plot([i / 10 + 0.05 for i in range(10)], p["rf_hist"], marker="o", label=lab)
            lv = sorted(p["rf_by_size"].items(), key=lambda kv: int(kv[0]))
            axs[1].plot([2 ** int(k) for k, _ in lv], [v for _, v in lv], marker="o", label=lab)
    axs[0].set_xlabel("run fraction")
    axs[0].set_ylabel("share of gangs")
    axs[0].set_title("Fig. 6: run fractions (load ~0.515)", fontsize=9)
    axs[1].set_xscale("log", base=2)
    axs[1].set_xlabel("gang block size")
    axs[1].set_ylabel("mean run fraction")
    axs[1].set_title("Fig. 7: run fraction by gang size", fontsize=9)
    for a in axs:
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    save(fig, "fig6-7.png")
    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for a in ALGORITHMS:
        p = at_load(points, "algorithms", a, 0.515)
        if p:
            axs[0].plot([i / 10 + 0.05 for i in range(10)], p["rf_hist"], marker="o", label=a)
            lv = sorted(p["rf_by_size"].items(), key=lambda kv: int(kv[0]))
            axs[1].plot([2 ** int(k) for k, _ in lv], [v for _, v in lv], marker="o", label=a)
    axs[0].set_title("Fig. 10: run fractions by algorithm (load ~0.515)", fontsize=9)
    axs[0].set_xlabel("run fraction")
    axs[1].set_title("Fig. 12: run fraction by gang size", fontsize=9)
    axs[1].set_xscale("log", base=2)
    axs[1].set_xlabel("gang block size")
    for a2 in axs:
        a2.legend(fontsize=7)
        a2.grid(alpha=0.3)
    save(fig, "fig10-12.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    for a in ALGORITHMS:
        c = {
            k: v for k, v in curve(points, "algorithms", a, "fairness").items() if math.isfinite(v)
        }
        ax.plot(list(c), list(c.values()), marker="o", label=a)
    ax.set_xlabel("generated load")
    ax.set_ylabel("mean max/min run fraction")
    ax.set_title("Fig. 11: fairness", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save(fig, "fig11.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    slowdown_panel(ax, "distributions", ("uniform", "harmonic", "pow2"), "Fig. 19")
    for dist, b in meta["waste"]["bounds"].items():
        ax.axvline(1 - b["paper_sd"], linestyle=":", color="grey")
        ax.text(1 - b["paper_sd"], ax.get_ylim()[1], dist, fontsize=7, rotation=90, va="top")
    save(fig, "fig19.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    for dist in ("uniform", "harmonic", "pow2"):
        rows = [r for r in meta["waste"]["fcfs"] if r["dist"] == dist]
        ax.plot(
            [r["pes"] for r in rows], [r["unit"] for r in rows], marker="o", label=f"{dist}, unit"
        )
        ax.plot(
            [r["pes"] for r in rows],
            [r["exp5"] for r in rows],
            marker="s",
            linestyle="--",
            label=f"{dist}, exp mean 5",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("processors")
    ax.set_ylabel("waste")
    ax.set_title("Fig. 18: on-line FCFS best fit", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save(fig, "fig18.png")
    return written


def write_report(points: Points, meta: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "report.md"
    md.write_text(markdown(points, meta))
    return [md, *plots(points, meta, out)]
