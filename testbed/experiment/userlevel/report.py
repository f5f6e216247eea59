"""The report of the user-level communication study (run.py): per waiting action the
utilization the agents measured for the communication-bound job, what model.py predicts
from its message waits, paired gang's matching rate beside each partner, the jobs'
barrier and message rates against strict gang; where pairing stops along spin-block's
spin time, measured and predicted, beside Yu & Byun 2011's 150 µs; a verdict on
Wiseman & Feitelson 2003 §5 with the repeat-to-repeat spread (claims.judge)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from testbed.experiment import plots as plotting
from testbed.experiment.claims import Difference, judge
from testbed.experiment.userlevel.model import (
    RankWaits,
    parse_action,
    predicted_crossing_us,
    predicted_utilization,
    threshold,
)

YU_BYUN_SPIN_US = 150.0  # Yu & Byun 2011's spin-block spin time (apps/mp/wait.py)

Run = Mapping[str, Any]


# ---------------------------------------------------------------- what the runs give


def runs_of(data: Mapping[str, Any], policy: str, action: str, partner: str | None) -> list[Run]:
    """The runs of one configuration, in repeat order."""
    key = (policy, action, partner)
    out = [r for r in data["runs"] if (r["policy"], r["action"], r["partner"]) == key]
    return sorted(out, key=lambda r: r["repeat"])


def mean_u(run: Run, job: str) -> float | None:
    """A job's mean utilization over the traced quanta in which the agents measured it."""
    u = (run["jobs"].get(job) or {}).get("quanta_utilization") or []
    return statistics.fmean(u) if u else None


def matched(run: Run) -> float | None:
    """Share of the traced quanta, while both jobs were in their loops, that ran a pair
    (paired gang only); the controller's paired ÷ planned quanta over the whole run
    without a trace."""
    if run["policy"] == "gang":
        return None
    if run.get("traced_quanta"):
        return float(run["traced_paired"]) / float(run["traced_quanta"])
    return run.get("matching_rate")


def rate(run: Run, job: str) -> float | None:
    v = (run["jobs"].get(job) or {}).get("barriers_per_second")
    return float(v) if v else None


def messages_per_s(run: Run) -> float | None:
    """The comm job's messages received per second, rank 0."""
    ranks = (run["jobs"].get("comm") or {}).get("ranks") or []
    if not ranks or not ranks[0].get("seconds"):
        return None
    return float(ranks[0]["messages_received"] or 0) / float(ranks[0]["seconds"])


def rank_waits(run: Run) -> list[RankWaits]:
    """Each rank's C, λ and W's percentiles from a run of the comm job (model.RankWaits)."""
    out = []
    for r in (run["jobs"].get("comm") or {}).get("ranks") or []:
        if r.get("seconds") and r.get("md_quantiles_us"):
            out.append(RankWaits(float(r["cpu_ratio"]), float(r["md_count"]) / float(r["seconds"]),
                                 tuple(float(q) for q in r["md_quantiles_us"])))  # fmt: skip
    return out


def run_share(run: Run) -> float | None:
    """Share of the traced quanta in which the comm job ran (the agents measure a job only
    in the quanta it was runnable): 1 alone, 1/2 under strict gang beside a partner."""
    n = len((run["jobs"].get("comm") or {}).get("quanta_utilization") or [])
    return min(1.0, n / run["traced_quanta"]) if run.get("traced_quanta") and n else None


def own_prediction(data: Mapping[str, Any], run: Run) -> float | None:
    """u(s) from the run's own W and λ (each rank's receives per second *of its running
    time*: per wall second over its run share), C from the repeat's alone, blocking run:
    the model with the waits the action really met, not block's. None for spin, whose u
    is 1 by construction on a core of its own (every moment computes or spins), and whose
    E[W] the waits that span a freeze (the job's descheduled quanta) would swell."""
    base = alone_block(data, int(run["repeat"]))
    share = run_share(run)
    s = parse_action(run["action"]).spin_time_us
    if base is None or not share or math.isinf(s):
        return None
    cs = [r.cpu_ratio for r in rank_waits(base)]
    own = [replace(w, receives_per_s=w.receives_per_s / share) for w in rank_waits(run)]
    if not cs or len(own) != len(cs):
        return None
    return statistics.fmean(w.utilization(s, base=c) for w, c in zip(own, cs, strict=True))


