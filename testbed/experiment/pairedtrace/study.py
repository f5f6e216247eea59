"""The ``paired-trace`` study: Figs. 3 and 13 of Wiseman & Feitelson 2003 (§2.3, §4.2.3).

Spec::

    kind = "paired-trace"
    [study]
    name = "paired-trace-fig3-13"
    fig3_live = "docs/results/paired-trace/fig3-live.json"  # a recorded live trace, or ""
    calibration = "default"   # the job types of Fig. 13 (calibrate's alone runs)
    nodes = 2
    phases = "1,4,8"          # QCRD: 12 x (I/O s, CPU s) and a final I/O phase
    sharp_change = 0.2        # §4.2.3: a change of more than 20 %
    seeds = [1, 2, 3, 4, 5]
    start_jitter = 1.0        # s: copies 2-4 start up to this long after the first
    phase_jitter = 0.05       # each phase lasts x U(1 - 0.05, 1 + 0.05)
    [quick]
    seeds = [1, 2]

Fig. 3 is live only: the run replays the committed trace (it does not record one; that
needs root, ``python -m testbed.experiment.pairedscale.trace fig3``) and keeps it in the
results. Fig. 13 runs in the simulator: per seed, both settings on the same four jittered
copies (the seed draws the jitter), plus the four exact copies started at once that the
paper ran (shown and plotted, not in the verdict: one run, no spread). The choice of
jitter (where the paper's runs varied between repetitions, it does not say) is
docs/paired-fidelity.md's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from testbed.experiment.claims import Claim, Difference, Verdict, judge, judge_value
from testbed.experiment.fields import SpecError, Table
from testbed.experiment.pairedscale import trace
from testbed.experiment.results import REPO
from testbed.sweep import RunSpec, SweepOptions, run_sweep

# the tolerances, chosen before the runs: "longer by just about 1 percent" held to 0-3 %;
# Fig. 13(a)'s "high CPU runs alone, low CPU pairs" held to under a fifth of the paired
# quanta pairing two compute phases
COST = (0.0, 3.0)
CPU_PAIRS = 0.2


@dataclass(frozen=True)
class Spec:
    name: str
    fig3_live: str
    calibration: str
    nodes: int
    phases: str
    sharp_change: float
    seeds: tuple[int, ...]
    start_jitter: float
    phase_jitter: float
    quick: tuple[int, ...] = (1, 2)

    def quick_variant(self) -> Spec:
        return replace(self, name=self.name + "-quick", seeds=self.quick)


def load_spec(doc: Table) -> Spec:
    st = doc.table("study", required=True)
    st.only({"name", "fig3_live", "calibration", "nodes", "phases", "sharp_change", "seeds",
             "start_jitter", "phase_jitter"})  # fmt: skip
    q = doc.table("quick")
    q.only({"seeds"})
    phases = st.text("phases", "1,4,8")
    try:
        if len([float(x) for x in phases.split(",")]) != 3:
            raise ValueError
    except ValueError:
        raise st.error("phases", f"three seconds: I/O, CPU, final I/O, got {phases!r}") from None
    seeds = tuple(st.items("seeds", int, [1, 2, 3, 4, 5], unique=True, minimum=1))
    return Spec(
        name=st.text("name", "paired-trace-fig3-13"),
        fig3_live=st.text("fig3_live", ""),
        calibration=st.text("calibration", "default"),
        nodes=st.integer("nodes", 2, minimum=1, maximum=64),
        phases=phases,
        sharp_change=st.number("sharp_change", 0.2, above=0.0, below=1.0),
        seeds=seeds,
        start_jitter=st.number("start_jitter", 1.0, minimum=0.0),
        phase_jitter=st.number("phase_jitter", 0.05, minimum=0.0, below=1.0),
        quick=tuple(q.items("seeds", int, seeds[:2], unique=True, minimum=1)),
    )


def _calibration(spec: Spec) -> Path:
    from testbed.sim.calibration import DEFAULT_PATH

    path = DEFAULT_PATH if spec.calibration == "default" else Path(spec.calibration)
    if not path.is_file():
        raise SpecError(f"calibration {path}: no such file",
                        fix="run cosched calibrate, or name the file")  # fmt: skip
    return path


def run_study(spec: Spec, sweep: SweepOptions) -> dict[str, Any]:
    from testbed.experiment.pairedscale.mixes import job_types

    fig3: dict[str, Any] | None = None
    if spec.fig3_live:
        path = Path(spec.fig3_live)
        path = path if path.is_absolute() else REPO / path
        try:
            fig3 = {"source": spec.fig3_live, "recorded": json.loads(path.read_text())}
        except (OSError, ValueError) as e:
            raise SpecError(f"fig3_live {spec.fig3_live}: cannot read ({e})",
                            fix="record it with python -m testbed.experiment.pairedscale.trace "
                            "fig3, or set fig3_live = \"\"") from None  # fmt: skip
    types = job_types(_calibration(spec), io_files=8, io_latency=0.005)
    base = {
        "phases": spec.phases, "io": types["io"], "compute": types["compute"],
        "nodes": spec.nodes, "quantum": 1.0, "interference": types["interference"],
    }  # fmt: skip
    runs: list[tuple[int, str, float, float]] = [(0, sc, 0.0, 0.0) for sc in ("none", "sc")]
    runs += [(s, sc, spec.start_jitter, spec.phase_jitter) for s in spec.seeds
             for sc in ("none", "sc")]  # fmt: skip
    specs = [
        RunSpec("paired-trace-fig13", {
            **base, "sharp_change": "none" if sc == "none" else f"{spec.sharp_change:g}",
            "start_jitter": sj, "phase_jitter": pj}, seed, trace.simulate_qcrd)
        for seed, sc, sj, pj in runs
    ]  # fmt: skip
    res = run_sweep(specs, replace(sweep, desc="simulated Fig. 13"))
    res.check()
    fig13 = []
    for (seed, _, sj, pj), r in zip(runs, res.results, strict=True):
        assert r is not None
        stats = trace.fig13_stats(r["trace"], r["responses"])
        row: dict[str, Any] = {"seed": seed, "sharp_change": r["sharp_change"],
                               "start_jitter": sj, "phase_jitter": pj, **stats,
                               "responses": r["responses"]}  # fmt: skip
        if seed == 0:  # the exact copies: the plotted traces
            row["trace"] = r["trace"]
        fig13.append(row)
    return {
        "meta": {
            "name": spec.name,
            "nodes": spec.nodes,
            "phases": spec.phases,
            "sharp_change": spec.sharp_change,
            "seeds": list(spec.seeds),
            "start_jitter": spec.start_jitter,
            "phase_jitter": spec.phase_jitter,
            "job_types": types,
        },
        "fig3": fig3,
        "fig13": fig13,
    }


# ---------------------------------------------------------------- results
def _fig13(data: Mapping[str, Any], off: bool, seeded: bool = True) -> dict[int, Mapping[str, Any]]:
    return {int(r["seed"]): r for r in data["fig13"]
            if (r["sharp_change"] == "none") == off and (int(r["seed"]) > 0) == seeded}  # fmt: skip


def _costs(data: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    """Per seed, how much longer the mean response is with detection, in %."""
    a, b = _fig13(data, True), _fig13(data, False)
    seeds = sorted(set(a) & set(b))
    return seeds, [100.0 * (b[s]["mean_response"] / a[s]["mean_response"] - 1) for s in seeds]


def _fig3_stats(data: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, float]] | None:
    if not data.get("fig3"):
        return None
    run = data["fig3"]["recorded"]["runs"][0]
    pts = trace.replay(run["trace"], sharp_change=0.2)
    return pts, trace.fig3_stats(pts)


def claims(data: Mapping[str, Any]) -> list[Claim]:
    out: list[Claim] = []
    f3 = _fig3_stats(data)
    if f3 is not None and "pearson_r" in f3[1]:
        st = f3[1]
        lo, hi = st["measured_min"], st["measured_max"]
        known = st["points"] - st["new_job_points"]
        r = st["pearson_r"]
        v, why = (Verdict.DIRECTION, "one live run: no spread; " + (
            f"and the measured span {lo:.2f}–{hi:.2f} is narrower than the paper's 0–1"
            if hi - lo < trace.FIG3_SPAN else "a correlation above 0.7")) if r > 0.7 else (
            Verdict.NOT_REPRODUCED, "a correlation of at most 0.7")  # fmt: skip
        out.append(Claim("wiseman2003/fig3/prediction", "§2.3, Fig. 3",
                         "eq. (1)'s prediction follows a job's measured CPU utilization; new "
                         "jobs are predicted at 100 %",
                         f"live: r = {r:.3f} over {known:.0f} points measured {lo:.2f}–{hi:.2f}; "
                         f"{st['new_job_points']:.0f} new-job points at 1.0", v, why))  # fmt: skip
    seeds, costs = _costs(data)
    if seeds:
        d = Difference(tuple(costs))
        lo, hi = COST
        v, why = judge(d, +1, within=lo <= d.mean <= hi)
        a, b = _fig13(data, True), _fig13(data, False)
        ma = sum(a[s]["mean_response"] for s in seeds) / len(seeds)
        mb = sum(b[s]["mean_response"] for s in seeds) / len(seeds)
        out.append(Claim("wiseman2003/fig13/sharp-change-cost", "§4.2.3, Fig. 13(b)",
                         "with sharp-change detection the response time was longer by just "
                         f"about 1 percent (tolerance: longer by {lo:g}–{hi:g} %)",
                         f"simulated, {len(seeds)} seeds: {ma:.1f} s → {mb:.1f} s, "
                         f"{d.text('{:+.2f} %')}", v, why))  # fmt: skip
        shares = [float(a[s]["cpu_pairs_share"]) / float(a[s]["paired_share"])
                  if a[s]["paired_share"] else 0.0 for s in seeds]  # fmt: skip
        mean = sum(shares) / len(shares)
        v2, why2 = judge_value([mean < CPU_PAIRS, *(x < CPU_PAIRS for x in shares)],
                               f"under {CPU_PAIRS:.0%} of the paired quanta")  # fmt: skip
        out.append(Claim("wiseman2003/fig13/cpu-alone", "§4.2.3, Fig. 13(a)",
                         "without detection, high-CPU phases run alone and low-CPU phases "
                         "pair (a pair of compute phases only now and then)",
                         f"simulated, {len(seeds)} seeds: compute-phase pairs "
                         + ", ".join(f"{x:.0%}" for x in shares)
                         + " of the paired quanta", v2, why2))  # fmt: skip
    return out


def markdown(data: Mapping[str, Any]) -> str:
    from testbed.experiment.claims import markdown as claims_md
    from testbed.experiment.pairedscale.study import Estimate

    meta = data["meta"]
    lines = ["# Wiseman & Feitelson 2003 Figs. 3 and 13: the predictor at work", ""]
    f3 = _fig3_stats(data)
    if f3 is not None:
        rec = data["fig3"]["recorded"]
        run = rec["runs"][0]
        st = f3[1]
        lines += [
            "## Fig. 3: predicted against measured utilization (live)", "",
            f"The trace `{data['fig3']['source']}`, recorded live on "
            f"{rec['nodes']} nodes at 1 s quanta under paired gang: "
            f"{len(run['jobs'])} heterogeneous jobs (CPU shares "
            + ", ".join(f"{j['target']:.2f}" for j in run["jobs"])
            + f"), {len(run['trace'])} quanta, the host busy outside the cluster "
            f"{trace.fmt_busy(run.get('host_busy_outside_cores'))} cores. Eq. (1) replayed "
            "over it with the policy's predictor.", "",
            f"* points: {st['points']:.0f}, of them {st['new_job_points']:.0f} new jobs "
            "predicted at 100 %",
        ]  # fmt: skip
        if "pearson_r" in st:
            lines.append(
                f"* the others: Pearson r = {st['pearson_r']:.3f}, mean |predicted − "
                f"measured| = {st['mean_abs_error']:.3f}, within ±0.1: {st['within_0.1']:.0%}, "
                f"measured {st['measured_min']:.2f}–{st['measured_max']:.2f}"
            )
        lines += ["", "![Fig. 3](fig3.png)", ""]
    lines += [
        "## Fig. 13: four QCRD copies, without and with sharp-change detection (simulated)",
        "",
        f"Four copies of the QCRD model ({meta['phases']} s: 12 × (I/O, CPU) and a final "
        f"I/O phase) on {meta['nodes']} nodes at 1 s quanta, job types from calibrate's alone "
        f"runs, I/O on the node's shared device. Each seed draws a start offset of up to "
        f"{meta['start_jitter']:g} s for copies 2-4 and a length × U(1 ± "
        f"{meta['phase_jitter']:g}) for each phase; seed 0 is the four exact copies started "
        "at once. CPU pairs: paired quanta in which two jobs each above 30 % together used "
        "over 80 % of the CPU.",
        "",
        "| seed | sharp change | mean response (s) | quanta | paired quanta | CPU pairs |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(data["fig13"], key=lambda r: (int(r["seed"]), r["sharp_change"] != "none")):
        seed = "exact copies" if int(r["seed"]) == 0 else str(r["seed"])
        lines.append(f"| {seed} | {r['sharp_change']} | {r['mean_response']:.1f} | "
                     f"{r['quanta']:.0f} | {r['paired_share']:.0%} | "
                     f"{r['cpu_pairs_share']:.1%} |")  # fmt: skip
    a, b = _fig13(data, True), _fig13(data, False)
    seeds, costs = _costs(data)
    if seeds:
        ea = Estimate(tuple(a[s]["mean_response"] for s in seeds))
        eb = Estimate(tuple(b[s]["mean_response"] for s in seeds))
        ec = Estimate(tuple(costs))
        lines += ["", f"Over seeds {', '.join(map(str, seeds))} (mean ± 95 % CI): "
                  f"{ea.text()} s without detection, {eb.text()} s with it; longer by "
                  f"{ec.text('{:.2f}')} %.", ""]  # fmt: skip
    lines += ["![Fig. 13](fig13.png)", ""]
    lines += claims_md(claims(data))
    return "\n".join(lines)


def plots(data: Mapping[str, Any], out: Path) -> list[Path]:
    written = []
    f3 = _fig3_stats(data)
    if f3 is not None:
        trace.plot_fig3(f3[0], out / "fig3.png")
        written.append(out / "fig3.png")
    sims = [r for r in data["fig13"] if int(r["seed"]) == 0 and "trace" in r]
    if sims:
        trace.plot_fig13({"runs": []}, sims, out / "fig13.png")
        written.append(out / "fig13.png")
    return written
