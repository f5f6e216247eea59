"""Mix 1's pairing margin in the committed 2-node runs (docs/paired-fidelity.md).

From each strict-gang run's CPU ratios (rank 0's CPU over wall), a job's utilization in
its own quanta is ratio x rows / the node's CPU share; the pairing test of Wiseman &
Feitelson 2003 §2.4 is compute + I/O + margin (1 %) < 100 %. Printed beside the paired
runs' matched share and the mix-1 I/O job's paired / gang rate. Run from the repository:
    python docs/results/paired-fig7-q1-quiet-2/mix1_pairing.py
"""

import json
import statistics

SOURCES = [  # (name, results.json, sweep point or None, node CPU share)
    ("Fig. 7 quiet run 1", "docs/results/paired-fig7-q1-quiet/results.json", None, 1.0),
    ("Fig. 8, 2 nodes", "docs/results/paired-fig8-q1/results.json", "nodes2", 1.0),
    ("Fig. 7 quiet run 2", "docs/results/paired-fig7-q1-quiet-2/results.json", None, 1.0),
    ("Fig. 8, 4 nodes", "docs/results/paired-fig8-q1/results.json", "nodes4", 0.5),
    ("Fig. 8, 8 nodes", "docs/results/paired-fig8-q1/results.json", "nodes8", 0.25),
]


def runs_of(path, label):
    with open(path) as f:
        data = json.load(f)["data"]
    if label is None:
        return data["result"]["runs"]
    return next(p["result"]["runs"] for p in data["sweep"]["points"] if p["label"] == label)


def run(runs, config):
    return next(r for r in runs if r["config"] == config and str(r["mix"]) == "1")


for name, path, label, share in SOURCES:
    runs = runs_of(path, label)
    g, p = run(runs, "gang"), run(runs, "paired-fig4-prose")
    rows = int(g["rows"])
    comp = max(j["cpu_ratio"] for j in g["jobs"] if j["kind"] == "compute") * rows / share
    io = next(j["cpu_ratio"] for j in g["jobs"] if j["kind"] == "io") * rows / share
    rate = {
        c: statistics.fmean(j["barriers_per_second"] for j in r["jobs"] if j["kind"] == "io")
        for c, r in (("gang", g), ("paired", p))
    }
    print(
        f"{name}: compute {comp:.3f} + I/O {io:.3f} + margin 0.010 = {comp + io + 0.01:.3f}; "
        f"paired matched {float(p['matching_success_ratio']) * 100:.0f} % of quanta; "
        f"mix-1 I/O paired / gang {rate['paired'] / rate['gang']:.2f}"
    )
