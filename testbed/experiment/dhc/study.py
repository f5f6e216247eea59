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

    cosched experiment run experiments/dhc.toml [--quick] [--out DIR] [--workers N | --dask ADDR]

The runs go through testbed.sweep (local processes or a Dask cluster), their results kept in
OUT/runs.sqlite as they end, so a second invocation runs only what is missing (docs/sweeps.md).

A spec may run some families only (``families``) and leave out Section 4 (``waste =
false``), as experiments/dhc-table1.toml does for Table 1 over three seeds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.policies.dhc import ALGORITHMS, BALANCING, DhcConfig, DhcError
from testbed.experiment.fields import SpecError, Table
from testbed.sweep import RunSpec, SweepOptions, run_sweep

DEFAULT_SPEC = Path(__file__).resolve().parents[3] / "experiments" / "dhc.toml"
#: the families of runs (module docstring); a spec may run some of them (``families``)
FAMILIES = ("balancing", "mapping", "algorithms", "distributions")
ORIGINS = ("any", "pe0")  # a request from any thread in the system, or always from PE #1
_KEYS = ("name", "pes", "gangs", "seeds", "loads", "point_loads", "waste_pes", "waste_rounds",
         "waste_table_pes", "families", "origins", "waste")  # fmt: skip


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
    families: list[str] = field(default_factory=lambda: list(FAMILIES))
    origins: list[str] = field(default_factory=lambda: list(ORIGINS))  # the balancing family's
    waste: bool = True  # Section 4's analysis (bounds, Fig. 18)
    quick: dict[str, Any] = field(default_factory=dict)

    def quick_version(self) -> DhcSpec:
        return replace(self, **self.quick, quick={})


def _values(t: Table, defaults: DhcSpec) -> dict[str, Any]:
    if t.has("workers"):  # where runs execute is the executor's, not the study's
        raise t.error(
            "workers", "moved to the [executor] table",
            fix="write [executor] then workers = N (or give --workers N; docs/sweeps.md)",
        )  # fmt: skip
    t.only(_KEYS)
    out: dict[str, Any] = {}
    for k in ("pes", "gangs", "seeds", "waste_rounds", "waste_table_pes"):
        if t.has(k):
            out[k] = t.integer(k, minimum=1)
    if t.has("name"):
        out["name"] = t.text("name")
    for k in ("loads", "point_loads"):
        if t.has(k):
            out[k] = t.items(k, (int, float), above=0, nonempty=False, example="[0.3, 0.5, 0.7]")
    if t.has("waste_pes"):
        out["waste_pes"] = t.items("waste_pes", int, minimum=1, example="[32, 256]")
    if t.has("families"):
        out["families"] = t.items("families", str, choices=FAMILIES, unique=True)
    if t.has("origins"):
        out["origins"] = t.items("origins", str, choices=ORIGINS, unique=True)
    if t.has("waste"):
        out["waste"] = t.flag("waste")
    return out


def load_spec(doc: Table) -> DhcSpec:
    """A ``[dhc]`` spec (experiments/dhc.toml) and its ``[quick]`` table."""
    spec = DhcSpec(**_values(doc.table("dhc", required=True), DhcSpec()))
    spec.quick = _values(doc.table("quick"), spec)
    try:
        DhcConfig(pes=spec.pes)
        for n in spec.waste_pes:
            DhcConfig(pes=int(n))
    except DhcError as e:
        raise SpecError(f"{doc.path}: {e}", fix="powers of two, e.g. 32") from None
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
            for origin in spec.origins if "balancing" in spec.families else ():
                for b in BALANCING:
                    cfg = replace(base, balancing=b, origin=origin)
                    out.append(Run(f"balancing-{origin}", b, cfg, "harmonic", load, seed))
            for mapping in ("balance", "fragmentation") if "mapping" in spec.families else ():
                for sd in (True, False):
                    cfg = replace(base, mapping=mapping, selective=sd)
                    label = f"{mapping}, {'SD' if sd else 'no SD'}"
                    out.append(Run("mapping", label, cfg, "uniform", load, seed))
            for alg, (between, within) in (
                ALGORITHMS.items() if "algorithms" in spec.families else ()
            ):
                for sd in (True, False):
                    cfg = replace(base, between=between, within=within, selective=sd)
                    label = f"{alg}{'' if sd else ', no SD'}"
                    out.append(Run("algorithms", label, cfg, "uniform", load, seed))
            for dist in ("uniform", "harmonic", "pow2") if "distributions" in spec.families else ():
                out.append(Run("distributions", dist, base, dist, load, seed))
    return out


RESULT_VERSION = 1  # what run_one returns; raise it when that changes (docs/sweeps.md)


def run_spec(run: Run, gangs: int) -> RunSpec:
    """One fluid run as the sweep executor takes it (everything the result depends on)."""
    params = {"family": run.family, "label": run.label, "config": asdict(run.cfg),
              "dist": run.dist, "load": run.load, "gangs": gangs}  # fmt: skip
    return RunSpec("dhc", params, run.seed, run_one, RESULT_VERSION)


def run_one(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    from testbed.sim.dhc import simulate

    cfg = DhcConfig(**params["config"])
    r = simulate(cfg, params["dist"], params["load"], gangs=params["gangs"], seed=seed)
    return {
        "family": params["family"],
        "label": params["label"],
        "dist": params["dist"],
        "load": params["load"],
        "seed": seed,
        "config": asdict(cfg),
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


def run_study(
    spec: DhcSpec, options: SweepOptions | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    t0 = time.monotonic()
    done = run_sweep([run_spec(r, spec.gangs) for r in runs(spec)], options)
    done.check()  # a failed run: listed, exit status 1 (the others are stored)
    points = [dict(p) for p in done.results if p is not None]
    meta = {
        "spec": {k: v for k, v in asdict(spec).items() if k != "quick"},
        "waste": waste(spec) if spec.waste else None,
        "seconds": round(time.monotonic() - t0, 1),
        "sweep": {
            "ran": done.ran,
            "stored": done.stored,
            "run_seconds": round(done.run_seconds, 1),
        },
    }
    return points, meta
