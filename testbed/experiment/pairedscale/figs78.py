"""Wiseman & Feitelson 2003 Figs. 7 and 8: the live runs (``cosched experiment run``'s
results.json), their simulated counterpart (mixes.py) and the paper's statements, side by
side with a verdict each (issue 25).

    python -m testbed.experiment.pairedscale.figs78 LIVE/results.json --out DIR
        [--calibration experiments/calibration.toml]

The live results may be one configuration (Fig. 7) or a ``[sweep] nodes`` (Fig. 8).
Each point is simulated with job types calibrated from its own live runs
(:func:`types_from_live`): under strict gang each of the four jobs runs one quantum in
four, so a type's dedicated rate and CPU share are four times what it showed in the
mix of four of its kind (mix 0 for compute, mix 4 for I/O); its device share is the
device time of its writes per barrier times that rate; the interference of a compute
job beside an I/O job, which no gang run shows, is calibrate's
(``[measured.derived]``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.experiment.pairedscale.report import (
    DIRECTION,
    NOT_REPRODUCED,
    REPRODUCED,
    TOLERANCE,
    Claim,
)

Rates = dict[tuple[str, int, str], float]  # (config, mix, kind) -> barriers per second


def unwrap(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A paired-live results.json's own data: the envelope (testbed/experiment/results.py)
    holds one run (``result``) or a sweep (``sweep``)."""
    if "kind" in doc and "data" in doc:
        data: Mapping[str, Any] = doc["data"]
        inner: Mapping[str, Any] = data.get("result") or data["sweep"]
        return inner
    return doc


