"""What a CDC agent costs per second and per decision: this tree against an earlier one, ABAB.

One agent runs in a child process (``--child``) on a fake cgroupfs, its loop
the daemon's (``Agent.step`` with the daemon's timeouts), a local scheme set
at ``--tick-ms``, the fail-safe out of the way (no controller here). This
process plays ``--ranks`` registered ranks exactly as benchmarks/nic_cost.py
does (a mesh connection and a sealed state page each). The child reports its
own CPU time (getrusage: every thread of the agent process, user + system)
and the decision points it counted over a measured window after a warm-up.

Each case runs the agent of ``--baseline`` (a git revision, extracted with
``git archive``; default the commit before agents rested between ticks) and
the agent of this tree alternately, A B A B, so a change in the host's load
falls on both. Cases:

* ``idle``: ranks registered, no messages, at ``--tick-ms`` (10 ms): the
  agent's standing cost, in % of a core;
* ``idle-1ms``: the same at 1 ms;
* ``busy-1ms``: two ranks hold an unread message throughout (a boost
  conflict at every tick, so every tick is evaluated) at 1 ms: the agent's
  CPU per decision point.

    .venv/bin/python benchmarks/cdc_agent_cost.py [--window 8] [--repeats 2] \\
        [--baseline REV] [--out FILE.json]

No root, no kernel state (fake cgroups, loopback sockets): no host lock.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The agent as it was before it rested between ticks (issue 32, item 5).
BEFORE = "13c14bb"
KEY = b"benchmark-key-0123456789abcdef"
PARENT = "cosched/bench-cdc-cost"
CASES = {"idle": (None, 0), "idle-1ms": (1.0, 0), "busy-1ms": (1.0, 2)}


# ---- the child: one agent, from the tree it is given -----------------------------------
def child(
    tree: str,
    scheme: str,
    tick_ms: float,
    ports: list[int],
    warmup: float,
    window: float,
    ppid: int,
) -> None:
    sys.path.insert(0, tree)
    from agent.daemon import REAP_INTERVAL, Agent, AgentConfig
    from agent.jobs import Job
    from agent.local import LocalConfig
    from agent.nicguard import JobView
    from common.cgroups import V1Driver
    from common.cgroups.fake import fake_v1

    assert Path(sys.modules["agent"].__file__ or "").is_relative_to(tree)
    with tempfile.TemporaryDirectory() as tmp:
        fs = fake_v1(Path(tmp) / "cg")
        drv = V1Driver(Path(tmp) / "cg", fs=fs)
        cfg = AgentConfig(
            node="b0",
            listen=("127.0.0.1", 0),
            key=KEY,
            cgroup_parent=PARENT,
            run_dir=Path(tmp) / "run",
            fifo_priority=0,
            failsafe_timeout=3600.0,  # no controller in this benchmark
        )
        agent = Agent(cfg, driver=drv)
        agent.start()
        for j in range(len(ports)):
            cg = f"{PARENT}/job-{j}"
            drv.create(cg)
            agent.jobs[str(j)] = Job(str(j), cg, reattached=True)
            drv.add_pid(cg, 4_000_000 + j)  # keeps the reattached job alive across reap()
        agent.local.gossip_port = 0
        peers = ("127.0.0.1", "127.0.0.1")
        agent.local._authorize = lambda job: JobView(  # type: ignore[method-assign]
            job, {0: ppid}, lambda: [ppid], peers, ports[int(job)]
        )
        agent.local.configure(LocalConfig(scheme, mpl=max(1, len(ports)), tick_s=tick_ms / 1e3))
        print(json.dumps({"ready": str(Path(tmp) / "run" / "nic.sock")}), flush=True)

        def cpu() -> float:
            r = __import__("resource").getrusage(0)  # RUSAGE_SELF: the whole process
            return float(r.ru_utime + r.ru_stime)

        start = time.monotonic()
        marks: list[tuple[float, float, int, int]] = []
        for end in (start + warmup, start + warmup + window):
            while (now := time.monotonic()) < end:
                agent.step(
                    min(
                        agent.failsafe.time_left(),
                        REAP_INTERVAL,
                        agent.local.timeout(),
                        agent.plans.wake_in(agent.wall()),
                        end - now,
                    )
                )
            st = agent.local.status()
            marks.append((time.monotonic(), cpu(), st["decisions"], st["conflicts"]))
        (w0, c0, d0, k0), (w1, c1, d1, k1) = marks
        print(
            json.dumps(
                {
                    "wall_s": w1 - w0,
                    "cpu_s": c1 - c0,
                    "decisions": d1 - d0,
                    "conflicts": k1 - k0,
                    "registered": st["registered"],
                }
            ),
            flush=True,
        )
        agent.shutdown()


# ---- the parent: trees, ranks, rounds ----------------------------------------------------
def extract(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (its tracked files) in ``into/tree``, for a child to run from
    (benchmarks/control_scale_ab.py and cdc_sim_before_after.py call it too)."""
    data = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        t.extractall(into / "tree", filter="data")
    return into / "tree"


