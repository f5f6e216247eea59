"""Strict gang's two-job efficiency under cgroup v1 and under cgroup2, alternated (root).

Issue 32 item 1: the same switch workload on both hierarchies, and the ratio. Each
round runs benchmarks/gang_efficiency.py (``--pairs`` interleaved dedicated/gang
pairs at ``--quantum``) once with the host as it is (hybrid: the agents pick v1) and
once with the host made cgroup-v2-only (``cosched host cgroups v2-only``; the agents
pick cgroup2 for every resource), v1 first in odd rounds and v2 first in even ones,
then gives the v1 hierarchies back (``restore``), also when a block fails. Printed:
each block's mean "two together / one alone", and per round and overall the
v2 / v1 ratio of those means (target >= 0.97), with their spread.

Needs root and the host lock; the host must be hybrid with nothing of cosched on it:

    sudo flock /work/host.lock .venv/bin/python benchmarks/gang_efficiency_v1_v2.py \\
        [--rounds 2] [--pairs 2] [--quantum 0.1] [--seconds 6] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COSCHED = [sys.executable, "-m", "testbed.cli"]


def host(action: str) -> str:
    out = subprocess.run([*COSCHED, "host", "cgroups", action], cwd=REPO, text=True,
                         capture_output=True)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"cosched host cgroups {action}: {out.stderr.strip() or out.stdout}")
    return out.stdout.strip()


def block(kind: str, a: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One gang_efficiency run on the host as ``kind`` (v1 or v2) leaves it."""
    cmd = [sys.executable, str(REPO / "benchmarks" / "gang_efficiency.py"), "--quantum",
           str(a.quantum), "--pairs", str(a.pairs), "--seconds", str(a.seconds),
           "--cgroup", kind, "--out", str(out)]  # fmt: skip
    r = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True)
    print("\n".join("    " + line for line in r.stdout.splitlines()), flush=True)
    if r.returncode != 0:
        raise RuntimeError(f"gang_efficiency ({kind}) failed: {r.stderr.strip()}")
    doc: dict[str, Any] = json.loads(out.read_text())
    ratios = [p["ratio"] for p in doc["pairs"]]
    doc["mean_ratio"] = statistics.fmean(ratios)
    doc["kind"] = kind
    doc["missed"] = sum(int(p["gang_quanta"]["missed_boundaries"] or 0) for p in doc["pairs"])
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="v1 and v2 blocks, alternated")
    ap.add_argument("--pairs", type=int, default=2, help="gang_efficiency pairs per block")
    ap.add_argument("--quantum", type=float, default=0.1, help="seconds")
    ap.add_argument("--seconds", type=float, default=6.0, help="each job's duration")
    ap.add_argument("--out", type=Path, default=None, help="directory for each block's JSON")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("gang_efficiency_v1_v2: needs root (it switches the host's cgroups)",
              file=sys.stderr)  # fmt: skip
        return 2
    status = host("status")
    if not status.startswith("hybrid"):
        print(f"gang_efficiency_v1_v2: the host must start hybrid (cosched host cgroups "
              f"status: {status}); run `cosched host cgroups restore`",
              file=sys.stderr)  # fmt: skip
        return 2
    out = a.out or Path(tempfile.mkdtemp(prefix="cosched-eff-v1v2-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"gang at {a.quantum:g} s quanta, {a.pairs} pairs a block, {a.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    rounds: list[dict[str, Any]] = []
    try:
        for k in range(a.rounds):
            order = ("v1", "v2") if k % 2 == 0 else ("v2", "v1")
            res: dict[str, Any] = {}
            for kind in order:
                if kind == "v2":
                    host("v2-only")
                try:
                    print(f"round {k + 1}, {kind} (load average {os.getloadavg()[0]:.2f}):",
                          flush=True)  # fmt: skip
                    res[kind] = block(kind, a, out / f"round{k + 1}-{kind}.json")
                finally:
                    if kind == "v2":
                        subprocess.run([*COSCHED, "clean"], cwd=REPO, capture_output=True)
                        host("restore")
            r = res["v2"]["mean_ratio"] / res["v1"]["mean_ratio"]
            rounds.append({"order": list(order), "v1": res["v1"]["mean_ratio"],
                           "v2": res["v2"]["mean_ratio"], "v2_over_v1": r})  # fmt: skip
            print(f"round {k + 1} ({' then '.join(order)}): v1 {res['v1']['mean_ratio']:.3f}, "
                  f"v2 {res['v2']['mean_ratio']:.3f}, v2 / v1 {r:.3f}; missed boundaries "
                  f"v1 {res['v1']['missed']}, v2 {res['v2']['missed']}", flush=True)  # fmt: skip
    except RuntimeError as e:
        print(f"gang_efficiency_v1_v2: {e}", file=sys.stderr)
        return 2
    rs = [r["v2_over_v1"] for r in rounds]
    sd = statistics.stdev(rs) if len(rs) > 1 else 0.0
    v1 = statistics.fmean(r["v1"] for r in rounds)
    v2 = statistics.fmean(r["v2"] for r in rounds)
    verdict = "met" if statistics.fmean(rs) >= 0.97 else "not met"
    print(f"\nover {len(rs)} rounds: two together / one alone v1 {v1:.3f}, v2 {v2:.3f}; "
          f"v2 / v1 mean {statistics.fmean(rs):.3f}, min {min(rs):.3f}, max {max(rs):.3f}, "
          f"sd {sd:.3f} (issue 32 target >= 0.97: {verdict})")  # fmt: skip
    (out / "summary.json").write_text(json.dumps({"quantum": a.quantum, "rounds": rounds}) + "\n")
    print(f"data: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
