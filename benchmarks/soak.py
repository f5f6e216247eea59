"""Soak: a long stream of mixed jobs through the real daemons (issue 13, root).

A local cluster of ``--nodes`` nodes (default 8, a quarter of a core each), the
controller under ``--policy`` (default paired gang) with at most ``--mpl`` slots
(default 5), and a stream of synthetic jobs — compute and I/O presets, sizes 1 to
the cluster, exponential interarrival times — for ``--duration`` seconds (or
``--jobs``). Every ``--sample`` seconds the controller's and agents' resident
memory is recorded. At the end it checks and prints:

* every submitted job is in the controller's table exactly once and ended
  (done, or failed/killed with a reason); none lost;
* the controller's exporter agrees with the job records (``cosched_controller_jobs``
  by state against the records' states);
* daemon memory growth after warm-up (the first fifth of the samples) — target < 5 %;
  beside it the controller's live Python objects (``status`` with ``memory``) and the
  jobs in the system: RSS keeps the allocator's high-water mark of a backlog, objects
  that return to their warm-up count show nothing leaked.

    sudo .venv/bin/python benchmarks/soak.py [--duration 600] [--nodes 8] [--mpl 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.client import ControllerClient  # noqa: E402
from testbed.cluster import cluster as cluster_mod  # noqa: E402
from testbed.cluster import state as state_mod  # noqa: E402
from testbed.cluster.profiles import parse_profile  # noqa: E402

ENDED = ("done", "failed", "killed")


def job_argv(rng: random.Random) -> list[str]:
    preset = rng.choice(["compute", "io"])
    return [sys.executable, "-m", "apps.synthetic", "--preset", preset,
            "--iterations", str(rng.randint(3, 12))]  # fmt: skip


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def metric_jobs(port: int) -> Counter[str]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("cosched_controller_jobs{"):
            labels = line[line.index("{") + 1 : line.index("}")]
            state = dict(kv.split("=", 1) for kv in labels.split(","))["state"].strip('"')
            out[state] += int(float(line.split()[-1]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of arrivals")
    ap.add_argument("--jobs", type=int, default=1000, help="at most this many jobs")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--mpl", type=int, default=5, help="matrix slots (max_slots)")
    ap.add_argument("--policy", default="paired-gang")
    ap.add_argument("--interarrival", type=float, default=1.0, help="mean seconds")
    ap.add_argument("--sample", type=float, default=5.0, help="memory sample period, s")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--keep-ended", type=int, default=50,
                    help="the controller's --keep-ended: ended jobs kept in memory, the rest "
                    "archived (default 50, so the table is full well within the run)")  # fmt: skip
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("soak: needs root (the local cluster)", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    tmp = Path(tempfile.mkdtemp(prefix="cosched-soak-"))
    env = cluster_mod.Env(state_dir=str(tmp / "state"))
    os.environ["COSCHED_STATE_DIR"] = str(tmp / "state")
    cluster_mod.up(cluster_mod.ClusterConfig(nodes=a.nodes, profile=parse_profile("gige"),
                                             cpus_per_node=2 / a.nodes), env)  # fmt: skip
    st = state_mod.load(str(tmp / "state"))
    assert st is not None
    port = 19900
    from controller.policies.registry import REGISTRY

    cdc = a.policy in REGISTRY and REGISTRY[a.policy].family == "cdc"
    log = (tmp / "controller.log").open("ab")
    ctl = subprocess.Popen(
        [sys.executable, "-m", "controller", "--policy", a.policy, "--quantum", "0.2",
         "--cluster-state", str(tmp / "state" / "cluster.json"), "--run-dir", str(tmp),
         "--metrics", f"127.0.0.1:{port}", "--keep-ended", str(a.keep_ended),
         *(["--mpl", str(a.mpl)] if cdc else [])],
        cwd=REPO, stdout=log, stderr=log,
    )  # fmt: skip
    client = ControllerClient(str(tmp / "controller.sock"), retry=30)
    samples: list[tuple[float, float, float]] = []
    heap: list[tuple[float, int, int]] = []  # time, Python objects, jobs in the system
    types: list[dict[str, int]] = []  # the most numerous object types at each sample

    def sample_heap(t: float) -> None:
        st = client.request("status", memory=True)
        heap.append((t, int(st["python_objects"]), int(st["jobs_in_system"])))
        types.append(dict(st.get("python_object_types") or {}))

    submitted: list[int] = []
    try:
        if not cdc:
            client.request("set", max_slots=a.mpl)
        t0 = time.monotonic()
        next_sample = t0
        next_arrival = t0
        agents = [r.pid for r in st.agents]
        while time.monotonic() - t0 < a.duration and len(submitted) < a.jobs:
            now = time.monotonic()
            if now >= next_arrival:
                size = rng.randint(1, a.nodes)
                res = client.request("submit", spec={"size": size, "argv": job_argv(rng),
                                                     "cwd": str(REPO)})  # fmt: skip
                submitted.append(int(res["job_id"]))
                next_arrival = now + rng.expovariate(1 / a.interarrival)
            if now >= next_sample:
                samples.append((now - t0, rss_mib([ctl.pid]), rss_mib(agents)))
                sample_heap(now - t0)
                next_sample = now + a.sample
            time.sleep(0.02)
        # drain: everything submitted ends (or is killed after a generous timeout)
        deadline = time.monotonic() + max(300.0, a.duration)
        while True:
            recs = {int(r["job_id"]): r for r in client.request("jobs", all=True)}
            if all(recs.get(j, {}).get("state") in ENDED for j in submitted):
                break
            if time.monotonic() > deadline:
                for j in submitted:
                    if recs.get(j, {}).get("state") not in ENDED:
                        client.request("kill", job_id=j)
                time.sleep(2)
                recs = {int(r["job_id"]): r for r in client.request("jobs", all=True)}
                break
            if time.monotonic() >= next_sample:
                samples.append((time.monotonic() - t0, rss_mib([ctl.pid]), rss_mib(agents)))
                sample_heap(time.monotonic() - t0)
                next_sample = time.monotonic() + a.sample
            time.sleep(0.5)
        samples.append((time.monotonic() - t0, rss_mib([ctl.pid]), rss_mib(agents)))
        sample_heap(time.monotonic() - t0)
        metrics = metric_jobs(port)
        status = client.request("status")
    finally:
        client.close()
        ctl.terminate()
        ctl.wait(10)
        cluster_mod.down(env)
    states = Counter(recs[j]["state"] for j in submitted if j in recs)
    lost = [j for j in submitted if j not in recs]
    warm = samples[max(1, len(samples) // 5) - 1]
    last = samples[-1]
    growth_ctl = (last[1] - warm[1]) / warm[1] * 100
    growth_ag = (last[2] - warm[2]) / warm[2] * 100
    resp = [recs[j]["end_time"] - recs[j]["submit_time"] for j in submitted
            if j in recs and recs[j].get("end_time") and recs[j].get("submit_time")]  # fmt: skip
    level = f"MPL {a.mpl}" if cdc else f"max {a.mpl} slots"
    print(f"soak: {a.policy}, {a.nodes} nodes, {level}, {len(submitted)} jobs over "
          f"{a.duration:g} s (mean interarrival {a.interarrival:g} s)")  # fmt: skip
    print(f"  job states: {dict(states)}; lost {len(lost)}; metrics by state {dict(metrics)}")
    print(f"  controller table: {status.get('jobs_in_memory')} job(s) in memory (--keep-ended "
          f"{a.keep_ended}), {status.get('jobs_archived')} archived")  # fmt: skip
    if resp:
        print(f"  response: mean {statistics.fmean(resp):.2f} s, max {max(resp):.2f} s")
    mid = samples[(samples.index(warm) + len(samples) - 1) // 2]
    print(
        f"  controller RSS at warm-up / half-way / end: {warm[1]:.1f} / {mid[1]:.1f} / "
        f"{last[1]:.1f} MiB ({(last[1] - mid[1]) / mid[1] * 100:+.1f} % in the second half)"
    )
    print(f"  memory after warm-up ({warm[0]:.0f} s) -> end ({last[0]:.0f} s): controller "
          f"{warm[1]:.1f} -> {last[1]:.1f} MiB ({growth_ctl:+.1f} %), agents {warm[2]:.1f} -> "
          f"{last[2]:.1f} MiB ({growth_ag:+.1f} %)")  # fmt: skip
    # A leak keeps objects; an allocator keeps pages. Python objects at warm-up and at
    # the end (every job ended, the table at --keep-ended) tell the two apart.
    hw = heap[max(1, len(heap) // 5) - 1]
    peak = max(heap, key=lambda h: h[2])
    obj_growth = (heap[-1][1] - hw[1]) / hw[1] * 100
    print(f"  controller Python objects at warm-up / end: {hw[1]} / {heap[-1][1]} "
          f"({obj_growth:+.1f} %); jobs in the system at warm-up {hw[2]}, at most {peak[2]} "
          f"(at {peak[0]:.0f} s), at the end {heap[-1][2]}")  # fmt: skip
    # which types grew: a leak names itself here (a cache that only a hard cap emptied
    # did, in the soak of 2026-11-25: frozensets and tuples of paired gang's pair cells)
    tw, te = types[heap.index(hw)], types[-1]
    grew = sorted(((te.get(k, 0) - tw.get(k, 0), k) for k in set(tw) | set(te)), reverse=True)
    print("  object types that grew most: "
          + ", ".join(f"{k} {d:+d}" for d, k in grew[:4]))  # fmt: skip
    ok_acc = not lost and all(s in ENDED for s in states)
    ok_met = all(metrics.get(s, 0) == n for s, n in states.items())
    ok_mem = growth_ctl < 5 and growth_ag < 5
    print(f"targets: every job accounted for: {'met' if ok_acc else 'MISSED'}; metrics agree "
          f"with the records: {'met' if ok_met else 'MISSED'}; daemon RSS growth after "
          f"warm-up < 5 %: {'met' if ok_mem else 'MISSED'}")  # fmt: skip
    return 0 if ok_acc and ok_met else 1


if __name__ == "__main__":
    sys.exit(main())
