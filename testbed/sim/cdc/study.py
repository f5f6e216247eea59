"""Yu & Byun 2011 Figs. 7-11 at the paper's scale, simulated, over seeds.

A spec (``experiments/cdc-paper-scale.toml``) lists the study's parts: each
a workload (Table 3), the schemes, the MPLs and loads, run on the paper's 16
nodes for every seed. Every run is one :func:`testbed.sim.cdc.run.run_cdc`
handed to :func:`testbed.sweep.run_sweep`; its summary is kept as one JSON
file under ``OUT/runs/`` so an interrupted or partial study resumes, and the
report is built only from the files present: what was run is what is quoted.

``--jobs``, ``--parts``, ``--schemes``, ``--loads`` and ``--seeds`` run a
subset (the machine or the time may not allow the whole); the report lists
which cells of the spec it holds and which it lacks.

Verdicts compare schemes seed by seed (every scheme runs the same stream for a
seed): the mean relative change of CC-B against SB, say, with a 95 % t
interval over the seeds. A claim's direction is *reproduced* when the interval
lies wholly on the paper's side of zero, *refuted* when wholly on the other,
*not resolved* when it holds zero (the difference is within the seed-to-seed
spread).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.sim.cdc.engine import Fluid
from testbed.sim.cdc.run import run_cdc
from testbed.sweep import RunSpec, SweepOptions, run_sweep

SCHEMES = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
FLUID = {"settle_s": 0.5, "measure_s": 1.0, "tail_s": 1.0, "min_jump_s": 2.0}
# fluid mode's options that move its figures: Fluid's switches (their error against exact
# runs is in docs/simulator.md), off unless a spec asks, as in
# ``fluid = {whole_reps = true, past_queued = true}``
FLUID_OPTIONS = tuple(f.name for f in dataclasses.fields(Fluid) if f.type == "bool")


class StudyError(ValueError):
    """A spec or option the study cannot use (one line)."""


@dataclass(frozen=True)
class Part:
    """One figure's runs: ``workload`` (a WL spec without jobs) at each load and MPL."""

    name: str
    workloads: tuple[str, ...]
    schemes: tuple[str, ...]
    mpls: tuple[int, ...]
    loads: tuple[str, ...]  # "heavy", "light" or "at_once"
    jobs: int


@dataclass(frozen=True)
class Study:
    name: str
    nodes: int
    speeds: str
    platform: str
    fluid: bool
    seeds: tuple[int, ...]
    parts: tuple[Part, ...]
    quick: bool = False  # --quick: SB and CC-B on two WL6 jobs of the first seed
    source: Path = Path("")  # the spec file
    subset_of: str = ""  # the whole study's spec, when this one runs a part of it
    fluid_options: tuple[str, ...] = ()  # of FLUID_OPTIONS, on
    record: bool = False  # the runs keep their processes' records (run.py, ``record``)


def _fluid(path: Path, v: Any) -> tuple[bool, tuple[str, ...]]:
    """``fluid = true | false | {option = true, ...}`` -> (fluid, options on)."""
    if isinstance(v, bool):
        return v, ()
    if isinstance(v, Mapping):
        bad = [k for k in v if k not in FLUID_OPTIONS or not isinstance(v[k], bool)]
        if bad:
            opts = ", ".join(FLUID_OPTIONS)
            raise StudyError(f"{path}: [cdc] fluid: {bad[0]!r} is not an option; valid: "
                             f"{opts} = true|false, or fluid = true|false")  # fmt: skip
        return True, tuple(k for k in FLUID_OPTIONS if v.get(k))
    raise StudyError(f"{path}: [cdc] fluid = {v!r}: give true, false or a table of "
                     f"{', '.join(FLUID_OPTIONS)}")  # fmt: skip


def load_spec(path: Path) -> Study:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise StudyError(f"{path}: {e}") from None
    return spec_from_doc(raw, path)


