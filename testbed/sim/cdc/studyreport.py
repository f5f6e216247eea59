"""The paper-scale CDC study's report, built only from the run files present.

Reads ``OUT/runs/*.json`` (testbed/sim/cdc/study.py), groups them by part,
workload, load, jobs and MPL, and writes ``OUT/results.json`` (every figure the
report quotes: means over seeds with 95 % t intervals, the wait share of
response, the paired per-seed changes behind each claim) and ``OUT/report.md``.
Each claim Yu & Byun's text states (the same list the live report uses) is set
beside our paired change with a verdict that respects the seed-to-seed spread
(:func:`testbed.sim.cdc.study.verdict`); a claim whose runs are not present is
listed as not run. The coverage table says which cells of the spec were run
and at what size, so a subset is never mistaken for the whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.experiment.cdc.report import PAPER_CLAIMS
from testbed.sim.cdc.study import Study, cells, mean_ci, run_file, verdict

METRICS = {"response_s": "response_s", "bcr": "bcr", "md": "md_s", "exec_s": "execution_s"}


def load_runs(out: Path) -> list[dict[str, Any]]:
    runs = []
    for f in sorted((out / "runs").glob("*.json")):
        runs.append(json.loads(f.read_text()))
    return runs


def metric(run: Mapping[str, Any], name: str, app: str | None = None) -> float | None:
    if app is not None:
        a = run.get("by_app", {}).get(app)
        key = {"exec_s": "execution_s", "response_s": "response_s"}.get(name)
        return None if a is None or key is None else a.get(key)
    v = run.get(METRICS[name])
    return None if v is None else float(v)


def group_key(c: Mapping[str, Any]) -> tuple[str, str, str, int]:
    return (c["part"], c["wl"], c["load"], int(c["jobs"]))


def summarize(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (part, workload, load, jobs, scheme, MPL): means and intervals over seeds."""
    rows: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in runs:
        c = r["cell"]
        rows.setdefault((*group_key(c), c["scheme"], int(c["mpl"])), []).append(r)
    out = []
    for (part, wl, load, jobs, scheme, mpl), rs in sorted(rows.items()):
        row: dict[str, Any] = {
            "part": part, "wl": wl, "load": load, "jobs": jobs, "scheme": scheme, "mpl": mpl,
            "seeds": sorted(int(r["cell"]["seed"]) for r in rs),
        }  # fmt: skip
        for name, key in (("response_s", "response_s"), ("wait_s", "wait_s"),
                          ("execution_s", "execution_s"), ("wait_share", "wait_share"),
                          ("bcr", "bcr"), ("md_s", "md_s"), ("wall_s", "wall_s")):  # fmt: skip
            xs = [float(r[key]) for r in rs if r.get(key) is not None]
            if xs:
                m, h = mean_ci(xs)
                row[name] = {"mean": m, "ci95": None if h != h else h, "values": xs}
        # the stream's span: how far into a long run the jobs reach (per_job: id, app, size,
        # submit, start, end)
        last = [max(float(j[3]) for j in r["per_job"]) for r in rs if r.get("per_job")]
        mk = [float(r["makespan_s"]) for r in rs if r.get("makespan_s") is not None]
        if last:
            row["last_arrival_s"] = {"mean": sum(last) / len(last), "ci95": None, "values": last}
        if mk:
            row["makespan_s"] = {"mean": sum(mk) / len(mk), "ci95": None, "values": mk}
        out.append(row)
    return out


def paired_change(
    runs: Sequence[Mapping[str, Any]],
    where: tuple[str, str, int],
    ours: str,
    base: str,
    mpl: int,
    name: str,
    app: str | None,
) -> list[float]:
    """Per seed: ours ÷ base − 1 on the same stream (same part, workload, load, jobs, seed)."""
    wl, load, jobs = where
    by: dict[tuple[str, int], Mapping[str, Any]] = {}
    for r in runs:
        c = r["cell"]
        same = c["wl"] == wl and c["load"] == load and int(c["jobs"]) == jobs
        if same and int(c["mpl"]) == (1 if c["scheme"] == "batch" else mpl):
            by[(c["scheme"], int(c["seed"]))] = r
    out = []
    for (s, seed), r in sorted(by.items()):
        if s != ours or (base, seed) not in by:
            continue
        a, b = metric(r, name, app), metric(by[(base, seed)], name, app)
        if a is not None and b:
            out.append(a / b - 1.0)
    return out