def one(
    tree: Path, scheme: str, tick_ms: float, ranks: int, pending: int, warmup: float, window: float
) -> dict[str, Any]:
    from nic_cost import FakeRank  # the ranks nic_cost plays

    from common.ports import free_port

    ports = [free_port() for _ in range(ranks)]
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(tree),
        "--scheme",
        scheme,
        "--tick-ms",
        str(tick_ms),
        "--ports",
        ",".join(map(str, ports)),
        "--warmup",
        str(warmup),
        "--window",
        str(window),
        "--ppid",
        str(os.getpid()),
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert p.stdout is not None
        ready = json.loads(p.stdout.readline())
        rs = [FakeRank(Path(ready["ready"]), j, ports[j]) for j in range(ranks)]
        for r in rs[:pending]:
            r.far.send(b"m" * 40)  # never consumed: the rank stays pending
        res: dict[str, Any] = json.loads(p.stdout.readline())
        p.wait(30)
        for r in rs:
            for s in (r.conn, r.near, r.far):
                s.close()
        return res
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ports", default="", help=argparse.SUPPRESS)
    ap.add_argument("--ppid", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--scheme", default="cc-b")
    ap.add_argument("--tick-ms", type=float, default=10.0, help="the idle case's interval")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=1.5, help="seconds before the window")
    ap.add_argument("--window", type=float, default=8.0, help="measured seconds per run")
    ap.add_argument("--repeats", type=int, default=2, help="AB pairs per case")
    ap.add_argument("--baseline", default=BEFORE, help=f"git revision (default {BEFORE})")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--out", type=Path, default=None, help="write the runs as JSON")
    a = ap.parse_args()
    if a.child is not None:
        ports = [int(x) for x in a.ports.split(",") if x]
        child(a.child, a.scheme, a.tick_ms, ports, a.warmup, a.window, a.ppid)
        return 0
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    from nic_cost import bare_wakeup_cpu_us

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(a.baseline, Path(tmp) / "before"), "after": REPO}
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", a.baseline],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(
            f"scheme {a.scheme}, {a.ranks} registered ranks, fake cgroupfs; before = {rev}, "
            f"after = this tree; {a.window:g} s windows, ABAB",
            flush=True,
        )
        floor = bare_wakeup_cpu_us(a.tick_ms / 1e3)
        print(
            f"this host: one idle select() wake-up costs {floor:.0f} us of CPU (bare loop); "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        for case in a.cases.split(","):
            tick, pending = CASES[case]
            tick_ms = tick if tick is not None else a.tick_ms
            for k in range(a.repeats):
                for which in ("before", "after"):
                    r = one(trees[which], a.scheme, tick_ms, a.ranks, pending, a.warmup, a.window)
                    r.update(case=case, which=which, round=k + 1, tick_ms=tick_ms)
                    rows.append(r)
                    each = 1e6 * r["cpu_s"] / max(1, r["decisions"])
                    print(
                        f"{case:9s} {which:6s} round {k + 1}: agent CPU "
                        f"{100 * r['cpu_s'] / r['wall_s']:.2f}% of a core, "
                        f"{r['decisions']} decisions ({each:.1f} us CPU each), "
                        f"{r['conflicts']} conflicts, {r['registered']} registered",
                        flush=True,
                    )
    print(
        f"\n{'case':9s} {'before %core':>12s} {'after %core':>12s} {'after/before':>13s} "
        f"{'(per pair)':>18s} {'us/decision before, after':>27s}"
    )
    for case in a.cases.split(","):
        pairs = [
            tuple(x for x in rows if x["case"] == case and x["round"] == k + 1)
            for k in range(a.repeats)
        ]
        b = [x[0] for x in pairs]
        f = [x[1] for x in pairs]

        def pct(xs: list[dict[str, Any]]) -> float:
            return 100 * sum(x["cpu_s"] for x in xs) / sum(x["wall_s"] for x in xs)

        def per(xs: list[dict[str, Any]]) -> float:
            return 1e6 * sum(x["cpu_s"] for x in xs) / max(1, sum(x["decisions"] for x in xs))

        ratios = [
            (y["cpu_s"] / y["wall_s"]) / (x["cpu_s"] / x["wall_s"])
            for x, y in zip(b, f, strict=True)
        ]
        print(
            f"{case:9s} {pct(b):12.2f} {pct(f):12.2f} {pct(f) / pct(b):13.2f} "
            f"{', '.join(f'{r:.2f}' for r in ratios):>18s} {per(b):13.1f}, {per(f):.1f}"
        )
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"baseline": rev, "scheme": a.scheme, "rows": rows}, indent=1) + "\n"
        )
        print(f"data: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
