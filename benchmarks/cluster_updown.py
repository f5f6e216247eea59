"""How long a local cluster takes to come up and go down, this tree against an earlier one.

Every root test that brings up its own cluster pays both (docs/contributing.md), so
they set a floor under the root tier's time. Runs ``--repeats`` up/down cycles of an
``--nodes``-node cluster (a core split evenly, the gige link, agents started) with this
tree's code and with ``--baseline``'s (a git revision, extracted with ``git archive``),
alternately (ABAB), and prints each cycle, the medians and the after/before ratios.
Root, and the host lock (it makes namespaces, links, cgroups and agents):

    flock /work/host.lock .venv/bin/python benchmarks/cluster_updown.py \\
        [--nodes 2,4] [--repeats 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import site
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from cdc_agent_cost import extract  # the baseline's tree, from git archive

REPO = Path(__file__).resolve().parents[1]
BEFORE = "af782d8"  # agents started with a grace each and stopped one after another

CYCLE = """
import json, sys, tempfile, time
from pathlib import Path
from testbed.cluster import cluster as cm
from testbed.cluster.profiles import parse_profile
n = int(sys.argv[1])
env = cm.Env(state_dir=str(Path(tempfile.mkdtemp()) / "state"))
cfg = cm.ClusterConfig(
    nodes=n, profile=parse_profile("gige"), cpus_per_node=2 / n, python=sys.executable
)
t0 = time.perf_counter(); cm.up(cfg, env); t1 = time.perf_counter()
time.sleep(1.0)  # the agents settle, as a test's first request would let them
t2 = time.perf_counter(); cm.down(env); t3 = time.perf_counter()
print(json.dumps({"up": t1 - t0, "down": t3 - t2}))
"""


def bare_python(into: Path) -> str:
    """An interpreter that has this one's libraries but not cosched installed, so that
    the daemons it starts import cosched from their tree (``-P`` and PYTHONPATH,
    common/daemons.py) rather than from the installed package: each tree's agents
    then run that tree's code."""
    venv.create(into, with_pip=False, symlinks=True)
    pure = next(into.glob("lib/python*/site-packages"))
    # a path line adds the directory but runs none of its .pth files (no editable finder)
    (pure / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return str(into / "bin" / "python")


def cycle(python: str, tree: Path, nodes: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [python, "-c", CYCLE, str(nodes)],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="2,4", help="node counts, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="cycles per tree and size")
    ap.add_argument("--baseline", default=BEFORE, help=f"git revision (default {BEFORE})")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("cluster_updown: needs root (it brings up a local cluster)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(args.baseline, Path(tmp)), "after": REPO}
        python = bare_python(Path(tmp) / "venv")
        print(f"before = {args.baseline}, after = this tree; load {os.getloadavg()[0]:.2f}")
        for nodes in (int(x) for x in args.nodes.split(",")):
            got: dict[str, dict[str, list[float]]] = {k: {"up": [], "down": []} for k in trees}
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    c = cycle(python, tree, nodes)
                    for k in ("up", "down"):
                        got[name][k].append(c[k])
                    print(f"  {nodes} nodes {name:6s} up {c['up']:.2f} s down {c['down']:.2f} s")
            for k in ("up", "down"):
                b, a = (statistics.median(got[t][k]) for t in ("before", "after"))
                print(f"{nodes} nodes {k}: median before {b:.2f} s, after {a:.2f} s, "
                      f"after/before {a / b:.2f}")  # fmt: skip
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
