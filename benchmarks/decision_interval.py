"""The agents' decision interval (a cluster option) against their CPU and CC-B vs SB, live.

For each interval (1, 2, 5, 10 ms by default, in ABAB order over ``--repeats``
rounds) it brings up the 4-node cluster of experiments/cdc-policies.toml --
two fast nodes and two at 1.8/2.8 of their speed (``--speeds``), CFS
bandwidth -- with ``cosched cluster up --decision-interval-ms`` and runs that
spec's quick job stream under SB and CC-B, the controller leaving the tick to
the agents. Per run it prints the mean response, BCR and MD the agents
counted, the agents' own CPU (summed over the nodes, in cores, from their
``cdc.agent_cpu_s`` over the run's wall time) and the host's CPU spent
outside the cluster (testbed/experiment/harness/hostload.py). Needs root and the
host lock; about 10 minutes:

    sudo flock /work/host.lock .venv/bin/python benchmarks/decision_interval.py \\
        --out docs/results/cdc-decision-interval
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.cluster import cluster as cluster_mod
from testbed.cluster.profiles import parse_profile
from testbed.experiment.cdc.run import run_streams
from testbed.experiment.cdc.stream import load_stream_spec
from testbed.experiment.fields import Table, read_toml
from testbed.experiment.harness import hostload

SPEC = Path(__file__).resolve().parents[1] / "experiments" / "cdc-policies.toml"


def one(spec: Any, interval: float, out: Path) -> list[dict[str, Any]]:
    """Cluster up at ``interval``, the quick stream under SB and CC-B, cluster down."""
    cfg = cluster_mod.ClusterConfig(
        nodes=spec.nodes,
        profile=parse_profile(spec.link),
        cpus_per_node=spec.cpus_per_node,
        cpu_mechanism=spec.cpu_mechanism,
        cfs_period_us=spec.cfs_period_us,
        cgroup=spec.cgroup,
        speeds=spec.speeds,
        decision_interval_ms=interval,
    )
    st = cluster_mod.up(cfg)
    try:
        reader = hostload.cluster_cpu_reader(st)
        before = hostload.sample(reader)
        res = run_streams(spec, out, reuse_cluster=True, say=lambda s: None)
        # the raw data of the benchmark's runs, not a study's results.json
        (out / "stream.json").write_text(res.to_json() + "\n")
        other = hostload.other_cores(before, hostload.sample(reader))
    finally:
        cluster_mod.down()
    rows = []
    for r in res.runs:
        cdc = r.cdc or {}
        rows.append(
            {
                "interval_ms": interval,
                "scheme": r.scheme,
                "response_s": r.avg("response_s"),
                "bcr": r.bcr,
                "md_ms": None if r.md_mean_s is None else r.md_mean_s * 1e3,
                "decisions": cdc.get("decisions"),
                "agent_cpu_s": cdc.get("agent_cpu_s"),
                "wall_s": r.wall_seconds,
                "agent_cores": (cdc.get("agent_cpu_s") or 0.0) / r.wall_seconds
                if r.wall_seconds
                else None,
                "host_other_cores": other,
                "done": len(r.done()),
                "jobs": len(r.jobs),
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--intervals", default="1,2,5,10", help="ms, comma-separated")
    ap.add_argument("--repeats", type=int, default=2, help="rounds (ABAB order)")
    ap.add_argument("--out", type=Path, default=Path("results/cdc-decision-interval"))
    args = ap.parse_args()
    spec = load_stream_spec(Table.document(read_toml(SPEC), SPEC)).quick_version()
    spec = dataclasses.replace(spec, schemes=("sb", "cc-b"), tick_ms=None)
    intervals = [float(x) for x in args.intervals.split(",")]
    rows: list[dict[str, Any]] = []
    for k in range(args.repeats):
        order = intervals if k % 2 == 0 else intervals[::-1]
        for d in order:
            rows += one(spec, d, args.out / f"{d:g}ms-round{k + 1}")
            r = rows[-2:]
            print(
                f"{d:5g} ms round {k + 1}: "
                + "; ".join(
                    f"{x['scheme']} response {x['response_s']:.2f} s, BCR {x['bcr']:.3f}, "
                    f"MD {x['md_ms']:.2f} ms, agents {x['agent_cores']:.3f} cores"
                    for x in r
                )
                + f"; host busy outside the cluster {r[-1]['host_other_cores']:.2f} cores",
                flush=True,
            )
    print(
        f"\n{'interval':>9}{'SB resp s':>11}{'CC-B resp s':>13}{'CC-B/SB':>9}{'agents cores':>14}"
    )
    for d in intervals:
        sb = [x for x in rows if x["interval_ms"] == d and x["scheme"] == "sb"]
        cc = [x for x in rows if x["interval_ms"] == d and x["scheme"] == "cc-b"]
        m_sb = sum(x["response_s"] for x in sb) / len(sb)
        m_cc = sum(x["response_s"] for x in cc) / len(cc)
        cores = sum(x["agent_cores"] for x in sb + cc) / len(sb + cc)
        print(f"{d:>7g} ms{m_sb:>11.2f}{m_cc:>13.2f}{m_cc / m_sb:>9.2f}{cores:>14.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"host": hostload.host_record(), "spec": str(SPEC), "rows": rows}
    (args.out / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"data: {args.out}/summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