def spec_from_doc(raw: Mapping[str, Any], path: Path) -> Study:
    """The study from a parsed spec (``[cdc]`` and ``[[parts]]``); StudyError if bad."""
    st = raw.get("cdc", {})
    parts = []
    for p in raw.get("parts", []):
        schemes = tuple(p.get("schemes", SCHEMES))
        bad = [s for s in schemes if s not in SCHEMES]
        if bad:
            raise StudyError(f"{path}: part {p.get('name')!r}: scheme {bad[0]!r} unknown; "
                             f"valid: {', '.join(SCHEMES)}")  # fmt: skip
        parts.append(
            Part(
                str(p["name"]),
                tuple(p["workloads"]),
                schemes,
                tuple(int(m) for m in p.get("mpls", [5])),
                tuple(p.get("loads", ["heavy"])),
                int(p.get("jobs", 100)),
            )
        )
    fluid, fluid_options = _fluid(path, st.get("fluid", True))
    return Study(
        str(st.get("name", path.stem)),
        int(st.get("nodes", 16)),
        str(st.get("speeds", "paper")),
        str(st.get("platform", "paper")),
        fluid,
        tuple(int(s) for s in st.get("seeds", [1, 2, 3, 4, 5])),
        tuple(parts),
        source=Path(path),
        subset_of=str(st.get("subset_of", "")),
        fluid_options=fluid_options,
        record=bool(st.get("record", False)),
    )


def todo_of(study: Study, jobs: int | None = None) -> list[dict[str, Any]]:
    """The cells to run: the whole spec, or --quick's two."""
    if not study.quick:
        return cells(study, jobs)
    return [
        c
        for c in cells(study, 2)
        if c["part"] == study.parts[0].name
        and c["load"] == study.parts[0].loads[0]
        and c["scheme"] in ("sb", "cc-b")
        and c["seed"] == study.seeds[0]
    ]


def workload_spec(wl: str, load: str, jobs: int) -> str:
    return f"{wl}:jobs={jobs},at_once" if load == "at_once" else f"{wl}:jobs={jobs},load={load}"


def cells(study: Study, jobs: int | None = None) -> list[dict[str, Any]]:
    """Every run of the spec: part, workload, load, scheme, MPL, seed (BATCH: MPL 1 once)."""
    out = []
    for p in study.parts:
        for wl in p.workloads:
            for load in p.loads:
                for mpl in p.mpls:
                    for s in p.schemes:
                        if s == "batch" and mpl != max(p.mpls):
                            continue  # BATCH's MPL is 1: once per load
                        for seed in study.seeds:
                            out.append(
                                {
                                    "part": p.name,
                                    "wl": wl,
                                    "load": load,
                                    "scheme": s,
                                    "mpl": 1 if s == "batch" else mpl,
                                    "seed": seed,
                                    "jobs": jobs or p.jobs,
                                }
                            )
    return out


def run_file(out: Path, c: Mapping[str, Any]) -> Path:
    return (
        out
        / "runs"
        / (f"{c['wl']}-{c['load']}-j{c['jobs']}-{c['scheme']}-mpl{c['mpl']}-s{c['seed']}.json")
    )


def params_of(study: Study, c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "scheme": c["scheme"],
        "mpl": c["mpl"],
        "workload": workload_spec(c["wl"], c["load"], c["jobs"]),
        "nodes": study.nodes,
        "speeds": study.speeds,
        "platform": study.platform,
        "fluid": {**FLUID, **dict.fromkeys(study.fluid_options, True)} if study.fluid else None,
        # only when asked: a spec without it runs (and resumes) exactly as before
        **({"record": True} if study.record else {}),
    }


# what a run file's params must share with the study's to be reported beside its runs
SAME_AS_STUDY = ("fluid", "nodes", "speeds", "platform")


