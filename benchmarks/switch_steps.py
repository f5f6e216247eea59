"""Where an agent's switch spends its time, step by step, on the host's cgroups (v1 or v2).

An agent (the real code, in this process, on the host's real cgroups as ``auto`` picks
them) holds two jobs, each one busy process; the benchmark switches between them
``--switches`` times, ``--quantum`` apart, in immediate mode, with the job's weight
changing at each switch so every step does its write. Each ack's ``steps_s``
(agent/daemon.py ``apply``) splits the switch into: writing the freeze request,
confirming it (``freezer.state`` on v1, ``cgroup.events`` on cgroup2), the weight
write (``cpu.shares`` / ``cpu.weight``), writing the thaw request, confirming it, and
reading the jobs' CPU time for the ack. Printed: p50 and p99 of each step in µs, and
the whole apply.

Run it once on the host as it is (v1 here) and once with the host switched
cgroup-v2-only (/work/shared/platform-notes.md), each with ``--out``; then
``--compare V1.json V2.json`` prints each step's p50 and p99 ratio (v2 / v1).
Needs root and the host lock:

    sudo flock /work/host.lock .venv/bin/python benchmarks/switch_steps.py --out v1.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.telemetry import percentile as pct  # noqa: E402

STEPS = ("freeze_write", "freeze_confirm", "weights", "thaw_write", "thaw_confirm", "account")
PARENT = "cosched/bench-steps"


def measure(switches: int, quantum: float, fifo: int) -> dict[str, Any]:
    from agent.daemon import Agent, AgentConfig
    from agent.jobs import Job
    from common.cgroups import open_cgroups

    drv = open_cgroups("auto")
    busy: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = AgentConfig(node="s0", listen=("127.0.0.1", 0), key=b"k" * 32,
                          cgroup_parent=PARENT, run_dir=Path(tmp) / "run",
                          fifo_priority=fifo, failsafe_timeout=3600.0)  # fmt: skip
        agent = Agent(cfg, driver=drv)
        agent.start()
        try:
            for jid in ("a", "b"):
                cg = f"{PARENT}/job-{jid}"
                drv.create(cg)
                p = subprocess.Popen(["sh", "-c", "while :; do :; done"])
                busy.append(p)
                drv.add_pid(cg, p.pid)
                agent.jobs[jid] = Job(jid, cg, reattached=True)
            acks = []
            for k in range(switches + 2):
                jid = "ab"[k % 2]
                # a weight that differs from this job's last one: the weight step writes
                acks.append(agent.apply({jid: 100 + 100 * (k // 2 % 2)}))
                time.sleep(quantum)
            acks = acks[2:]  # the first two create state (first freeze, first weight)
        finally:
            agent.shutdown()  # thaws every job first: a frozen task does not act on SIGKILL
            for p in busy:
                p.kill()
                p.wait()
            for jid in ("a", "b"):
                with contextlib.suppress(Exception):
                    drv.kill_all(f"{PARENT}/job-{jid}")
                with contextlib.suppress(Exception):
                    drv.remove(f"{PARENT}/job-{jid}")
            for cg in (f"{PARENT}/agent", PARENT):
                with contextlib.suppress(Exception):
                    drv.remove(cg)
    errors = sum(1 for a in acks if a["errors"])
    steps = {s: [a["steps_s"][s] for a in acks] for s in STEPS}
    steps["apply"] = [a["apply_duration_s"] for a in acks]
    return {"backend": drv.name, "switches": len(acks), "errors": errors, "steps_s": steps,
            "load": os.getloadavg()[0]}  # fmt: skip


def show(doc: dict[str, Any]) -> None:
    print(f"cgroups: {doc['backend']}; {doc['switches']} switches, {doc['errors']} with errors; "
          f"load average {doc['load']:.2f}")  # fmt: skip
    print(f"{'step':16s} {'p50 us':>9s} {'p99 us':>9s}")
    for s, xs in doc["steps_s"].items():
        print(f"{s:16s} {pct(xs, 50) * 1e6:9.1f} {pct(xs, 99) * 1e6:9.1f}")


def compare(a: dict[str, Any], b: dict[str, Any]) -> None:
    print(f"{b['backend']} / {a['backend']}, per step:")
    print(f"{'step':16s} {'p50 A us':>9s} {'p50 B us':>9s} {'B/A':>6s} {'p99 A':>9s} "
          f"{'p99 B':>9s} {'B/A':>6s}")  # fmt: skip
    for s in a["steps_s"]:
        xa, xb = a["steps_s"][s], b["steps_s"][s]
        pa, pb, qa, qb = pct(xa, 50), pct(xb, 50), pct(xa, 99), pct(xb, 99)
        print(f"{s:16s} {pa * 1e6:9.1f} {pb * 1e6:9.1f} {pb / pa if pa else 0:6.2f} "
              f"{qa * 1e6:9.1f} {qb * 1e6:9.1f} {qb / qa if qa else 0:6.2f}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--switches", type=int, default=200)
    ap.add_argument("--quantum", type=float, default=0.01, help="seconds between switches")
    ap.add_argument("--fifo-priority", type=int, default=10, help="as the agent's default")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"))
    a = ap.parse_args()
    if a.compare:
        docs = [json.loads(p.read_text()) for p in a.compare]
        for d in docs:
            show(d)
            print()
        compare(*docs)
        return 0
    if os.geteuid() != 0:
        print("switch_steps: needs root (real cgroups); run it under the host lock",
              file=sys.stderr)  # fmt: skip
        return 2
    doc = measure(a.switches, a.quantum, a.fifo_priority)
    show(doc)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc) + "\n")
        print(f"data: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
