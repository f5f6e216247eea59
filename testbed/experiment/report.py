"""Report of the paired-vs-gang experiment: Markdown, PNGs, and the issue's targets.

The paper's figures set beside ours are those seed 000 §4.1.2 states in its
text (Fig. 7 itself is a chart): the single I/O job of mix 1 "will therefore
advance almost four times faster", and the best-fit slot usage it explains
mix by mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testbed.experiment.runner import ExperimentResult, RunResult

# seed 000 §4.1.2, best-fit matching: percent of quanta each slot was used for
# matching, slots 0..3 (compute-bound jobs take the lower slots).
PAPER_BEST_FIT: dict[int, tuple[float, float, float, float]] = {
    0: (0, 0, 0, 0),
    1: (8, 8, 8, 75),
    2: (25, 25, 0, 50),
    3: (75, 0, 0, 25),
    4: (0, 0, 25, 75),
}
PAPER_MIX1_IO_SPEEDUP = 4.0  # "almost four times faster"

TARGET_IO_SPEEDUP = 3.0
TARGET_COMPUTE_LOSS = 0.10
TARGET_SKEW_P99_S = 0.001


def _find(runs: Sequence[RunResult], config: str, mix: int) -> RunResult | None:
    return next((r for r in runs if r.config == config and r.mix == mix), None)


def _fmt(v: float | None, spec: str = "{:.2f}") -> str:
    return "–" if v is None else spec.format(v)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def targets(result: ExperimentResult, paired: str = "paired-fig4") -> list[tuple[str, bool | None]]:
    """The issue's targets, each with pass (True), miss (False) or not measured (None)."""
    runs = result.runs
    gang, pair = _find(runs, "gang", 1), _find(runs, paired, 1)
    out: list[tuple[str, bool | None]] = []
    io = _ratio(pair.rate("io"), gang.rate("io")) if gang and pair else None
    out.append(
        (
            f"mix 1: I/O job barriers/s under {paired} ≥ {TARGET_IO_SPEEDUP:g}× strict gang "
            f"(measured {_fmt(io)}×, paper ≈ {PAPER_MIX1_IO_SPEEDUP:g}×)",
            None if io is None else io >= TARGET_IO_SPEEDUP,
        )
    )
    comp = _ratio(pair.rate("compute"), gang.rate("compute")) if gang and pair else None
    out.append(
        (
            f"mix 1: compute jobs lose ≤ {TARGET_COMPUTE_LOSS:.0%} under {paired} "
            f"(measured {_fmt(None if comp is None else 1 - comp, '{:+.1%}')} loss)",
            None if comp is None else comp >= 1 - TARGET_COMPUTE_LOSS,
        )
    )
    skews = [r.skew_p99_s for r in runs if r.skew_p99_s is not None]
    worst = max(skews) if skews else None
    out.append(
        (
            f"quantum command skew p99 ≤ {TARGET_SKEW_P99_S * 1e3:g} ms on "
            f"{len(result.cluster.get('nodes', []))} nodes (worst run "
            f"{_fmt(None if worst is None else worst * 1e3, '{:.3f}')} ms)",
            None if worst is None else worst <= TARGET_SKEW_P99_S,
        )
    )
    return out


def markdown(result: ExperimentResult) -> str:
    runs = result.runs
    spec, cl = result.spec, result.cluster
    mixes = sorted({r.mix for r in runs})
    configs = list(dict.fromkeys(r.config for r in runs))
    lines = [
        f"# {spec['name']}: paired gang vs strict gang on real processes",
        "",
        f"Local cluster of {spec['nodes']} nodes ({', '.join(cl.get('nodes', []))}), link "
        f"`{spec['link']}`, delay mechanism **{cl.get('delay_mechanism')}**, CPU per node "
        f"{spec['cpus_per_node']} ({cl.get('cpu', {}).get('mechanism', 'unlimited')}), "
        f"cgroups {cl.get('cgroups', 'unknown')}; "
        f"quantum {spec['quantum']} s; each mix ran {spec['duration']} s.",
        f"Compute-bound jobs: G_comp {spec['compute']['gcomp']}, G_IO {spec['compute']['gio']}. "
        f"I/O-bound jobs: G_comp {spec['io']['gcomp']}, G_IO {spec['io']['gio']} × "
        f"{spec['io']['nbytes']} B, emulated device latency {spec['io']['device_latency']} s "
        "per file.",
        "",
        "## Barriers per second (seed 000 Fig. 7 top)",
        "",
        "| mix | job type | " + " | ".join(configs) + " | paired / gang |",
        "|---|---|" + "---|" * len(configs) + "---|",
    ]
    paired = "paired-fig4" if "paired-fig4" in configs else configs[-1]
    for mix in mixes:
        for kind in ("compute", "io"):
            if (kind == "compute" and mix == 4) or (kind == "io" and mix == 0):
                continue
            rates = [(_find(runs, c, mix) or _empty()).rate(kind) for c in configs]
            gang = (_find(runs, "gang", mix) or _empty()).rate(kind)
            pair = (_find(runs, paired, mix) or _empty()).rate(kind)
            ratio = _ratio(pair, gang)
            lines.append(
                f"| {mix} | {kind} | "
                + " | ".join(_fmt(r) for r in rates)
                + f" | {_fmt(ratio, '{:.2f}×')} |"
            )
    lines += ["", "## Slots used for matching, % of quanta (seed 000 Fig. 7 bottom)", ""]
    for config in [c for c in configs if c != "gang"]:
        lines += [
            f"**{config}**"
            + (" — paper (best fit) in brackets" if config == "paired-best-fit" else ""),
            "",
            "| mix | slot 0 | slot 1 | slot 2 | slot 3 | matched quanta |",
            "|---|---|---|---|---|---|",
        ]
        for mix in mixes:
            run = _find(runs, config, mix)
            if run is None:
                continue
            cells = []
            for s in range(4):
                ours = run.slot_partner_ratio.get(s, 0.0) * 100
                cell = f"{ours:.0f}"
                if config == "paired-best-fit":
                    cell += f" [{PAPER_BEST_FIT[mix][s]:g}]"
                cells.append(cell)
            lines.append(
                f"| {mix} | "
                + " | ".join(cells)
                + f" | {_fmt(run.matching_success_ratio, '{:.0%}')} |"
            )
        lines.append("")
    lines += [
        "## Quantum command skew",
        "",
        "| config | mix | quanta | p50 ms | p99 ms |",
        "|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.config} | {r.mix} | {r.quanta} | "
            f"{_fmt(None if r.skew_p50_s is None else r.skew_p50_s * 1e3, '{:.3f}')} | "
            f"{_fmt(None if r.skew_p99_s is None else r.skew_p99_s * 1e3, '{:.3f}')} |"
        )
    lines += ["", "## Targets", ""]
    for text, ok in targets(result, paired):
        mark = {True: "met", False: "**missed**", None: "not measured"}[ok]
        lines.append(f"* {text}: {mark}")
    lines += ["", "![Fig. 7 top](fig7_top.png)", "", "![Fig. 7 bottom](fig7_bottom.png)", ""]
    return "\n".join(lines)


