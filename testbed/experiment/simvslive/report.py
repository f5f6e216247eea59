"""The simulator-vs-live report (simvslive/study.py): tables, verdict, plots.

Definitions (the same for both sides, so only the schedules differ):

* response = end - submit; live from the controller's records, simulated
  from the engine's times; submit is the time the controller recorded.
* slowdown = response / dedicated time, where the dedicated time is what the
  job took alone here (simvslive/study.py, "Dedicated time") -- the simulator's run
  time. Wiseman & Feitelson 2003 §4.2 divides by the kernel-measured execution time; a
  simulated job has no kernel, so both sides use the dedicated time.
* Means are over the jobs that ended in both (a job killed at the live drain
  timeout has no response; the tables count them).
* jobs in system: time-weighted mean of the number submitted and not ended,
  from the first submission to the last end (per-job times, both sides);
  rows: time-weighted mean of the matrix rows holding a job (live: the
  controller's matrix polled every ``poll_s``; simulated: every quantum).
* difference = simulated / live - 1. The target (issue 11, item 5): the mean
  response within 20 % for both policies, at every load run, judged on the
  spec's first ``[[sim]]`` variant.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testbed.experiment import plots as plotting
from testbed.experiment.simvslive.study import LiveRun, SimRun, ValidationResult

TOLERANCE = 0.20


@dataclass(frozen=True)
class Figures:
    jobs: int  # compared (ended on both sides)
    mean_response: float
    mean_slowdown: float
    median_slowdown: float
    mean_in_system: float
    mean_rows: float | None
    matching: float | None
    makespan: float


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan


def in_system(intervals: Sequence[tuple[float, float]]) -> float:
    """Time-weighted mean number of open ``(submit, end)`` intervals, first submit to last end."""
    if not intervals:
        return math.nan
    t0 = min(a for a, _ in intervals)
    t1 = max(b for _, b in intervals)
    if t1 <= t0:
        return float(len(intervals))
    return math.fsum(b - a for a, b in intervals) / (t1 - t0)


def step_mean(samples: Sequence[tuple[float, float]], end: float) -> float | None:
    """Time-weighted mean of a step function sampled at ``(t, value)``, up to ``end``."""
    pts = sorted((t, v) for t, v in samples if t <= end)
    if not pts:
        return None
    area = 0.0
    for (t, v), (t_next, _) in zip(pts, [*pts[1:], (end, 0.0)], strict=True):
        area += v * max(0.0, t_next - t)
    span = end - pts[0][0]
    return area / span if span > 0 else float(pts[0][1])


def paired_times(live: LiveRun, sim: SimRun) -> list[tuple[int, float, float, float, float]]:
    """``(index, dedicated, submit, live end, sim end)`` of the jobs that ended on both sides;
    the dedicated time is the simulated run time (measured around the run)."""
    simulated = {j.index: j for j in sim.jobs}
    out = []
    for j in live.jobs:
        s = simulated.get(j.index)
        if j.response_s is None or s is None or s.end_s is None:
            continue
        assert j.submit_s is not None and j.end_s is not None
        out.append((j.index, s.runtime, j.submit_s, j.end_s, s.end_s))
    return out


def figures(live: LiveRun, sim: SimRun, side: str) -> Figures:
    """``side`` = "live" or "sim": the figures of that side over the common jobs."""
    rows = paired_times(live, sim)
    ends = [(r[2], r[3] if side == "live" else r[4]) for r in rows]
    resp = [e - s for s, e in ends]
    slow = [x / r[1] for x, r in zip(resp, rows, strict=True)]
    last = max((e for _, e in ends), default=0.0)
    first = min((s for s, _ in ends), default=0.0)
    if side == "live":
        row_series = [(t, float(n)) for t, n, _ in live.rows]
        match = live.matching_success_ratio
    else:
        row_series = [(t, float(n)) for t, n in sim.rows]
        match = sim.matching_success_rate
    return Figures(
        jobs=len(rows),
        mean_response=_mean(resp),
        mean_slowdown=_mean(slow),
        median_slowdown=statistics.median(slow) if slow else math.nan,
        mean_in_system=in_system(ends),
        mean_rows=step_mean(row_series, last),
        matching=match,
        makespan=last - first,
    )


@dataclass(frozen=True)
class Comparison:
    policy: str
    load: float
    variant: str
    live: Figures
    sim: Figures
    median_job_ratio: float  # median over jobs of sim response / live response
    within: float  # share of jobs whose simulated response is within TOLERANCE of live

    @property
    def d_response(self) -> float:
        return self.sim.mean_response / self.live.mean_response - 1.0

    @property
    def d_slowdown(self) -> float:
        return self.sim.mean_slowdown / self.live.mean_slowdown - 1.0

    @property
    def met(self) -> bool:
        return abs(self.d_response) <= TOLERANCE


def compare(result: ValidationResult, variant: str | None = None) -> list[Comparison]:
    """Live vs simulated per (policy, load) for one ``[[sim]]`` variant (default: the first)."""
    if variant is None:
        variant = variants(result)[0] if result.sim else ""
    out = []
    for sim in result.sim:
        if sim.variant != variant:
            continue
        live = result.live_run(sim.policy, sim.load)
        if live is None:
            continue
        rows = paired_times(live, sim)
        ratios = [(r[4] - r[2]) / (r[3] - r[2]) for r in rows if r[3] > r[2]]
        out.append(
            Comparison(
                policy=sim.policy,
                load=sim.load,
                variant=variant,
                live=figures(live, sim, "live"),
                sim=figures(live, sim, "sim"),
                median_job_ratio=statistics.median(ratios) if ratios else math.nan,
                within=(
                    sum(abs(x - 1.0) <= TOLERANCE for x in ratios) / len(ratios)
                    if ratios
                    else math.nan
                ),
            )
        )
    return sorted(out, key=lambda c: (c.load, c.policy))


def variants(result: ValidationResult) -> list[str]:
    return list(dict.fromkeys(s.variant for s in result.sim))


def verdict(comparisons: Sequence[Comparison]) -> bool | None:
    """Target met for every policy at every load (None: nothing to judge)."""
    if not comparisons:
        return None
    return all(c.met for c in comparisons)


def verdict_lines(result: ValidationResult) -> list[str]:
    comps = compare(result)
    out = []
    for c in comps:
        out.append(
            f"{c.policy:<12} load {c.load:g}: mean response live {c.live.mean_response:.2f} s, "
            f"simulated {c.sim.mean_response:.2f} s ({c.d_response:+.1%}); slowdown "
            f"{c.live.mean_slowdown:.2f} vs {c.sim.mean_slowdown:.2f} ({c.d_slowdown:+.1%})"
        )
    v = verdict(comps)
    if v is not None:
        out.append(
            f"target (mean response within {TOLERANCE:.0%} for both policies): "
            + ("met" if v else "MISSED")
        )
    return out


def effective_load(live: LiveRun, sim: SimRun, nodes: int) -> float:
    """Offered load with the run's own dedicated times and recorded submits (load.py's form)."""
    size = {j.index: j.size for j in live.jobs}
    subs = [j.submit_s for j in sim.jobs]
    span = max(subs) - min(subs) if len(subs) > 1 else 0.0
    work = math.fsum(j.runtime * size[j.index] for j in sim.jobs)
    return work / (nodes * span) if span > 0 else math.nan


def cpu_per_iteration_ratio(result: ValidationResult, live: LiveRun) -> float | None:
    """Mean over jobs of rank 0's CPU per iteration live ÷ alone (the measurements around the
    run). About 1 when nothing disturbs a job; above 1 by what sharing a node costs."""
    rates = result.run_rates(live)
    alone: dict[int, float] = {}
    for size, r in rates.items():
        per = [s["cpu0_per_iteration"] for s in r.samples if s.get("cpu0_per_iteration")]
        if per:
            alone[size] = math.fsum(per) / len(per)
    ratios = [
        (j.loop_cpu_s / j.barriers) / alone[j.size]
        for j in live.jobs
        if j.loop_cpu_s and j.barriers and j.size in alone
    ]
    return math.fsum(ratios) / len(ratios) if ratios else None


def _sample_mean(samples: Sequence[dict[str, float]], key: str) -> float | None:
    vals = [s[key] for s in samples if key in s]
    return math.fsum(vals) / len(vals) if vals else None


@dataclass(frozen=True)
class Phases:
    """Mean over a run's jobs of where its execution went (live), beside the same jobs'
    dedicated split (overhead, loop): what gang scheduling stretched and what it did not."""

    before: float | None  # controller start -> rank 0's loop start
    loop: float | None  # rank 0's loop (frozen quanta included)
    after: float | None  # loop end -> controller end
    dedicated_overhead: float
    dedicated_loop: float


def phases(result: ValidationResult, live: LiveRun) -> Phases:
    rates = result.run_rates(live)
    before, loop, after = [], [], []
    for j in live.jobs:
        if j.start_s is None or j.end_s is None or j.report_s is None or j.loop_s is None:
            continue
        before.append(j.report_s - j.loop_s - j.start_s)
        loop.append(j.loop_s)
        after.append(j.end_s - j.report_s)
    jobs = [j for j in live.jobs if j.size in rates]
    return Phases(
        before=_mean(before) if before else None,
        loop=_mean(loop) if loop else None,
        after=_mean(after) if after else None,
        dedicated_overhead=_mean([rates[j.size].overhead_s for j in jobs]),
        dedicated_loop=_mean([j.iterations / rates[j.size].rate for j in jobs]),
    )


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:+.1%}"


def markdown(result: ValidationResult) -> str:
    meta = result.meta
    spec = meta.get("spec", {})
    quick = bool(meta.get("quick"))
    lines = [
        f"# {spec.get('name', 'sim-vs-live')}: simulator vs live cluster "
        "(Wiseman & Feitelson 2003 §4.2 scaled down)" + (" — --quick" if quick else ""),
        "",
    ]
    lines += _setup(result)
    comps = compare(result)
    first = comps[0].variant if comps else "—"
    lines += [
        "",
        f"## Mean response and slowdown, live vs simulated (`{first}`)",
        "",
        "| policy | load | jobs | live response (s) | simulated (s) | difference | "
        "live slowdown | simulated | difference | within 20 % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comps:
        lines.append(
            f"| {c.policy} | {c.load:g} | {c.live.jobs} | {c.live.mean_response:.2f} | "
            f"{c.sim.mean_response:.2f} | {_pct(c.d_response)} | {c.live.mean_slowdown:.2f} | "
            f"{c.sim.mean_slowdown:.2f} | {_pct(c.d_slowdown)} | {'yes' if c.met else '**no**'} |"
        )
    v = verdict(comps)
    lines += [
        "",
        "**Target** (issue 11): live vs simulated mean response within 20 % for both "
        "policies — " + ("not judged" if v is None else ("**met**" if v else "**missed**")) + ".",
    ]
    others = variants(result)[1:]
    if others:
        lines += [
            "",
            "## Other simulations of the same runs",
            "",
            "| variant | policy | load | simulated response (s) | difference | "
            "simulated slowdown | difference |",
            "|---|---|---|---|---|---|---|",
        ]
        for name in others:
            for c in compare(result, name):
                lines.append(
                    f"| {name} | {c.policy} | {c.load:g} | {c.sim.mean_response:.2f} | "
                    f"{_pct(c.d_response)} | {c.sim.mean_slowdown:.2f} | {_pct(c.d_slowdown)} |"
                )
    if result.sensitivity:
        factors = list(result.sensitivity[0]["factors"])
        lines += [
            "",
            "## The simulated response against the dedicated rate",
            "",
            f"Each live run simulated again (`{first}`) with every size's dedicated rate times "
            "a factor, and with the first rate measurement (before any run) instead of the "
            "ones around the run: how much of a difference the rate's drift can make.",
            "",
            "| policy | load | live (s) | "
            + " | ".join(f"rate ×{float(f):g}" for f in factors)
            + " | first measurement | difference |",
            "|---|---|---|" + "---|" * len(factors) + "---|---|",
        ]
        for s in result.sensitivity:
            lines.append(
                f"| {s['policy']} | {s['load']:g} | {s['live']:.2f} | "
                + " | ".join(f"{s['factors'][f]:.2f}" for f in factors)
                + f" | {s['first']:.2f} | {_pct(s['first'] / s['live'] - 1)} |"
            )
    lines += [
        "",
        "## What the schedules looked like",
        "",
        "Live / simulated. Jobs in system and rows are time-weighted means; matched = "
        "quanta run with a partner row ÷ quanta (paired gang); per job = median of simulated "
        "÷ live response, and the share of jobs within 20 %.",
        "",
        "| policy | load | jobs in system | matrix rows | matched | makespan (s) | "
        "per job | within 20 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in comps:
        lines.append(
            f"| {c.policy} | {c.load:g} | {c.live.mean_in_system:.2f} / "
            f"{c.sim.mean_in_system:.2f} | {_f(c.live.mean_rows)} / {_f(c.sim.mean_rows)} | "
            f"{_f(c.live.matching, '{:.0%}')} / {_f(c.sim.matching, '{:.0%}')} | "
            f"{c.live.makespan:.0f} / {c.sim.makespan:.0f} | {_f(c.median_job_ratio)} | "
            f"{_f(c.within, '{:.0%}')} |"
        )
    nodes = int(result.meta.get("spec", {}).get("nodes") or 1)
    lines += [
        "",
        "Each live run: the offered load with its own dedicated times and recorded submits; "
        "rank 0's CPU per iteration live ÷ alone (above 1: an iteration cost more CPU than "
        "alone, what sharing a node or switching costs); where the jobs' execution went "
        "(controller start to rank 0's loop start, the loop, loop end to the controller's "
        "end) beside the same jobs' dedicated overhead and loop; the controller's command "
        "skew; the CPU the host spent outside the experiment; jobs killed at the drain "
        "timeout.",
        "",
        "| policy | load | effective load | CPU per iteration | live: before / loop / after "
        "(mean s) | alone: overhead / loop | skew p99 (ms) | host busy outside | killed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sims = {(s.policy, s.load): s for s in result.sim if comps and s.variant == comps[0].variant}
    for c in comps:
        live = result.live_run(c.policy, c.load)
        sim = sims.get((c.policy, c.load))
        assert live is not None and sim is not None
        skew = live.status.get("skew_p99_s")
        ph = phases(result, live)
        lines.append(
            f"| {c.policy} | {c.load:g} | {effective_load(live, sim, nodes):.3f} | "
            f"{_f(cpu_per_iteration_ratio(result, live), '{:.3f}')} | {_f(ph.before)} / "
            f"{_f(ph.loop)} / {_f(ph.after)} | {ph.dedicated_overhead:.2f} / "
            f"{ph.dedicated_loop:.2f} | "
            f"{_f(skew * 1e3 if isinstance(skew, float) else None)} | "
            f"{_f(live.other_cores)} cores | {live.killed} |"
        )
    lines += [
        "",
        "![mean response and slowdown](summary.png)",
        "",
        "![per job](scatter.png)",
        "",
        "![jobs in system and rows over time](series.png)",
        "",
        "Definitions: testbed/experiment/simvslive/report.py; the analysis is in "
        'docs/experiments.md, "Simulator vs live".',
        "",
    ]
    return "\n".join(lines)


def _setup(result: ValidationResult) -> list[str]:
    meta = result.meta
    spec = meta.get("spec", {})
    stream = result.stream
    sizes: dict[int, int] = {}
    for e in stream:
        sizes[e.size] = sizes.get(e.size, 0) + 1
    dedicated = [j.dedicated_s for j in result.live[0].jobs] if result.live else []
    commit = meta.get("commit") or meta.get("host", {}).get("commit")  # older runs: host
    out = [
        f"{spec.get('nodes')} nodes ({spec.get('cpu_mechanism')}, {spec.get('cpus_per_node')} "
        f"CPU each, link {spec.get('link')}), quantum {spec.get('quantum')} s. "
        f"Run {meta.get('started', '?')} – {meta.get('finished', '?')} at "
        + (f"commit {commit[:10]}" if commit else "the commit results.json records")
        + f"; simulated {meta.get('simulated', '?')}.",
        "",
        f"**Stream**: {len(stream)} Lublin jobs (seed {spec.get('seed')}, generated for "
        f"{spec.get('paper_nodes')} nodes), sizes "
        + ", ".join(f"{n} × {s}" for s, n in sorted(sizes.items()))
        + f"; run times c·t^{spec.get('runtime_power')} with mean {spec.get('mean_runtime')} s, "
        f"{sum(e.clipped for e in stream)} clipped to [{spec.get('min_runtime')}, "
        f"{spec.get('max_runtime')}] s.",
    ]
    if dedicated:
        out[-1] += (
            f" Dedicated times here: mean {_mean(dedicated):.2f} s, median "
            f"{statistics.median(dedicated):.2f} s, {min(dedicated):.2f}–{max(dedicated):.2f} s."
        )
    rates = result.rates
    if rates is not None:
        out += [
            "",
            f"**Job**: G_comp {rates.gcomp} iterations of the compute loop, one "
            f"{spec.get('nbytes')}-byte file and {spec.get('device_wait_ms')} ms of blocking "
            f"wait, barrier (wait {spec.get('wait')}) per iteration. G_comp started at "
            f"{spec.get('compute_ms')} ms by `--loop-cost` ({rates.ns_per_iteration:.1f} ns "
            "per iteration) and was rescaled toward a CPU share of "
            f"{spec.get('target_cpu')} for the widest job alone: "
            + (
                ", ".join(f"{t['gcomp']:.0f} → {t['share']:.3f}" for t in rates.tuning)
                or "not tuned"
            )
            + ". Alone here, measured before the first run "
            "(it sets every job's iterations) and again after every run (each run is "
            "simulated with the mean of the measurements before and after it):",
            "",
            "| measured | size | iterations/s | overhead (s) | before / after loop (s) | "
            "CPU share | repeats | host busy outside |",
            "|---|---|---|---|---|---|---|---|",
        ]
        brackets = [("first", rates)] + [
            (f"after {r.policy} {r.load:g}", r.rates_after) for r in result.live if r.rates_after
        ]
        for label, rr in brackets:
            for s in sorted(rr.sizes.values(), key=lambda r: r.size):
                pre = _sample_mean(s.samples, "pre_s")
                post = _sample_mean(s.samples, "post_s")
                out.append(
                    f"| {label} | {s.size} | {s.rate:.1f} | {s.overhead_s:.3f} | "
                    f"{_f(pre, '{:.3f}')} / {_f(post, '{:.3f}')} | {s.cpu_share:.3f} | "
                    f"{len(s.samples)} | {_f(rr.other_cores)} cores |"
                )
    if result.sim:
        out += ["", "**Simulations** (exact mode, same quantum and policy defaults):", ""]
        seen = set()
        for sim in result.sim:
            if sim.variant in seen:
                continue
            seen.add(sim.variant)
            cpu = ", ".join(f"size {k}: {v:.3f}" for k, v in sorted(sim.cpu.items()))
            out.append(
                f"* `{sim.variant}`: model from `{sim.calibration}` (interference "
                f"{sim.interference:.3f}, context switch {sim.context_switch * 1000:.1f} ms); "
                f"CPU share {cpu}"
            )
    return out


def plots(result: ValidationResult, out: Path) -> list[Path]:
    plt = plotting.pyplot()

    comps = compare(result)
    written: list[Path] = []
    if not comps:
        return written
    labels = [f"{c.policy}\n{c.load:g}" for c in comps]
    x = list(range(len(comps)))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, what, name in (
        (axes[0], "mean_response", "mean response time (s)"),
        (axes[1], "mean_slowdown", "mean slowdown"),
    ):
        ax.bar([i - 0.2 for i in x], [getattr(c.live, what) for c in comps], 0.4, label="live")
        ax.bar([i + 0.2 for i in x], [getattr(c.sim, what) for c in comps], 0.4,
               label=f"simulated ({comps[0].variant})")  # fmt: skip
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    fig.suptitle("Live vs simulated (policy, load)")
    fig.tight_layout()
    path = out / "summary.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    sims = {(s.policy, s.load): s for s in result.sim if s.variant == comps[0].variant}
    fig, axes = plt.subplots(1, len(comps), figsize=(4 * len(comps), 4), squeeze=False)
    for ax, c in zip(axes[0], comps, strict=True):
        live = result.live_run(c.policy, c.load)
        sim = sims[(c.policy, c.load)]
        assert live is not None
        rows = paired_times(live, sim)
        lx = [r[3] - r[2] for r in rows]
        sy = [r[4] - r[2] for r in rows]
        ax.scatter(lx, sy, s=10, alpha=0.7)
        lo = min([*lx, *sy, 0.1])
        hi = max([*lx, *sy, 1.0])
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
        for k in (1 - 0.2, 1 + 0.2):
            ax.plot([lo, hi], [lo * k, hi * k], color="grey", linewidth=0.5, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{c.policy}, load {c.load:g}", fontsize=9)
        ax.set_xlabel("live response (s)", fontsize=8)
        ax.set_ylabel("simulated response (s)", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Per job: simulated vs live response (dotted: ±20 %)")
    fig.tight_layout()
    path = out / "scatter.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, axes = plt.subplots(2, len(comps), figsize=(4 * len(comps), 6), squeeze=False)
    for k, c in enumerate(comps):
        live = result.live_run(c.policy, c.load)
        sim = sims[(c.policy, c.load)]
        assert live is not None
        rows = paired_times(live, sim)
        for side, idx in (("live", 3), ("simulated", 4)):
            t, n = _counts([(r[2], r[idx]) for r in rows])
            axes[0][k].step(t, n, where="post", label=side)
        axes[0][k].set_title(f"{c.policy}, load {c.load:g}", fontsize=9)
        axes[0][k].set_ylabel("jobs in system", fontsize=8)
        axes[1][k].step([p[0] for p in live.rows], [p[1] for p in live.rows], where="post",
                        label="live (polled)")  # fmt: skip
        axes[1][k].step([p[0] for p in sim.rows], [p[1] for p in sim.rows], where="post",
                        label="simulated")  # fmt: skip
        axes[1][k].set_ylabel("matrix rows", fontsize=8)
        axes[1][k].set_xlabel("time (s)", fontsize=8)
        for ax in (axes[0][k], axes[1][k]):
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    axes[1][0].legend(fontsize=7)
    fig.suptitle("Jobs in system and matrix rows over time, live vs simulated")
    fig.tight_layout()
    path = out / "series.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written


def _counts(intervals: Sequence[tuple[float, float]]) -> tuple[list[float], list[int]]:
    """Step series of the number of open intervals."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    t: list[float] = []
    n: list[int] = []
    cur = 0
    for when, d in events:
        cur += d
        t.append(when)
        n.append(cur)
    return t, n