def claims(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each claim of the paper beside our paired change (module docstring)."""
    wheres = sorted({(r["cell"]["wl"], r["cell"]["load"], int(r["cell"]["jobs"])) for r in runs})
    out = []
    for c in PAPER_CLAIMS:
        row: dict[str, Any] = {
            "where": c.where, "text": c.text, "paper_pct": c.paper_pct, "note": c.note,
            "ours": [],
        }  # fmt: skip
        pairs = [(c.ours, c.base)] if c.ours != "cc" else []
        if c.ours == "cc":
            pairs = [(cc, o) for cc in ("cc-s", "cc-b")
                     for o in ("local", "dcs", "pb", "ib", "sb", "hybrid")]  # fmt: skip
        for wl, load, jobs in wheres:
            # Fig. 9's claims are about WL5 (50 CG jobs at once, any load); the rest WL6's
            if c.app == "cg":
                if wl != "WL5":
                    continue
            elif wl != "WL6" or load != c.load:
                continue
            for ours, base in pairs:
                xs = paired_change(runs, (wl, load, jobs), ours, base, c.mpl, c.metric, None)
                if not xs:
                    continue
                m, h = mean_ci([100 * x for x in xs])
                row["ours"].append(
                    {
                        "wl": wl, "load": load, "jobs": jobs, "mpl": c.mpl,
                        "pair": f"{ours} vs {base}", "seeds": len(xs),
                        "values_pct": [100 * x for x in xs], "mean_pct": m,
                        "ci95_pct": None if h != h else h,
                        "verdict": verdict(m, h, c.paper_pct),
                    }
                )  # fmt: skip
        out.append(row)
    return out


def coverage(study: Study, runs: Sequence[Mapping[str, Any]], out: Path) -> list[dict[str, Any]]:
    """Per part: cells the spec asks for (at its job counts) and what is present."""
    have = [r["cell"] for r in runs]
    rows = []
    for p in study.parts:
        full = [c for c in cells(study) if c["part"] == p.name]
        present = [c for c in full if run_file(out, c).exists()]
        smaller = [c for c in have if c["part"] == p.name and int(c["jobs"]) != p.jobs]
        rows.append(
            {
                "part": p.name,
                "cells": len(full),
                "present_full_size": len(present),
                "present_smaller": len(smaller),
                "smaller_jobs": sorted({int(c["jobs"]) for c in smaller}),
                "smaller_schemes": sorted({c["scheme"] for c in smaller}),
                "smaller_loads": sorted({c["load"] for c in smaller}),
                "smaller_seeds": sorted({int(c["seed"]) for c in smaller}),
            }
        )
    return rows


def _ci(d: Mapping[str, Any] | None, scale: float = 1.0, fmt: str = ".1f") -> str:
    if not d:
        return "–"
    m = format(d["mean"] * scale, fmt)
    return m if d.get("ci95") is None else f"{m} ± {format(d['ci95'] * scale, fmt)}"


def _mode(doc: Mapping[str, Any]) -> str:
    if not doc["fluid"]:
        return "exact"
    opts = doc.get("fluid_options") or []
    return "fluid" if not opts else f"fluid ({', '.join(opts)}: see docs/simulator.md)"


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [
        f"# {doc['study']}: Yu & Byun 2011 at the paper's scale, simulated",
        "",
        f"Spec `{doc['spec']}`; {doc['nodes']} nodes (speeds `{doc['speeds']}`), platform "
        f"`{doc['platform']}`, {_mode(doc)} mode. Made by "
        f"`cosched experiment run {doc['spec']}` (testbed/sim/cdc/study.py, studyreport.py) "
        "from the run files in `runs/`; every figure below is in `results.json` beside this "
        "file. "
        "± is the half-width of a 95 % t interval over the seeds.",
        "",
        "## Coverage: what of the spec was run",
        "",
        *(
            [f"This run is a subset of `{doc['subset_of']}`; the cells below are that spec's.", ""]
            if doc.get("subset_of")
            else []
        ),
        "| part | cells in the spec | run at the spec's size | run smaller | jobs | schemes "
        "| loads | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["coverage"]:
        lines.append(
            f"| {c['part']} | {c['cells']} | {c['present_full_size']} | {c['present_smaller']} | "
            f"{', '.join(map(str, c['smaller_jobs'])) or '–'} | "
            f"{', '.join(c['smaller_schemes']) or '–'} | {', '.join(c['smaller_loads']) or '–'} "
            f"| {', '.join(map(str, c['smaller_seeds'])) or '–'} |"
        )
    lines += [
        "",
        "## Means over seeds",
        "",
        "| part | workload | load | jobs | scheme | MPL | seeds | response s | wait s | "
        "wait share % | BCR | MD ms | last arrival s | makespan s | sim wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['part']} | {r['wl']} | {r['load']} | {r['jobs']} | {r['scheme']} | {r['mpl']} "
            f"| {len(r['seeds'])} | {_ci(r.get('response_s'))} | {_ci(r.get('wait_s'))} | "
            f"{_ci(r.get('wait_share'), 100)} | {_ci(r.get('bcr'), 1, '.3f')} | "
            f"{_ci(r.get('md_s'), 1e3, '.2f')} | {_ci(r.get('last_arrival_s'), 1, '.0f')} | "
            f"{_ci(r.get('makespan_s'), 1, '.0f')} | {_ci(r.get('wall_s'), 1, '.0f')} |"
        )
    lines += [
        "",
        "## The paper's claims beside ours (paired per seed: ours ÷ base − 1)",
        "",
        "| where | claim | paper | ours | seeds | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in doc["claims"]:
        if not c["ours"]:
            lines.append(f"| {c['where']} | {c['text']} | {c['paper_pct']:+.1f} % | not run | – "
                         "| – |")  # fmt: skip
            continue
        for o in c["ours"]:
            ci = "" if o["ci95_pct"] is None else f" ± {o['ci95_pct']:.1f}"
            lines.append(
                f"| {c['where']} | {c['text']} ({o['pair']}, {o['wl']} {o['load']}, "
                f"{o['jobs']} jobs, MPL {o['mpl']}) | {c['paper_pct']:+.1f} % | "
                f"{o['mean_pct']:+.1f}{ci} % | {o['seeds']} | {o['verdict']} |"
            )
    lines.append("")
    return "\n".join(lines)


def write(study: Study, out: Path, spec_path: Path) -> dict[str, Any]:
    """results.json (the bare data) and report.md, for ``python -m testbed.sim.cdc.study``."""
    doc = build(study, out, spec_path)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "report.md").write_text(markdown(doc))
    return doc


def _rel(p: Path) -> str:
    """``p`` relative to the repository where it lies there (reports name repo paths)."""
    from testbed.experiment.results import REPO

    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def build(study: Study, out: Path, spec_path: Path) -> dict[str, Any]:
    """The study's data from the run files in ``out/runs``."""
    from testbed.sim.cdc.study import load_spec

    runs = load_runs(out)
    # a subset's coverage is counted against the whole study it is part of
    whole = load_spec(Path(study.subset_of)) if study.subset_of else study
    doc = {
        "kind": "cdc-paper-scale",
        "study": study.name,
        "spec": _rel(spec_path),
        "nodes": study.nodes,
        "speeds": study.speeds,
        "platform": study.platform,
        "fluid": study.fluid,
        "fluid_options": list(study.fluid_options),
        "subset_of": study.subset_of,
        "coverage": coverage(whole, runs, out),
        "rows": summarize(runs),
        "claims": claims(runs),
    }
    return doc