def check_out(study: Study, out: Path) -> None:
    """StudyError (one line) if ``out`` holds a run made with other settings than the
    study's -- fluid mode and its options, the machine, the platform -- which its report
    would otherwise set beside these as if alike."""
    want = params_of(study, {"scheme": "", "mpl": 0, "wl": "", "load": "", "jobs": 0})
    for f in sorted((out / "runs").glob("*.json")):
        try:
            got = json.loads(f.read_text()).get("params", {})
        except (OSError, ValueError):
            raise StudyError(f"{f}: not a readable run file; remove it") from None
        for k in SAME_AS_STUDY:
            if got.get(k) != want[k]:
                raise StudyError(
                    f"{f} ran with {k} = {json.dumps(got.get(k))}, this spec asks "
                    f"{json.dumps(want[k])}: give another --out (runs made otherwise are not "
                    f"mixed)"
                )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(
    study: Study,
    todo: Sequence[Mapping[str, Any]],
    out: Path,
    progress: bool,
    say: Callable[[str], None] = _stderr,
    options: SweepOptions | None = None,
) -> int:
    """Run the cells without a result file through the sweep executor (``options``: its
    workers or Dask cluster), as many at a time as it has workers, writing each file as
    its batch ends. Returns how many failed."""
    (out / "runs").mkdir(parents=True, exist_ok=True)
    check_out(study, out)
    opts = dataclasses.replace(options or SweepOptions(), progress=False)
    batch = max(1, opts.workers or os.cpu_count() or 1) if opts.dask is None else 64
    # seed by seed, so that a study stopped early holds whole seeds to pair schemes on
    missing = sorted((c for c in todo if not run_file(out, c).exists()), key=lambda c: c["seed"])
    failed = 0
    for i in range(0, len(missing), batch):
        cells_ = missing[i : i + batch]
        specs = [RunSpec(study.name, params_of(study, c), int(c["seed"]), run_cdc) for c in cells_]
        res = run_sweep(specs, opts)
        bad = {x.spec.key: x.error for x in res.failed}
        for c, spec, summary in zip(cells_, specs, res.results, strict=True):
            f = run_file(out, c)
            if spec.key in bad or summary is None:
                failed += 1
                say(f"{f.name}: {bad.get(spec.key, 'no result')}")
                continue
            f.write_text(json.dumps({"cell": dict(c), "params": spec.params, **summary}) + "\n")
            if progress:
                say(
                    f"{f.name}: response {summary['response_s']:.1f} s, wait share "
                    f"{100 * (summary['wait_share'] or 0):.1f} %, "
                    f"BCR {summary['bcr']:.3f}, {summary['wall_s']:.0f} s"
                )
    return failed


# ---- statistics ------------------------------------------------------------------------


def mean_ci(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval (nan for one value)."""
    from scipy import stats

    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, math.nan
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def verdict(mean: float, half: float, paper_sign: float) -> str:
    """Whether a paired change's 95 % interval lies on the paper's side of zero."""
    if math.isnan(half):
        return "one seed: no verdict"
    lo, hi = mean - half, mean + half
    if (paper_sign < 0 and hi < 0) or (paper_sign > 0 and lo > 0):
        return "direction reproduced"
    if (paper_sign < 0 and lo > 0) or (paper_sign > 0 and hi < 0):
        return "refuted (opposite direction)"
    return "not resolved (within the seed-to-seed spread)"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.sim.cdc.study", description=__doc__)
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, help="jobs per stream instead of the spec's (a subset)")
    ap.add_argument("--parts", help="comma-separated part names (default all)")
    ap.add_argument("--schemes", help="comma-separated schemes (default the spec's)")
    ap.add_argument("--loads", help="comma-separated loads (default the spec's)")
    ap.add_argument("--seeds", help="comma-separated seeds (default the spec's)")
    ap.add_argument("--report-only", action="store_true", help="rebuild the report, run nothing")
    ap.add_argument("--quick", action="store_true", help="2 jobs, SB and CC-B, WL6 heavy, seed 1")
    a = ap.parse_args(argv)
    from testbed.sim.cdc import studyreport

    try:
        study = load_spec(a.spec)
        if a.quick:
            study = dataclasses.replace(study, quick=True)
        todo = todo_of(study, a.jobs)

        def keep(key: str, opt: str | None) -> None:
            nonlocal todo
            if opt:
                want = {x.strip() for x in opt.split(",")}
                todo = [c for c in todo if str(c[key]) in want]

        keep("part", a.parts)
        keep("scheme", a.schemes)
        keep("load", a.loads)
        keep("seed", a.seeds)
    except StudyError as e:
        print(f"cosched: {e}", file=sys.stderr)
        return 2
    try:
        failed = 0 if a.report_only else run(study, todo, a.out, progress=True)
    except StudyError as e:
        print(f"cosched: {e}", file=sys.stderr)
        return 2
    studyreport.write(study, a.out, a.spec)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