def _empty() -> RunResult:
    return RunResult(
        config="",
        mix=-1,
        jobs=[],
        quanta=0,
        skew_p50_s=None,
        skew_p99_s=None,
        matching_success_ratio=None,
    )


def text_summary(result: ExperimentResult) -> str:
    """What the terminal shows: Fig. 7 top as a table, then the targets."""
    runs = result.runs
    mixes = sorted({r.mix for r in runs})
    configs = list(dict.fromkeys(r.config for r in runs))
    head = f"{'mix':>3}  {'type':<7}" + "".join(f"{c:>17}" for c in configs)
    out = ["barriers per second (seed 000 Fig. 7 top)", head, "-" * len(head)]
    for mix in mixes:
        for kind in ("compute", "io"):
            if (kind == "compute" and mix == 4) or (kind == "io" and mix == 0):
                continue
            cells = "".join(
                f"{_fmt((_find(runs, c, mix) or _empty()).rate(kind)):>17}" for c in configs
            )
            out.append(f"{mix:>3}  {kind:<7}{cells}")
    out.append("")
    for config in [c for c in configs if c != "gang"]:
        out.append(f"slots used for matching, % of quanta ({config}; seed 000 Fig. 7 bottom)")
        for mix in mixes:
            run = _find(runs, config, mix)
            if run:
                cells = " ".join(
                    f"{run.slot_partner_ratio.get(s, 0.0) * 100:5.0f}" for s in range(4)
                )
                out.append(f"  mix {mix}: {cells}")
    out.append("")
    paired = "paired-fig4" if "paired-fig4" in configs else configs[-1]
    for text, ok in targets(result, paired):
        mark = {True: "met", False: "MISSED", None: "not measured"}[ok]
        out.append(f"target: {text}: {mark}")
    return "\n".join(out)


def plots(result: ExperimentResult, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result.runs
    mixes = sorted({r.mix for r in runs})
    configs = list(dict.fromkeys(r.config for r in runs))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    series = [(c, k) for k in ("compute", "io") for c in configs]
    width = 0.8 / len(series)
    for n, (config, kind) in enumerate(series):
        xs, ys = [], []
        for m in mixes:
            run = _find(runs, config, m)
            rate = run.rate(kind) if run else None
            if rate is not None:
                xs.append(m - 0.4 + (n + 0.5) * width)
                ys.append(rate)
        ax.bar(xs, ys, width, label=f"{kind}, {config}", hatch="//" if kind == "io" else None)
    ax.set_xticks(mixes, [f"mix {m}\n{m} I/O + {4 - m} comp" for m in mixes])
    ax.set_ylabel("barriers per second")
    ax.set_title("Fig. 7 top: progress of compute- and I/O-bound jobs")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig7_top.png", dpi=110)
    plt.close(fig)

    paired = [c for c in configs if c != "gang"]
    if not paired:
        return
    fig, axes = plt.subplots(1, len(paired), figsize=(5.5 * len(paired), 4.2), squeeze=False)
    for ax, config in zip(axes[0], paired, strict=True):
        for s in range(4):
            xs, ys = [], []
            for m in mixes:
                run = _find(runs, config, m)
                if run:
                    xs.append(m - 0.4 + (s + 0.5) * 0.2)
                    ys.append(run.slot_partner_ratio.get(s, 0.0) * 100)
            ax.bar(xs, ys, 0.2, label=f"slot {s}")
        if config == "paired-best-fit":
            for m in mixes:
                for s in range(4):
                    ax.plot(m - 0.4 + (s + 0.5) * 0.2, PAPER_BEST_FIT[m][s], "k_", ms=10)
        ax.set_xticks(mixes, [f"mix {m}" for m in mixes])
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of quanta used for matching")
        ax.set_title(config + (" (— = paper)" if config == "paired-best-fit" else ""))
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Fig. 7 bottom: slots used for matching")
    fig.tight_layout()
    fig.savefig(out / "fig7_bottom.png", dpi=110)
    plt.close(fig)
