"""Issue 25: the node's shared I/O device serialises two jobs' I/O on a real node
(root; skips otherwise).

One node, two I/O-bound jobs of the synthetic program (4 files x 10 ms of device per
barrier, no compute) started together through the agent, both runnable all the time.
With ``--device rank`` each rank sleeps on its own and both run about as fast as one
alone; with ``--device node`` their writes queue at the node's one device, so together
they pass about as many barriers as one alone. Every figure is compared with a
reference measured in the same test (host speed does not matter: the device time is
a sleep, and the jobs use little CPU).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from testbed.experiment.execmodel.calibrate import AgentDriver, CalibrationConfig
from testbed.experiment.harness.cluster import local_cluster
from testbed.experiment.paired.spec import AppParams


def test_node_device_serialises_two_jobs(root_cluster_env: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    cfg = CalibrationConfig(
        nodes=1, cpus_per_node=1.0 if cores >= 1 else None, cpu_mechanism="cpuset"
    )
    io = {
        d: AppParams(0, 4, 8193, 0.010, "block", device=d)  # 40 ms of device per barrier
        for d in ("rank", "node")
    }
    duration = 3.0

    with local_cluster(cfg, False, lambda _m: None) as cluster:
        state = json.loads(Path(cluster["state"]).read_text())
        driver = AgentDriver(state, 700, 0.2)
        try:
            alone = driver.run([("io", io["node"])], duration)[0].rate
            own = [j.rate for j in driver.run([("io", io["rank"]), ("io", io["rank"])], duration)]
            shared = [
                j.rate for j in driver.run([("io", io["node"]), ("io", io["node"])], duration)
            ]
        finally:
            driver.close()
    print(f"\nI/O job alone {alone:.2f} barriers/s; two with own devices {own}; two on the "
          f"node's device {shared}")  # fmt: skip
    assert alone > 10  # 40 ms of device per barrier: about 25 barriers/s
    # own devices: each job about as fast as alone
    assert min(own) > 0.8 * alone, (alone, own)
    # one device: each about half, and together about one job's worth
    assert max(shared) < 0.65 * alone, (alone, shared)
    assert 0.8 * alone < sum(shared) < 1.15 * alone, (alone, shared)
