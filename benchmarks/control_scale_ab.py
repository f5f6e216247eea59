"""The controller's cost behind relays, this tree against an earlier one, interleaved (ABAB).

Runs benchmarks/control_scale.py of ``--baseline`` (a git revision, extracted with
``git archive``; default the commit before relays summarised their acks) and of this
tree alternately, ``--repeats`` pairs per policy, at ``--nodes`` emulated nodes behind
about sqrt(N) relays, and prints each run's target line (controller CPU per quantum as
% of a core at 100 ms quanta, plan + fan-out p99 in CPU time) and the after/before
ratio of the controller's CPU per pair. The baseline's benchmark timed the plan in wall
time inside its "CPU time" figure (fixed since), so that column of the before runs is an
upper bound. Loopback and fake cgroups only: no root, no lock.

    .venv/bin/python benchmarks/control_scale_ab.py [--nodes 1024] [--quanta 30] \\
        [--policies paired-gang,gang] [--repeats 2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cdc_agent_cost import extract  # the baseline's tree, from git archive

REPO = Path(__file__).resolve().parents[1]
BEFORE = "13c14bb"  # relays forwarded every node's ack (issue 32, item 4)
TARGET = re.compile(
    r"^  (?P<label>\S+): plan \+ fan-out p99 (?P<pf>[\d.]+) ms .*?in CPU time (?P<pfc>[\d.]+) ms"
    r".*?CPU (?P<cpu>[\d.]+) % of a core"
)


def run(tree: Path, nodes: int, policy: str, quanta: int, port: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "control_scale.py"), "--nodes", str(nodes),
         "--relays", "auto", "--policies", policy, "--quanta", str(quanta),
         "--base-port", str(port)],
        cwd=tree, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    failed = 0.0
    for line in out.splitlines():
        if "/32r |" in line or "r |" in line:  # a row of the table: its last cell
            failed = float(line.rsplit("|", 1)[1])
        m = TARGET.match(line)
        if m:
            print(f"    {line.strip()}; failed commands {failed:g}", flush=True)
            return {**{k: float(m[k]) for k in ("pf", "pfc", "cpu")}, "failed": failed}
    raise RuntimeError(f"no target line in the output of {tree}:\n{out[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--quanta", type=int, default=30)
    ap.add_argument("--policies", default="paired-gang,gang")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--baseline", default=BEFORE)
    ap.add_argument("--base-port", type=int, default=17000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(a.baseline, Path(tmp)), "after": REPO}
        print(f"{a.nodes} emulated nodes behind relays (auto), {a.quanta} quanta per run; "
              f"before = {a.baseline}, after = this tree, ABAB", flush=True)  # fmt: skip
        res: dict[tuple[str, str], list[dict[str, float]]] = {}
        for policy in a.policies.split(","):
            for k in range(a.repeats):
                for which in ("before", "after"):
                    print(f"{policy} {which} run {k + 1}:", flush=True)
                    r = run(trees[which], a.nodes, policy, a.quanta, a.base_port)
                    res.setdefault((policy, which), []).append(r)
    print(f"\n{'policy':12s} {'CPU % before':>13s} {'after':>7s} {'after/before (pairs)':>22s}"
          f" {'plan+fan p99 CPU ms before*':>28s} {'after':>7s}")  # fmt: skip
    for policy in a.policies.split(","):
        b, f = res[(policy, "before")], res[(policy, "after")]
        ratios = ", ".join(f"{y['cpu'] / x['cpu']:.2f}" for x, y in zip(b, f, strict=True))
        print(f"{policy:12s} {statistics.fmean(x['cpu'] for x in b):13.1f} "
              f"{statistics.fmean(x['cpu'] for x in f):7.1f} {ratios:>22s} "
              f"{statistics.fmean(x['pfc'] for x in b):28.1f} "
              f"{statistics.fmean(x['pfc'] for x in f):7.1f}")  # fmt: skip
    print("* the baseline's benchmark counts the plan in wall time there (an upper bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