def live_points(doc: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """(nodes, one point's result) for a single run or a nodes sweep."""
    doc = unwrap(doc)
    if "points" in doc:
        return [(int(p["value"]), p["result"]) for p in doc["points"]]
    return [(int(doc["spec"]["nodes"]), doc)]


def live_rates(result: Mapping[str, Any]) -> tuple[Rates, dict[tuple[str, int], float | None]]:
    """Mean barriers per second per (config, mix, kind), and each run's host load."""
    rates: Rates = {}
    busy: dict[tuple[str, int], float | None] = {}
    for run in result["runs"]:
        by: dict[str, list[float]] = {}
        for j in run["jobs"]:
            if j.get("barriers_per_second") is not None:
                by.setdefault(j["kind"], []).append(float(j["barriers_per_second"]))
        for kind, vs in by.items():
            rates[(run["config"], int(run["mix"]), kind)] = sum(vs) / len(vs)
        busy[(run["config"], int(run["mix"]))] = run.get("other_cores")
    return rates, busy


def types_from_live(result: Mapping[str, Any], calibration: Path) -> dict[str, Any]:
    """Job types from a point's own strict-gang runs (module docstring)."""
    from testbed.experiment.pairedscale.mixes import job_types

    spec = result["spec"]
    io = spec["io"]
    out = dict(job_types(calibration, int(io["gio"]), float(io["device_latency"])))
    for kind, mix in (("compute", 0), ("io", 4)):
        run = next(
            (r for r in result["runs"] if r["config"] == "gang" and int(r["mix"]) == mix), None
        )
        if run is None:
            continue
        jobs = [j for j in run["jobs"] if j["kind"] == kind and j.get("barriers_per_second")]
        if not jobs:
            continue
        k = len(run["jobs"])  # one quantum in k
        rate = k * sum(float(j["barriers_per_second"]) for j in jobs) / len(jobs)
        cpu = min(1.0, k * sum(float(j["cpu_ratio"] or 0.0) for j in jobs) / len(jobs))
        dev = int(io["gio"]) * float(io["device_latency"]) * rate if kind == "io" else 0.0
        out[kind] = {"rate": rate, "cpu": cpu, "device": min(1.0, dev)}
    out["source"] = "the live strict-gang runs (rates, CPU); " + str(calibration)
    return out


def sim_rates(
    types: Mapping[str, Any], spec: Mapping[str, Any], nodes: int, configs: Sequence[str]
) -> Rates:
    from testbed.experiment.pairedscale.mixes import plan
    from testbed.sweep import SweepOptions, run_sweep

    io = spec["io"]
    device = io.get("device", "rank") == "node"
    specs = plan(
        types,
        mixes=tuple(int(m) for m in spec["mixes"]),
        configs=tuple(configs),
        nodes=nodes,
        quantum=float(spec["quantum"]),
        duration=float(spec["duration"]),
        device=device,
    )
    res = run_sweep(specs, SweepOptions(progress=False, desc="simulated mixes"))
    out: Rates = {}
    for r in res.results:
        if r is None:
            continue
        for kind, v in r["rates"].items():
            out[(str(r["config"]), int(r["mix"]), kind)] = float(v)
    return out


def _gain(rates: Rates, config: str, mix: int, kind: str) -> float:
    g, p = rates.get(("gang", mix, kind)), rates.get((config, mix, kind))
    return p / g if g and p is not None else math.nan


def claims(live: Rates, config: str) -> list[Claim]:
    """Fig. 7's statements (§4.1.2) on one configuration's live rates."""
    out: list[Claim] = []

    def verdict(ok_dir: bool, within: bool | None) -> str:
        if not ok_dir:
            return NOT_REPRODUCED
        return REPRODUCED if within in (True, None) else DIRECTION

    g0 = _gain(live, config, 0, "compute")
    out.append(Claim("wiseman2003/fig7/mix0", "§4.1.2, Fig. 7",
                     "compute-bound jobs only: no meaningful difference (nothing to pair)",
                     f"paired ÷ gang {g0:.2f}", verdict(abs(g0 - 1) <= 0.1, True),
                     "within ±10 % taken as no difference"))  # fmt: skip
    g1 = _gain(live, config, 1, "io")
    lo, hi = 4 * (1 - TOLERANCE), 4 * (1 + TOLERANCE)
    out.append(Claim("wiseman2003/fig7/mix1-io", "§4.1.2, Fig. 7",
                     'one I/O job with three compute jobs advances "almost four times faster"',
                     f"paired ÷ gang {g1:.2f}", verdict(g1 > 1, lo <= g1 <= hi),
                     f"tolerance ±{TOLERANCE:.0%}: {lo:.1f}–{hi:.1f}; one run per cell, so "
                     "no seed spread"))  # fmt: skip
    c1 = _gain(live, config, 1, "compute")
    out.append(Claim("wiseman2003/fig7/mix1-compute", "§4.1.2, Fig. 7",
                     '"without compromising the performance of the compute-bound jobs"',
                     f"paired ÷ gang {c1:.2f}", verdict(c1 >= 0.9, None),
                     "at least 0.9× taken as not compromised"))  # fmt: skip
    both = [(m, k, _gain(live, config, m, k)) for m in (2, 3) for k in ("compute", "io")]
    out.append(
        Claim(
            "wiseman2003/fig7/both-gain",
            "§4.1.2, Fig. 7",
            "both types gain, especially with two or three of the other type",
            ", ".join(f"mix {m} {k} {v:.2f}×" for m, k, v in both),
            verdict(all(v > 1 for _, _, v in both), None),
            "every gain above 1",
        )
    )
    several = [_gain(live, config, m, "io") for m in (2, 3, 4)]
    ok = all(v < g1 for v in several)
    out.append(Claim("wiseman2003/fig7/disk-contention", "§4.1.2, Fig. 7",
                     "several I/O jobs gain less: they interfere when writing to the disk, "
                     "which becomes the bottleneck",
                     "I/O gain in mixes 2–4 " + ", ".join(f"{v:.2f}×" for v in several)
                     + f" against {g1:.2f}× in mix 1", verdict(ok, None),
                     "each below mix 1's"))  # fmt: skip
    return out


def fig8_claims(by_nodes: Mapping[int, Rates], config: str) -> list[Claim]:
    sizes = sorted(by_nodes)
    if len(sizes) < 2:
        return []
    out = []
    c0 = [_gain(by_nodes[n], config, 0, "compute") for n in sizes]
    out.append(Claim("wiseman2003/fig8/compute-only", "§4.1.2, Fig. 8",
                     "all compute-bound: the size has no real impact",
                     "paired ÷ gang " + ", ".join(f"{n} nodes {v:.2f}" for n, v in
                                                  zip(sizes, c0, strict=True)),
                     REPRODUCED if all(abs(v - 1) <= 0.15 for v in c0) else DIRECTION,
                     "within ±15 % at every size"))  # fmt: skip
    io = [by_nodes[n].get(("gang", 1, "io"), math.nan) for n in sizes]
    out.append(Claim("wiseman2003/fig8/io-falls", "§4.1.2, Fig. 8",
                     "I/O-bound jobs progress slower on larger clusters (their I/O goes to "
                     "one server, which congests)",
                     "mix 1 I/O job under strict gang, barriers/s: " + ", ".join(
                         f"{n} nodes {v:.2f}" for n, v in zip(sizes, io, strict=True)),
                     REPRODUCED if io[-1] < 0.9 * io[0] else NOT_REPRODUCED,
                     "a fall of more than 10 % from the smallest to the largest size"))  # fmt: skip
    cg = [_gain(by_nodes[n], config, 3, "compute") for n in sizes]
    out.append(Claim("wiseman2003/fig8/compute-gains-with-size", "§4.1.2, Fig. 8",
                     "with enough I/O jobs the compute jobs' gain grows with the size",
                     "mix 3 compute paired ÷ gang " + ", ".join(
                         f"{n} nodes {v:.2f}" for n, v in zip(sizes, cg, strict=True)),
                     REPRODUCED if cg[-1] > cg[0] else NOT_REPRODUCED,
                     "larger at the largest size than at the smallest"))  # fmt: skip
    return out


def markdown(
    live_doc: Mapping[str, Any], calibration: Path, title: str
) -> tuple[str, dict[str, Any]]:
    points = live_points(live_doc)
    lines = [f"# {title}", ""]
    data: dict[str, Any] = {"points": []}
    by_nodes_live: dict[int, Rates] = {}
    by_nodes_sim: dict[int, Rates] = {}
    cl: list[Claim] = []
    for nodes, result in points:
        spec = result["spec"]
        configs = list(spec["configs"])
        live, busy = live_rates(result)
        types = types_from_live(result, calibration)
        sim = sim_rates(types, spec, nodes, configs)
        by_nodes_live[nodes], by_nodes_sim[nodes] = live, sim
        cpus = spec.get("cpus_per_node")
        lines += [
            f"## {nodes} nodes ({cpus:g} CPU each)" if cpus else f"## {nodes} nodes",
            "",
            f"Quantum {spec['quantum']:g} s, {spec['duration']:g} s per mix, I/O jobs on the "
            f"{_device(spec)}. Barriers per second, mean per job of each type: live / "
            "simulated; in brackets paired ÷ strict gang. Host CPU busy outside the "
            "experiment during each live run in the last column (cores, one per "
            "configuration). Simulated job types: compute "
            f"{types['compute']['rate']:.2f} barriers/s alone at CPU "
            f"{types['compute']['cpu']:.2f}; I/O {types['io']['rate']:.2f} barriers/s at "
            f"CPU {types['io']['cpu']:.2f}, device share {types['io']['device']:.2f}; "
            f"interference {types['interference']:.3f}.",
            "",
            "| mix | job | " + " | ".join(configs) + " | host busy (cores) |",
            "|---|---|" + "---|" * len(configs) + "---|",
        ]
        for mix in spec["mixes"]:
            for kind in ("compute", "io"):
                if (configs[0], mix, kind) not in live:
                    continue
                cells = []
                for c in configs:
                    lv, sv = live.get((c, mix, kind)), sim.get((c, mix, kind))
                    cell = f"{lv:.2f} / {sv:.2f}" if lv is not None and sv is not None else "—"
                    if c != "gang":
                        gl, gs = _gain(live, c, mix, kind), _gain(sim, c, mix, kind)
                        cell += f" ({gl:.2f}× / {gs:.2f}×)"
                    cells.append(cell)
                b = [busy.get((c, mix)) for c in configs]
                bs = ", ".join("?" if x is None else f"{x:.2f}" for x in b)
                lines.append(f"| {mix} | {kind} | " + " | ".join(cells) + f" | {bs} |")
        diffs = [(sim[k] - live[k]) / live[k] for k in live if k in sim and live[k] > 0]
        within = sum(abs(d) <= 0.2 for d in diffs)
        lines += [
            "",
            f"Simulated against live: {within} of {len(diffs)} cells within 20 % "
            f"(median {sorted(diffs)[len(diffs) // 2]:+.0%}, range {min(diffs):+.0%} … "
            f"{max(diffs):+.0%}).",
            "",
        ]
        data["points"].append(
            {"nodes": nodes, "types": types, "live": _keyed(live), "sim": _keyed(sim)}
        )
        main = next((c for c in configs if c.startswith("paired")), None)
        if main is not None and len(points) == 1:
            cl += claims(live, main)
    if len(points) > 1:
        main = next(c for c in points[0][1]["spec"]["configs"] if c.startswith("paired"))
        cl += fig8_claims(by_nodes_live, main)
        for nodes, _ in points:
            cl += [Claim(c.id + f"/{nodes}n", c.where, c.says, c.measured, c.verdict, c.why)
                   for c in claims(by_nodes_live[nodes], main)[1:2]]  # fmt: skip
    # one live run per cell: no seed-to-seed spread, so direction only at best (claims.RULES)
    cl = [
        Claim(c.id, c.where, c.says, c.measured, DIRECTION, c.why + "; one live run per cell, "
              "no spread to tell it from noise") if c.verdict == REPRODUCED else c
        for c in cl
    ]  # fmt: skip
    lines += ["## The paper beside ours", "", "| where | the paper says | we measured | verdict |",
              "|---|---|---|---|"]  # fmt: skip
    for c in cl:
        lines.append(f"| {c.where} | {c.says} | {c.measured} | **{c.verdict}** ({c.why}) |")
    lines.append("")
    data["claims"] = [c.__dict__ for c in cl]
    return "\n".join(lines), data


def _device(spec: Mapping[str, Any]) -> str:
    if spec["io"].get("device") == "node":
        return "node's shared device"
    return "rank's own device (a sleep)"


def _keyed(r: Rates) -> dict[str, float]:
    return {f"{c}/{m}/{k}": v for (c, m, k), v in sorted(r.items())}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.experiment.pairedscale.figs78")
    ap.add_argument("live", type=Path, help="the live run's results.json")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--calibration", type=Path, default=Path("experiments/calibration.toml"))
    ap.add_argument("--title", default="Wiseman & Feitelson 2003 Figs. 7–8: live and simulated")
    args = ap.parse_args(argv)
    doc = json.loads(args.live.read_text())
    text, data = markdown(doc, args.calibration, args.title)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.md").write_text(text)
    (args.out / "compare.json").write_text(json.dumps(data, indent=1) + "\n")
    print(args.out / "compare.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