def runq_share(run: Run) -> float | None:
    """The comm job's ranks' time waiting for a CPU, as a share of their run (mean)."""
    vals = [float(r["runq_seconds"]) / float(r["seconds"])
            for r in (run["jobs"].get("comm") or {}).get("ranks") or []
            if r.get("runq_seconds") is not None and r.get("seconds")]  # fmt: skip
    return statistics.fmean(vals) if vals else None


def w_percentile(run: Run, p: int) -> float | None:
    """W's p-th percentile (µs), the ranks' mean."""
    vals = [r["md_quantiles_us"][p] for r in (run["jobs"].get("comm") or {}).get("ranks") or []
            if len(r.get("md_quantiles_us") or []) > p]  # fmt: skip
    return statistics.fmean(vals) if vals else None


def actions(data: Mapping[str, Any], partner: str) -> list[str]:
    return list(data["spec"]["partners"].get(partner, []))


def partner_u(data: Mapping[str, Any], partner: str, repeat: int) -> float | None:
    """The partner's measured utilization: strict gang (it runs alone in its turns), block;
    else its paired block run."""
    for policy in ("gang", "paired-gang"):
        for r in runs_of(data, policy, "block", partner):
            if r["repeat"] == repeat and mean_u(r, partner) is not None:
                return mean_u(r, partner)
    return None


def repeats(data: Mapping[str, Any]) -> list[int]:
    return sorted({int(r["repeat"]) for r in data["runs"]})


def alone_block(data: Mapping[str, Any], repeat: int) -> Run | None:
    for r in runs_of(data, "gang", "block", None):
        if r["repeat"] == repeat:
            return r
    return None


def prediction(data: Mapping[str, Any], repeat: int, action: str) -> float | None:
    """u(s) from the repeat's alone, blocking run (model.py)."""
    run = alone_block(data, repeat)
    if run is None:
        return None
    ranks = rank_waits(run)
    if not ranks:
        return None
    return predicted_utilization(ranks, parse_action(action).spin_time_us)


def crossing_predicted(data: Mapping[str, Any], partner: str, repeat: int) -> float | str | None:
    """The predicted spin time (µs) at which pairing stops beside ``partner``; "never" when
    even blocking reads above the threshold; None without the data."""
    run = alone_block(data, repeat)
    y = partner_u(data, partner, repeat)
    if run is None or y is None:
        return None
    limit = threshold(y, float(data["spec"]["margin"]))
    s = predicted_crossing_us(rank_waits(run), limit)
    return "never" if s is None else s


def crossing_measured(data: Mapping[str, Any], partner: str, repeat: int
                      ) -> tuple[float, float] | str | None:  # fmt: skip
    """(longest spin time that still pairs, shortest that does not), from the sweep; a point
    pairs if its matching rate is at least half block's. "always"/"never"/None."""
    from testbed.experiment.userlevel.model import measured_crossing

    pts = []
    ref = None
    for a in actions(data, partner):
        for r in runs_of(data, "paired-gang", a, partner):
            m = matched(r)
            if r["repeat"] == repeat and m is not None:
                pts.append((parse_action(a).spin_time_us, m))
                if a == "block":
                    ref = m
    if ref is None or not pts:
        return None
    if ref <= 0:
        return "never"
    c = measured_crossing(pts, ref)
    if c is None:
        return "always" if all(m >= 0.5 * ref for _, m in pts) else None
    return c


# ---------------------------------------------------------------- text


