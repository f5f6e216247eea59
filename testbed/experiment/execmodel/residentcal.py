"""The cost of a resident job, live (issue 25; docs/paired-fidelity.md "A cost per resident
job").

Wiseman & Feitelson 2003 ran "an unrestricted number of jobs in the system" under strict
gang; every job placed in the matrix stays on its nodes, frozen outside its row's quanta.
If each such job costs the node something every quantum (the agent's per-job work: it
reads every job's CPU, block I/O and TCP counters for each ack; the controller's per-row
work; memory and caches), a machine holding many jobs runs each of them slower, and a
strict gang that holds more jobs than paired gang loses more. This measures that cost on
the local cluster:

* strict gang (the real controller, ``gang``) at each quantum asked for, on ``nodes``
  nodes with a core each (cpuset);
* ``k`` resident jobs: the synthetic program's compute preset, submitted as *standby*
  (docs/controller.md "Job classes": a standby job runs only while no other job is in
  the matrix on its nodes), run until each has used ``warm_cpu`` CPU seconds (its
  processes started, connected and computing, so their memory and sockets are real),
  then frozen for good once the measured job arrives;
* the measured job: the compute preset for ``duration`` seconds, a production job, alone
  in every quantum (the family skips the standby rows, so nothing switches); its rank 0's
  barriers per second.

Every block runs each ``k`` once, in an order shuffled per block (seeded), so a drifting
host does not fake a slope. Per block the rates are fitted ``rate(k) = a + b k`` (least
squares) and the cost per resident job is ``-b / a``, a fraction of the running job's
speed; its mean and 95 % confidence interval are taken over the blocks (:func:`summarise`).
The residents' CPU while the measured job runs is recorded (it should be ~0: frozen), and
so are the load average and the cores the host spent outside the cluster.

Run it with ``sudo cosched calibrate --only resident`` (merges the figure into the
calibration file, :func:`merge_resident`) or ``python -m
testbed.experiment.execmodel.residentcal`` (prints and writes ``runs.json`` only). Needs
root and the host lock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError

Say = Any  # Callable[[str], None]; kept loose for the CLI's print


@dataclass(frozen=True)
class ResidentConfig:
    """The cluster (harness ClusterSettings) and the measurement."""

    nodes: int = 2
    link: str = "gige"
    cpus_per_node: float | None = 1.0
    cpu_mechanism: str = "cpuset"
    cfs_period_us: int = 100_000
    cgroup: str = "auto"
    quanta: tuple[float, ...] = (1.0,)
    ks: tuple[int, ...] = (0, 1, 2, 4, 8)
    blocks: int = 3
    duration: float = 8.0
    warm_cpu: float = 0.5  # CPU seconds (over its ranks) a resident uses before it counts
    warm_timeout: float = 90.0
    seed: int = 25


# ---------------------------------------------------------------- pure parts
def schedule(ks: Sequence[int], blocks: int, seed: int) -> list[tuple[int, int]]:
    """(block, k) in run order: every block runs each k once, shuffled per block."""
    rng = random.Random(seed)
    out: list[tuple[int, int]] = []
    for b in range(blocks):
        order = list(ks)
        rng.shuffle(order)
        out += [(b, k) for k in order]
    return out


def fit_block(rates: Mapping[int, float]) -> tuple[float, float]:
    """(a, cost) of ``rate(k) = a + b k`` fitted over one block: ``cost = -b / a``, the
    fraction of the running job's speed each resident job costs."""
    pts = sorted(rates.items())
    if len(pts) < 2 or len({k for k, _ in pts}) < 2:
        raise ValueError("a block needs rates at two or more k")
    n = len(pts)
    mk = sum(k for k, _ in pts) / n
    mr = sum(r for _, r in pts) / n
    sxx = sum((k - mk) ** 2 for k, _ in pts)
    b = sum((k - mk) * (r - mr) for k, r in pts) / sxx
    a = mr - b * mk
    if a <= 0:
        raise ValueError(f"fitted rate at k = 0 is {a:g}, not positive")
    return a, -b / a


