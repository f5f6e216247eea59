"""Feitelson & Rudolph's study in the simulator: DHC's design choices (§3) and the waste analysis
(§4), from a ``[dhc]`` spec (experiments/dhc.toml).

Every §3 figure is a family of fluid runs (testbed/sim/dhc.py) over ``loads``:

* ``balancing`` (Table 1, Figs. 2-3): from root, cube, ring, random, none; harmonic
  gang sizes; requests from any thread (Fig. 2) and from PE #1 (Fig. 3);
* ``mapping`` (Fig. 4): strive for balance vs minimize fragmentation, with and
  without selective disabling; uniform sizes;
* ``algorithms`` (Figs. 6, 7, 9-12): the four time-division algorithms, with and
  without selective disabling; uniform sizes;
* ``distributions`` (Fig. 19): uniform, harmonic, powers of two.

What a figure does not vary takes the defaults: cube balancing, requests from any
thread, minimize-fragmentation mapping, weight/uniform, selective disabling
(docs/dhc.md). §4 adds the off-line bounds (closed forms, the discrete size table,
the selective-disabling packer) and the on-line FCFS best-fit waste of Fig. 18.

    cosched experiment run experiments/dhc.toml [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from common.errors import CoschedError, UsageError
from controller.policies.dhc import ALGORITHMS, BALANCING, DhcConfig, DhcError

DEFAULT_SPEC = Path(__file__).resolve().parents[3] / "experiments" / "dhc.toml"
FIELDS = {"name": str, "pes": int, "gangs": int, "seeds": int, "loads": list,
          "point_loads": list, "waste_pes": list, "waste_rounds": int,
          "waste_table_pes": int, "workers": int}  # fmt: skip


class DhcSpecError(UsageError):
    """A [dhc] spec that cannot be run (one line: file, field, fix)."""


@dataclass
class DhcSpec:
    name: str = "dhc"
    pes: int = 32
    gangs: int = 6000
    seeds: int = 1
    loads: list[float] = field(default_factory=lambda: [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    point_loads: list[float] = field(default_factory=lambda: [0.515, 0.645])
    waste_pes: list[int] = field(default_factory=lambda: [32, 128, 512, 1024, 4096])
    waste_rounds: int = 20000
    waste_table_pes: int = 4096
    workers: int = 2
    quick: dict[str, Any] = field(default_factory=dict)

    def quick_version(self) -> DhcSpec:
        return replace(self, **self.quick, quick={})


def load_spec(path: str | Path) -> DhcSpec:
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DhcSpecError(f"{p}: {e}", fix="give a readable TOML file") from None
    table = doc.get("dhc")
    if not isinstance(table, dict):
        raise DhcSpecError(f"{p}: no [dhc] table", fix="see experiments/dhc.toml")

    def check(t: dict[str, Any], where: str) -> dict[str, Any]:
        out = {}
        for k, v in t.items():
            want = FIELDS.get(k)
            if want is None:
                raise DhcSpecError(f"{p}: [{where}].{k}: unknown field",
                                   fix=f"one of {', '.join(FIELDS)}")  # fmt: skip
            if not isinstance(v, want) or isinstance(v, bool):
                raise DhcSpecError(f"{p}: [{where}].{k}: want {want.__name__}, got {v!r}",
                                   fix="see experiments/dhc.toml")  # fmt: skip
            if isinstance(v, list) and not all(isinstance(x, int | float) and x > 0 for x in v):
                raise DhcSpecError(f"{p}: [{where}].{k}: want a list of numbers > 0",
                                   fix="e.g. [0.3, 0.5, 0.7]")  # fmt: skip
            if isinstance(v, int) and v < 1:
                raise DhcSpecError(f"{p}: [{where}].{k}: must be >= 1", fix="give a count")
            out[k] = v
        return out

    spec = DhcSpec(**check(table, "dhc"))
    q = doc.get("quick", {})
    if not isinstance(q, dict):
        raise DhcSpecError(f"{p}: [quick] must be a table", fix="see experiments/dhc.toml")
    spec.quick = check(q, "quick")
    try:
        DhcConfig(pes=spec.pes)
        for n in spec.waste_pes:
            DhcConfig(pes=int(n))
    except DhcError as e:
        raise DhcSpecError(f"{p}: {e}", fix="powers of two, e.g. 32") from None
    return spec


# ---- the runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    family: str
    label: str
    cfg: DhcConfig
    dist: str
    load: float
    seed: int


def runs(spec: DhcSpec) -> list[Run]:
    base = DhcConfig(pes=spec.pes)
    loads = sorted(set(spec.loads) | set(spec.point_loads))
    out: list[Run] = []
    for seed in range(1, spec.seeds + 1):
        for load in loads:
            for origin in ("any", "pe0"):
                for b in BALANCING:
                    cfg = replace(base, balancing=b, origin=origin)
                    out.append(Run(f"balancing-{origin}", b, cfg, "harmonic", load, seed))
            for mapping in ("balance", "fragmentation"):
                for sd in (True, False):
                    cfg = replace(base, mapping=mapping, selective=sd)
                    label = f"{mapping}, {'SD' if sd else 'no SD'}"
                    out.append(Run("mapping", label, cfg, "uniform", load, seed))
            for alg, (between, within) in ALGORITHMS.items():
                for sd in (True, False):
                    cfg = replace(base, between=between, within=within, selective=sd)
                    label = f"{alg}{'' if sd else ', no SD'}"
                    out.append(Run("algorithms", label, cfg, "uniform", load, seed))
            for dist in ("uniform", "harmonic", "pow2"):
                out.append(Run("distributions", dist, base, dist, load, seed))
    return out


def _one(args: tuple[Run, int]) -> dict[str, Any]:
    from testbed.sim.dhc import simulate

    run, gangs = args
    r = simulate(run.cfg, run.dist, run.load, gangs=gangs, seed=run.seed)
    return {
        "family": run.family,
        "label": run.label,
        "dist": run.dist,
        "load": run.load,
        "seed": run.seed,
        "config": asdict(run.cfg),
        **r.row(),
        "rf_hist": r.rf_hist,
        "rf_by_size": {str(k): v for k, v in r.rf_by_size.items()},
        "rf_by_exec": r.rf_by_exec,
    }


def waste(spec: DhcSpec) -> dict[str, Any]:
    from testbed.sim import dhcwaste

    out: dict[str, Any] = {"bounds": {}, "fcfs": []}
    for dist, (total, sd) in dhcwaste.BOUNDS.items():
        table = dhcwaste.size_table(dist, spec.waste_table_pes, 200_000)
        out["bounds"][dist] = {
            "paper_total": total,
            "paper_sd": sd,
            "table_total": dhcwaste.offline_total_waste(table),
            "packer_sd": dhcwaste.offline_selective_waste(table, spec.waste_table_pes),
        }
    for dist in ("uniform", "harmonic", "pow2"):
        for n in spec.waste_pes:
            rng = random.Random(int(n) * 7 + len(dist))
            rounds = max(500, spec.waste_rounds * 32 // max(32, int(n)))
            out["fcfs"].append({
                "dist": dist,
                "pes": int(n),
                "unit": dhcwaste.fcfs_unit_waste(dist, int(n), spec.waste_rounds, rng),
                "exp5": dhcwaste.fcfs_exp_waste(dist, int(n), rounds, rng),
            })  # fmt: skip
    return out


def run_study(spec: DhcSpec) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from tqdm import tqdm

    todo = runs(spec)
    t0 = time.monotonic()
    points: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=spec.workers) as pool:
        it = pool.map(_one, [(r, spec.gangs) for r in todo], chunksize=2)
        for p in tqdm(it, total=len(todo), desc="dhc runs", file=sys.stderr, disable=None):
            points.append(p)
    meta = {
        "spec": {k: v for k, v in asdict(spec).items() if k != "quick"},
        "waste": waste(spec),
        "seconds": round(time.monotonic() - t0, 1),
    }
    return points, meta


def save(points: list[dict[str, Any]], meta: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps({"meta": meta, "points": points}, indent=1) + "\n")
    return path


def read_results(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DhcSpecError(
            f"{path}: {e}", fix="run the study first (without --report-only)"
        ) from None
    return list(doc["points"]), dict(doc["meta"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m testbed.experiment.dhc.study",
        description="Feitelson & Rudolph 1996 in the simulator: DHC's load balancing, mapping, "
        "selective "
        "disabling and time division (Table 1, Figs. 2-4, 6-7, 9-12, 19) and the waste "
        "analysis (§4, Fig. 18); writes report.md, PNGs and results.json.",
    )
    ap.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC),
                    help="default experiments/dhc.toml")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="default results/<name>")
    ap.add_argument("--quick", action="store_true", help="the [quick] table (about a minute)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from OUT/results.json")  # fmt: skip
    args = ap.parse_args(argv)
    from testbed.experiment.dhc import report as dhcreport

    try:
        spec = load_spec(args.spec)
        if args.quick:
            spec = spec.quick_version()
        out = args.out or Path("results") / spec.name
        if args.report_only:
            points, meta = read_results(out / "results.json")
        else:
            points, meta = run_study(spec)
            print(save(points, meta, out))
        for p in dhcreport.write_report(points, meta, out):
            print(p)
        for ok, line in dhcreport.findings(points, meta):
            print(("reproduced: " if ok else "differs:    ") + line)
    except CoschedError as e:
        print(f"dhc: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("dhc: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