def _f(v: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def _vals(values: Sequence[float | None], fmt: str = "{:.2f}") -> str:
    """Mean (per repeat: a, b, ...)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return "–"
    if len(vs) == 1:
        return fmt.format(vs[0])
    return f"{fmt.format(statistics.fmean(vs))} ({', '.join(fmt.format(v) for v in vs)})"


def _us(s: float | str | None) -> str:
    if s is None:
        return "–"
    if isinstance(s, str):
        return s
    if math.isinf(s):
        return "∞ (spin)"
    return f"{s:,.0f} µs" if s >= 10 else f"{s:.1f} µs"


def _crossing_text(c: tuple[float, float] | str | None) -> str:
    if c is None or isinstance(c, str):
        return c or "–"
    return f"between {_us(c[0])} and {_us(c[1])}"


def _spin_label(action: str) -> str:
    s = parse_action(action).spin_time_us
    return "0 (block)" if s == 0 else ("∞ (spin)" if math.isinf(s) else f"{s:g}")


def _by_repeat(runs: Sequence[Run]) -> dict[int, float]:
    """Each repeat's matching rate (repeats without one left out)."""
    out = {}
    for r in runs:
        m = matched(r)
        if m is not None:
            out[int(r["repeat"])] = m
    return out


def verdicts(data: Mapping[str, Any]) -> list[tuple[str, Difference | None, str, str]]:
    """(what, difference per repeat, verdict, why) for §5's claim beside each partner:
    matching rate under block (and under the spin-block nearest Yu & Byun's 150 µs)
    minus under spin."""
    out: list[tuple[str, Difference | None, str, str]] = []
    for partner in data["spec"]["partners"]:
        acts = actions(data, partner)
        if "spin" not in acts:
            continue
        sb = [a for a in acts if a.startswith("spinblock:")]
        near = min(sb, key=lambda a: abs(math.log(max(parse_action(a).spin_us, 1.0)
                                                   / YU_BYUN_SPIN_US)), default=None)  # fmt: skip
        for a in [x for x in ("block", near) if x is not None and x in acts]:
            mine = _by_repeat(runs_of(data, "paired-gang", a, partner))
            spin = _by_repeat(runs_of(data, "paired-gang", "spin", partner))
            reps = [k for k in sorted(mine) if k in spin]
            what = f"beside the {partner} job: matching rate, {a} − spin (points)"
            if not reps:
                out.append((what, None, "–", "no runs"))
                continue
            diff = Difference.of([100 * mine[k] for k in reps], [100 * spin[k] for k in reps])
            verdict, why = judge(diff, +1)
            out.append((what, diff, str(verdict), why))
    return out


def markdown(data: Mapping[str, Any]) -> str:
    spec = data["spec"]
    c = spec["comm"]
    reps = repeats(data)
    lines = [
        f"# Paired gang under user-level communication: {spec['name']}",
        "",
        'Wiseman & Feitelson 2003 §5: "polling and busy waiting may mask I/O activity and '
        "make it look like CPU activity … requires the substitution of busy waiting by spin "
        'blocking". A communication-bound job (the synthetic program: '
        f"`--gcomp {c['gcomp']} --comm {c['comm']} --msg-bytes {c['msg_bytes']} "
        f"--comm-rounds {c['comm_rounds']}`, as wide as the cluster) under each receive "
        "waiting action of the message library, alone and beside an I/O-bound or a "
        "compute-bound partner (barriers blocking), under paired gang "
        f"(`matching={spec['matching']}`, margin m = {spec['margin']:g}) and strict gang. "
        f"{spec['nodes']} nodes at {spec['cpus_per_node']} CPU ({spec['cpu_mechanism']}), "
        f"link `{spec['link']}`, quantum {spec['quantum']:g} s, {spec['duration']:g} s per "
        f"run, {len(reps)} repeat(s) run one after the other (every configuration once per "
        "repeat).",
        "",
        "*u* is the comm job's utilization as the agents measured it (CPU used ÷ CPU "
        "offered over its nodes) in the quanta the controller's status was sampled "
        "(`last_quantum`, twice a quantum) while every job was in its loop (start-up and "
        "the ends left out); *matched* the share of those quanta that ran a pair; "
        "*response* the comm job's time per barrier (ms), what a job of fixed work takes "
        "per iteration; *predicted u* is u(s) = C + λ·E[min(W, s)] from the repeat's alone, "
        "blocking run (C its CPU ratio, λ its receives per second, W its message waits: "
        "testbed/experiment/userlevel/model.py); *predicted u, own W* the same with the "
        "run's own W and λ per second the job ran (what the action's waits really were; "
        "none for spin, 1 by construction). *Waiting for a CPU*: "
        "the comm job's ranks' run-queue time ÷ their run (`/proc/thread-self/schedstat`). "
        "Figures are the mean over the repeats, each repeat's in brackets.",
        "",
        "## The comm job alone (strict gang, one job: it runs in every quantum)",
        "",
        "| action | u | predicted u | barriers/s | messages/s | W p50 / p90 / p99 (µs) "
        "| waiting for a CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in spec["alone_waits"]:
        rs = runs_of(data, "gang", a, None)
        lines.append(
            f"| {a} | {_vals([mean_u(r, 'comm') for r in rs])} | "
            f"{_vals([prediction(data, r['repeat'], a) for r in rs])} | "
            f"{_vals([rate(r, 'comm') for r in rs], '{:.1f}')} | "
            f"{_vals([messages_per_s(r) for r in rs], '{:.0f}')} | "
            + " / ".join(_vals([w_percentile(r, p) for r in rs], "{:.0f}") for p in (50, 90, 99))
            + f" | {_vals([runq_share(r) for r in rs], '{:.1%}')} |"
        )
    for partner in spec["partners"]:
        ys = [partner_u(data, partner, k) for k in reps]
        lims = [threshold(y, float(spec["margin"])) if y is not None else None for y in ys]
        lines += [
            "",
            f"## Beside the {partner}-bound job",
            "",
            f"The partner's measured utilization y = {_vals(ys, '{:.3f}')}, so §2.4's test "
            f"x + y + m < 1 pairs the comm job only while its predicted utilization is below "
            f"1 − y − m = {_vals(lims, '{:.3f}')}.",
            "",
            f"| policy | spin time (µs) | u | predicted u | predicted u, own W | matched | "
            f"comm barriers/s | response (ms) | messages/s | {partner} barriers/s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        rows = [("paired-gang", a) for a in actions(data, partner)]
        rows += [("gang", a) for a in spec["gang_waits"]]
        for policy, a in rows:
            rs = runs_of(data, policy, a, partner)
            if not rs:
                continue
            resp = [1000.0 / v if v else None for v in (rate(r, "comm") for r in rs)]
            matched_ = "–"
            if policy != "gang":
                matched_ = _vals([matched(r) for r in rs], "{:.0%}")
            lines.append(
                f"| {policy} | {_spin_label(a)} | {_vals([mean_u(r, 'comm') for r in rs])} | "
                f"{_vals([prediction(data, r['repeat'], a) for r in rs])} | "
                f"{_vals([own_prediction(data, r) for r in rs])} | {matched_}"
                f" | {_vals([rate(r, 'comm') for r in rs], '{:.1f}')} | "
                f"{_vals(resp, '{:.2f}')} | {_vals([messages_per_s(r) for r in rs], '{:.0f}')}"
                f" | {_vals([rate(r, partner) for r in rs])} |"
            )
        lines += [
            "",
            "Where pairing stops along the spin time (a point pairs if its matching rate is "
            "at least half of block's), per repeat:",
            "",
            "| repeat | measured | predicted s* (u(s*) = 1 − y − m) |",
            "|---|---|---|",
        ]
        for k in reps:
            lines.append(
                f"| {k} | {_crossing_text(crossing_measured(data, partner, k))} | "
                f"{_us(crossing_predicted(data, partner, k))} |"
            )
    lines += [
        "",
        "## Verdict on Wiseman & Feitelson 2003 §5",
        "",
        "The paper's claim, as a measurement: with busy waiting a communication-bound job "
        "looks CPU-bound and paired gang stops pairing it; spin blocking (Yu & Byun 2011's "
        f"choice, {YU_BYUN_SPIN_US:g} µs; the sweep's nearest spin time here) brings pairing "
        "back. Verdict by docs/reproduction.md's rules (the difference larger than its "
        "repeat-to-repeat spread):",
        "",
        "| comparison | difference | verdict | why |",
        "|---|---|---|---|",
    ]
    for what, diff, verdict, why in verdicts(data):
        lines.append(f"| {what} | {diff.text('{:+.0f}') if diff else '–'} | **{verdict}** | "
                     f"{why} |")  # fmt: skip
    lines += ["", "## The host", ""]
    weight = (data.get("cluster") or {}).get("weight") or {}
    if weight.get("set") is not None:
        lines.append(
            f"The cluster's CPU weight against the rest of the host was {weight['set']} "
            f"(cgroup v2 scale; it was {weight['was']}) while the study ran, so the nodes "
            "kept their cores while they wanted them (docs/userlevel.md)."
        )
    else:
        lines.append(
            "The cluster ran at the host's default CPU weight: a busy process elsewhere "
            "competed with the nodes for their cores (docs/userlevel.md)."
        )
    busy = [r.get("other_cores") for r in data["runs"] if r.get("other_cores") is not None]
    if busy:
        lines.append(
            f"CPU the host spent outside the experiment during a run: {min(busy):.2f}–"
            f"{max(busy):.2f} cores (mean {statistics.fmean(busy):.2f}); runs made again "
            f"because of it: {sum(int(r.get('attempts', 1)) - 1 for r in data['runs'])}."
        )
    loads = [r["loadavg_1m_before"] for r in data["runs"] if "loadavg_1m_before" in r]
    if loads:
        lines.append(
            f"The host's 1-minute load average before each run: {min(loads):.2f}–"
            f"{max(loads):.2f} (other work shares this 2-core host; the cluster's nodes "
            "have a core each, shared with whatever else runs there)."
        )
    lines += ["", "![matching rate and utilization against the spin time](userlevel.png)", ""]
    return "\n".join(lines)


def summary(data: Mapping[str, Any]) -> str:
    out = []
    for partner in data["spec"]["partners"]:
        for a in actions(data, partner):
            rs = runs_of(data, "paired-gang", a, partner)
            out.append(f"{partner} {a}: matched "
                       f"{_vals([matched(r) for r in rs], '{:.0%}')}, u "
                       f"{_vals([mean_u(r, 'comm') for r in rs])}")  # fmt: skip
    for what, diff, verdict, _why in verdicts(data):
        out.append(f"{what}: {diff.text('{:+.0f}') if diff else '–'} -> {verdict}")
    return "\n".join(out)


def plots(data: Mapping[str, Any], out: Path) -> list[Path]:
    plt = plotting.pyplot()
    partners = list(data["spec"]["partners"])
    if not partners:
        return []
    fig, axes = plt.subplots(2, len(partners), figsize=(5.5 * len(partners), 6.5), squeeze=False)
    for col, partner in enumerate(partners):
        acts = actions(data, partner)
        xs = list(range(len(acts)))
        top, bottom = axes[0][col], axes[1][col]
        for k in repeats(data):
            u = [next((mean_u(r, "comm") for r in runs_of(data, "paired-gang", a, partner)
                       if r["repeat"] == k), None) for a in acts]  # fmt: skip
            p = [prediction(data, k, a) for a in acts]
            m = [next((matched(r) for r in runs_of(data, "paired-gang", a, partner)
                       if r["repeat"] == k), None) for a in acts]  # fmt: skip
            top.plot(xs, [math.nan if v is None else v for v in u], "o", color=f"C{k - 1}",
                     label=f"measured, repeat {k}")  # fmt: skip
            top.plot(xs, [math.nan if v is None else v for v in p], "--", color=f"C{k - 1}",
                     label=f"predicted, repeat {k}")  # fmt: skip
            y = partner_u(data, partner, k)
            if y is not None:
                top.axhline(threshold(y, float(data["spec"]["margin"])), color=f"C{k - 1}",
                            lw=0.8, ls=":")  # fmt: skip
            bottom.plot(xs, [math.nan if v is None else 100 * v for v in m], "o-",
                        color=f"C{k - 1}", label=f"repeat {k}")  # fmt: skip
        labels = [_spin_label(a) for a in acts]
        for ax in (top, bottom):
            ax.set_xticks(xs)
            ax.set_xticklabels(labels, rotation=30, fontsize=8)
        top.set_ylim(0, 1.05)
        top.set_ylabel("comm job's utilization u")
        top.set_title(f"beside the {partner}-bound job (dotted: 1 − y − m)", fontsize=10)
        top.legend(fontsize=7)
        bottom.set_ylim(-3, 103)
        bottom.set_ylabel("quanta paired (%)")
        bottom.set_xlabel("spin-block spin time (µs)")
        bottom.legend(fontsize=7)
    return [plotting.save(fig, out / "userlevel.png")]