def _t975(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def interval(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sd, 95 % CI half-width (Student's t), min, max and the values."""
    vals = [float(v) for v in values]
    n = len(vals)
    sd = statistics.stdev(vals) if n > 1 else math.nan
    return {
        "mean": statistics.fmean(vals) if vals else math.nan,
        "sd": sd,
        "ci95": _t975(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan,
        "min": min(vals) if vals else math.nan,
        "max": max(vals) if vals else math.nan,
        "values": vals,
    }


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per quantum: the cost per resident job over the blocks, and each k's rate relative
    to its block's fitted ``a``. ``runs``: {quantum, block, k, rate, ...}."""
    out: dict[str, Any] = {}
    for q in sorted({float(r["quantum"]) for r in runs}, reverse=True):
        mine = [r for r in runs if float(r["quantum"]) == q]
        blocks = sorted({int(r["block"]) for r in mine})
        costs, fits = [], {}
        for b in blocks:
            rates = {int(r["k"]): float(r["rate"]) for r in mine if int(r["block"]) == b}
            with contextlib.suppress(ValueError):
                a, c = fit_block(rates)
                fits[b] = a
                costs.append(c)
        rel: dict[int, list[float]] = {}
        for r in mine:
            fit = fits.get(int(r["block"]))
            if fit:
                rel.setdefault(int(r["k"]), []).append(float(r["rate"]) / fit)
        loads = [float(r["loadavg"]) for r in mine]
        other = [float(r["other_cores"]) for r in mine if r.get("other_cores") is not None]
        out[f"q{q:g}"] = {
            "quantum": q,
            "blocks": len(costs),
            "cost_per_resident": interval(costs),
            "relative_rate": {str(k): interval(v) for k, v in sorted(rel.items())},
            "rate_by_k": {
                str(k): interval([float(r["rate"]) for r in mine if int(r["k"]) == k])
                for k in sorted({int(r["k"]) for r in mine})
            },
            "loadavg": [min(loads), max(loads)] if loads else [],
            "other_cores": [min(other), max(other)] if other else [],
            "resident_cpu_during_max_s": max(
                (float(r.get("resident_cpu_during_s") or 0.0) for r in mine), default=0.0
            ),
        }
    return out


def model_value(summary: Mapping[str, Any], quantum: float = 1.0) -> float:
    """The ``[model] resident_cost`` a summary gives: the mean cost per resident job at
    ``quantum`` (the paper's 1 s), 0 where the mean is negative (more residents cannot
    speed a job up; a negative mean is noise around 0)."""
    s = summary.get(f"q{quantum:g}")
    if s is None:
        raise ValueError(f"no measurement at quantum {quantum:g} s")
    return max(0.0, float(s["cost_per_resident"]["mean"]))


def lines(summary: Mapping[str, Any]) -> list[str]:
    """What the measurement prints."""
    out = []
    for s in summary.values():
        c = s["cost_per_resident"]
        out.append(
            f"quantum {s['quantum']:g} s, {s['blocks']} blocks: cost per resident job "
            f"{c['mean'] * 100:+.3f} % ± {c['ci95'] * 100:.3f} % (95 % CI; sd "
            f"{c['sd'] * 100:.3f} %; per block "
            + ", ".join(f"{v * 100:+.3f} %" for v in c["values"])
            + ")"
        )
        for k, v in s["relative_rate"].items():
            r = s["rate_by_k"][k]
            out.append(
                f"  k = {k:>2}: rate {r['mean']:.2f} barriers/s (min {r['min']:.2f}, max "
                f"{r['max']:.2f}); relative to the block's fit at k = 0: {v['mean']:.4f} "
                f"(min {v['min']:.4f}, max {v['max']:.4f})"
            )
        la, oc = s["loadavg"], s["other_cores"]
        out.append(
            f"  load average {la[0]:.2f}-{la[1]:.2f}; host busy outside the cluster "
            + (f"{oc[0]:.2f}-{oc[1]:.2f} cores" if oc else "not measured")
            + f"; residents' CPU while the measured job ran: at most "
            f"{s['resident_cpu_during_max_s']:.3f} s"
        )
    return out


def merge_resident(
    existing: str, summary: Mapping[str, Any], runs: Sequence[Mapping[str, Any]],
    host: Mapping[str, Any],
) -> str:  # fmt: skip
    """An existing calibration file with ``[model] resident_cost`` and
    ``[measured.resident]`` put in (``cosched calibrate --only resident``), the rest kept."""
    import tomllib

    from testbed.experiment.execmodel.calibrate import calibration_text

    doc = tomllib.loads(existing)
    model = dict(doc.get("model", {}))
    model["resident_cost"] = round(model_value(summary), 6)
    measured = dict(doc.get("measured", {}))
    measured["resident"] = {
        key: {
            "quantum": s["quantum"],
            "blocks": s["blocks"],
            "cost_per_resident": _finite(s["cost_per_resident"]),
            "loadavg": s["loadavg"],
            "other_cores": s["other_cores"],
            "ks": [int(k) for k in s["rate_by_k"]],
            "rates": [float(r["rate"]) for r in runs if float(r["quantum"]) == s["quantum"]],
            "run_ks": [int(r["k"]) for r in runs if float(r["quantum"]) == s["quantum"]],
            "run_blocks": [int(r["block"]) for r in runs if float(r["quantum"]) == s["quantum"]],
        }
        for key, s in summary.items()
    }
    host_doc = dict(doc.get("host", {}))
    host_doc["resident"] = dict(host)
    return calibration_text(model, measured, host_doc)


def _finite(d: Mapping[str, Any]) -> dict[str, Any]:
    """TOML has no NaN worth writing: drop what is not finite."""
    return {k: v for k, v in d.items() if not (isinstance(v, float) and not math.isfinite(v))}


# ---------------------------------------------------------------- live parts
def compute_argv(seconds: float) -> list[str]:
    """The synthetic program's compute preset (as benchmarks/gang_efficiency.py runs it)."""
    return [sys.executable, "-m", "apps.synthetic", "--preset", "compute",
            "--duration", f"{seconds:g}", "--connect-timeout", "120"]  # fmt: skip


def _cpu(client: Any, ids: Sequence[int]) -> dict[int, float]:
    from testbed.experiment.harness.jobs import records

    recs = records(client)
    return {j: float(recs[j].get("cpu_s") or 0.0) for j in ids if j in recs}


def run_one(
    state: str, cfg: ResidentConfig, quantum: float, k: int, run_dir: Path, say: Say
) -> dict[str, Any]:
    """One measured job beside ``k`` residents under strict gang at ``quantum``."""
    from controller.client import ControllerError
    from testbed.experiment.harness import hostload
    from testbed.experiment.harness import jobs as hj
    from testbed.experiment.harness.cluster import cluster_cpu_reader
    from testbed.experiment.harness.controller import controller

    reader = cluster_cpu_reader()
    with controller(state, "gang", quantum, run_dir) as c:
        residents = [
            hj.submit(c, f"resident-{i}", cfg.nodes, compute_argv(3600.0), job_class="standby")
            for i in range(k)
        ]
        try:
            deadline = time.monotonic() + cfg.warm_timeout
            warm = _cpu(c, residents)
            while residents and min(warm.get(j, 0.0) for j in residents) < cfg.warm_cpu:
                if time.monotonic() > deadline:
                    raise LiveError(
                        f"residents did not reach {cfg.warm_cpu:g} CPU s within "
                        f"{cfg.warm_timeout:g} s: {warm}"
                    )
                time.sleep(0.25)
                warm = _cpu(c, residents)
            before = hostload.sample(reader)
            load = os.getloadavg()[0]
            jid = hj.submit(c, "measured", cfg.nodes, compute_argv(cfg.duration),
                            estimate=4 * cfg.duration)  # fmt: skip
            # the residents' CPU from the measured job's first charged quantum to its last
            # poll while running: frozen, it should not move (from the job's launch
            # instead, the window took in the residents' last quantum, acked after it)
            first: dict[int, float] | None = None
            last: dict[int, float] = {}
            end = time.monotonic() + 10 * cfg.duration + 60
            while True:
                recs = hj.records(c)
                state_now = recs[jid]["state"]
                if state_now in hj.TERMINAL:
                    break
                if time.monotonic() > end:
                    with contextlib.suppress(ControllerError, OSError):
                        c.request("kill", job_id=jid)
                    raise LiveError(f"the measured job did not end within {end:g} s")
                if float(recs[jid].get("cpu_s") or 0.0) > 0 and residents:
                    now_cpu = {j: float(recs[j].get("cpu_s") or 0.0) for j in residents}
                    if first is None:
                        first = now_cpu
                    last = now_cpu
                time.sleep(0.25)
            after = hostload.sample(reader)
            rep = hj.rank0_report(c, jid)
            rate = float(rep.get("barriers_per_second") or 0.0)
            if recs[jid]["state"] != "done" or rate <= 0:
                raise LiveError(f"measured job ended {recs[jid]['state']} (rate {rate})")
        finally:
            for j in residents:
                with contextlib.suppress(ControllerError, OSError):
                    c.request("kill", job_id=j)
            if residents:
                with contextlib.suppress(LiveError):
                    hj.wait_ended(c, residents, 60)
    during = max(last[j] - first[j] for j in residents) if residents and first is not None else 0.0
    return {
        "quantum": quantum,
        "k": k,
        "rate": rate,
        "cpu_ratio": rep.get("cpu_ratio"),
        "runq_s": rep.get("runq_seconds"),
        "loadavg": round(load, 2),
        "other_cores": hostload.other_cores(before, after),
        "resident_warm_cpu_s": [round(v, 3) for v in warm.values()],
        "resident_cpu_during_s": round(during, 4),
    }


def measure(cfg: ResidentConfig, work: Path, say: Say) -> list[dict[str, Any]]:
    """Every quantum's blocks on one cluster; the runs in the order they ran."""
    from testbed.experiment.harness.cluster import local_cluster, require_root

    require_root("the resident-cost measurement")
    runs: list[dict[str, Any]] = []
    with local_cluster(cfg, False, say) as info:
        say(f"cgroups {info['cgroups']}, cpu {info['cpu']}; strict gang; measured job "
            f"{cfg.duration:g} s; k in {list(cfg.ks)}, {cfg.blocks} blocks per quantum; "
            f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        for q in cfg.quanta:
            for n, (block, k) in enumerate(schedule(cfg.ks, cfg.blocks, cfg.seed)):
                t0 = time.monotonic()
                row = run_one(info["state"], cfg, q, k, work / f"q{q:g}-{n}-k{k}", say)
                row.update(block=block, order=n, wall_s=round(time.monotonic() - t0, 1))
                runs.append(row)
                say(f"q {q:g} s block {block + 1} k = {k:>2}: {row['rate']:.2f} barriers/s, "
                    f"load average {row['loadavg']:.2f}, outside "
                    f"{row['other_cores'] or 0.0:.2f} cores, residents' CPU meanwhile "
                    f"{row['resident_cpu_during_s']:.3f} s ({row['wall_s']:g} s)")  # fmt: skip
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quanta", default="1", help="comma-separated seconds (default 1)")
    ap.add_argument("--ks", default="0,1,2,4,8", help="resident counts (default 0,1,2,4,8)")
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0, help="measured job, s")
    ap.add_argument("--out", type=Path, default=None, help="directory for runs.json")
    a = ap.parse_args(argv)
    try:
        cfg = ResidentConfig(
            quanta=tuple(float(x) for x in a.quanta.split(",")),
            ks=tuple(int(x) for x in a.ks.split(",")),
            blocks=a.blocks,
            duration=a.duration,
        )
    except ValueError as e:
        print(f"residentcal: bad --quanta or --ks: {e}", file=sys.stderr)
        return 2
    if len(set(cfg.ks)) < 2 or min(cfg.ks) < 0 or cfg.blocks < 2:
        print("residentcal: --ks needs two or more counts >= 0, --blocks >= 2", file=sys.stderr)
        return 2
    work = Path(f"/tmp/cosched-resident-{os.getpid()}")
    try:
        runs = measure(cfg, work, lambda s: print(s, flush=True))
    except LiveError as e:
        print(f"residentcal: {e}", file=sys.stderr)
        return 2
    summary = summarise(runs)
    print()
    print("\n".join(lines(summary)))
    if a.out is not None:
        from testbed.experiment.harness import hostload

        a.out.mkdir(parents=True, exist_ok=True)
        doc = {"config": asdict(cfg), "host": hostload.host_record(), "runs": runs,
               "summary": summary}  # fmt: skip
        (a.out / "runs.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"data: {a.out / 'runs.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
