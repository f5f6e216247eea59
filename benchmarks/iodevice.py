"""The node's shared I/O device (agent/iodevice.py) on one real node: what two I/O jobs
get from it, against their own devices and against one job alone.

One node with a dedicated core, I/O-bound synthetic jobs (4 files x 10 ms of device per
barrier, no compute) started through the agent. Each round measures, interleaved: one
job alone on the node's device; two jobs each sleeping on its own device
(``--device rank``, the old model); two jobs queued at the node's one device
(``--device node``, ParPar's local disk, Wiseman & Feitelson 2003 §4.1.2). The device
time is a sleep and the jobs use little CPU, so the figures hardly depend on how busy
the host is. Root and the host lock; leaves nothing behind.

    sudo flock /work/host.lock .venv/bin/python benchmarks/iodevice.py [--rounds 3] [--out F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testbed.experiment.execmodel.calibrate import AgentDriver, CalibrationConfig  # noqa: E402
from testbed.experiment.harness.cluster import local_cluster  # noqa: E402
from testbed.experiment.paired.spec import AppParams  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    args = ap.parse_args()
    io = {d: AppParams(0, 4, 8193, 0.010, "block", device=d) for d in ("rank", "node")}
    cfg = CalibrationConfig(nodes=1, cpus_per_node=1.0, cpu_mechanism="cpuset")
    alone: list[float] = []
    own: list[float] = []
    shared: list[float] = []
    with local_cluster(cfg, False, lambda _m: None) as cluster:
        state = json.loads(Path(cluster["state"]).read_text())
        driver = AgentDriver(state, 700, 0.2)
        try:
            for _ in range(args.rounds):
                alone.append(driver.run([("io", io["node"])], args.duration)[0].rate)
                own += [j.rate for j in driver.run([("io", io["rank"])] * 2, args.duration)]
                shared += [j.rate for j in driver.run([("io", io["node"])] * 2, args.duration)]
        finally:
            driver.close()

    def line(name: str, v: list[float]) -> str:
        return f"{name:34s} mean {statistics.fmean(v):6.2f}  ({', '.join(f'{x:.2f}' for x in v)})"

    print("barriers per second per job (4 x 10 ms of device per barrier; about 25 alone)")
    print(line("one job alone, node's device", alone))
    print(line("two jobs, each its own device", own))
    print(line("two jobs, the node's one device", shared))
    ratio = statistics.fmean(shared) / statistics.fmean(alone)
    print(f"two on the node's device / alone: {ratio:.2f} per job (one device: about 0.5)")
    if args.out is not None:
        args.out.write_text(
            json.dumps({"alone": alone, "own": own, "shared": shared, "ratio": ratio}) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
