"""The controller's cost per quantum at 16 to 4,096 nodes (issues 15 and 32).

For each N and policy, N emulated agents (agent/emulated.py: the real agent code in one
process, no jobs' processes, a fake cgroup tree) listen on 127.0.0.1; this process runs
the real controller core (controller/scheduler.py ``Scheduler`` over ``AgentPool``) with
two full-width jobs, so every quantum switches every node, and times each quantum:

* plan: the policy and family deciding the quantum (``fam.plan``);
* fan-out: every node's command written (HMAC-signed, one message per node);
* last ack: from the start of the fan-out until the last node's ack;
* CPU: this process's CPU time per quantum (the controller alone: the agents run in
  another process); RSS after the run.

Quanta run back to back, so a quantum's round time is also the shortest quantum it
could keep. Printed per N: p50/p99 of each, CPU as % of a core at a 100 ms quantum,
the shortest quantum (from a list) longer than every round, and the targets of
issues 15 and 32 at 1,024 nodes: plan + fan-out <= 10 ms (<= 5 ms in CPU time), every
ack within 100 ms, CPU <= 15 % of a core at 100 ms quanta, memory linear in N. Finally
the growth exponent of each figure (least-squares slope of log figure vs log N).

    python benchmarks/control_scale.py [--nodes 16,64,256,1024] [--policies gang,paired-gang]
                                       [--quanta 100] [--mode immediate|timed]
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.emulated import EmulationError, capacity, raise_fd_limit  # noqa: E402
from controller.nodes import AgentPool, NodeInfo  # noqa: E402
from controller.relaypool import RelayInfo, RelayPool  # noqa: E402
from controller.scheduler import Scheduler  # noqa: E402

QUANTA_CHOICES = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
TARGET_PLAN_FANOUT_S = 0.010
TARGET_PLAN_FANOUT_CPU_S = 0.005  # issue 32: in the controller's CPU time
TARGET_ACK_S = 0.100
TARGET_CPU = 0.15  # issue 32 (issue 15: 0.20)


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def start_host(
    n: int,
    port: int,
    key_file: Path,
    log: Path,
    *,
    failsafe: float = 30.0,
    state: Path | None = None,
) -> subprocess.Popen[bytes]:
    """The emulated agents' process, once it listens (``state``: write the node list)."""
    argv = [sys.executable, "-m", "agent.emulated", "--nodes", str(n), "--base-port", str(port),
            "--key-file", str(key_file), "--failsafe-timeout", str(failsafe)]  # fmt: skip
    if state is not None:
        argv += ["--state", str(state)]
    return _started(argv, log, "emulated:")


def start_relay(
    name: str,
    addr: tuple[str, int],
    state: Path,
    slice_: str,
    key_file: Path,
    log: Path,
    *,
    failsafe: float = 30.0,
    timeout: float = 2.0,
) -> subprocess.Popen[bytes]:
    """One relay process (controller/relay.py) over a slice of the state's nodes."""
    argv = [sys.executable, "-m", "controller.relay", "--name", name, "--listen",
            f"{addr[0]}:{addr[1]}", "--state", str(state), "--slice", slice_, "--key-file",
            str(key_file), "--failsafe-timeout", str(failsafe),
            "--timeout", str(timeout)]  # fmt: skip
    return _started(argv, log, f"relay {name}:")


def _started(argv: list[str], log: Path, banner: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=log.open("ab"))
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith(banner):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{argv[2]} did not start: {line!r}; see {log}")
    return proc


def relay_count(spec: str, n: int) -> int:
    """``0`` (direct), ``auto`` (about sqrt(N): each relay and the controller see as many
    peers), or a number."""
    if spec == "auto":
        return max(2, round(math.sqrt(n)))
    return int(spec)


def relay_infos(n: int, r: int, port: int) -> list[RelayInfo]:
    per = math.ceil(n / r)
    return [
        RelayInfo(f"r{i}", ("127.0.0.1", port + n + 1 + i),
                  tuple(f"n{j}" for j in range(i * per, min(n, (i + 1) * per))))
        for i in range(r)
        if i * per < n
    ]  # fmt: skip


def measure(
    n: int,
    policy: str,
    quanta: int,
    key: bytes,
    port: int,
    mode: str,
    relays: list[RelayInfo],
    others: list[psutil.Process],
    profile: int = 0,
    timeout: float = 10.0,
) -> dict[str, Any]:
    # what the controller's own objects hold (nodes, pool, scheduler, jobs), traced
    # only until the measured quanta start so that tracing costs them nothing
    tracemalloc.start()
    nodes = [NodeInfo(f"n{i}", ("127.0.0.1", port + i), "127.0.0.1", 1.0) for i in range(n)]
    pool: AgentPool | RelayPool
    pool = (
        RelayPool(nodes, relays, key, timeout=timeout)
        if relays
        else AgentPool(nodes, key, timeout=timeout)
    )
    pool.connect_all(120.0)
    sched = Scheduler(policy, {}, pool)
    for k in range(2):
        sched.submit({"name": f"wide{k}", "size": n, "argv": ["true"]}, "root")
    plan_s: list[float] = []
    plan_cpu: list[float] = []  # the same in this thread's CPU time
    inner = sched.fam.plan

    def timed_plan(now: float) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        out = inner(now)
        plan_s.append(time.perf_counter() - t0)
        plan_cpu.append(time.thread_time() - c0)
        return out

    sched.fam.plan = timed_plan  # type: ignore[method-assign]
    round_s: list[float] = []
    # the round the scheduler runs: a relay pool's summaries, or every agent's ack
    which = "quantum_summary" if isinstance(pool, RelayPool) else "quantum"
    inner_q = getattr(pool, which)

    def timed_quantum(q: int, commands: Any, at: float | None = None) -> Any:
        t0 = time.perf_counter()
        out = inner_q(q, commands, at)
        round_s.append(time.perf_counter() - t0)  # fan-out start -> the last ack
        return out

    setattr(pool, which, timed_quantum)
    for _ in range(5):  # launches and first switches
        sched.tick()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    plan_s.clear()
    plan_cpu.clear()
    round_s.clear()
    fan, fan_cpu, last, cpu, rounds = [], [], [], [], []
    o0 = sum(sum(p.cpu_times()[:2]) for p in others)
    prof = cProfile.Profile(time.process_time) if profile else None  # CPU, not wall
    if prof is not None:
        prof.enable()
    for _ in range(quanta):
        c0, w0 = time.process_time(), time.perf_counter()
        at = time.time() + 0.02 if mode == "timed" else None
        sched.tick(at)
        rounds.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        fan.append(pool.last_fanout_s)
        fan_cpu.append(pool.last_fanout_cpu_s)
        last.append(round_s[-1])
    if prof is not None:
        prof.disable()
        print(f"-- the controller's CPU time ({n} nodes, {policy}, {len(relays)} relays):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(profile)
    other_cpu = (sum(sum(p.cpu_times()[:2]) for p in others) - o0) / quanta
    failed = sched.telemetry.counters.failed_commands
    pool.close()
    return {
        "n": n, "policy": policy, "relays": len(relays), "other_cpu": other_cpu, "plan": plan_s,
        "plan_cpu": plan_cpu,
        "fanout": fan, "fan_cpu": fan_cpu, "last_ack": last, "cpu": cpu, "round": rounds,
        "held_mib": held / 2**20, "failed": failed,
    }  # fmt: skip


def run_one(
    n: int, policy: str, r: int, args: argparse.Namespace, key: bytes, kf: Path, tmpd: Path
) -> dict[str, Any]:
    """One row: the emulated host, ``r`` relay processes (0: direct), the measurement."""
    state = tmpd / "cluster.json"
    procs = [start_host(n, args.base_port, kf, tmpd / "emulated.log", state=state)]
    try:
        host_rss0 = psutil.Process(procs[0].pid).memory_info().rss
        infos = relay_infos(n, r, args.base_port) if r else []
        per = math.ceil(n / r) if r else 0
        for i, info in enumerate(infos):
            procs.append(start_relay(info.name, info.address, state,
                                     f"{i * per}:{i * per + len(info.nodes)}", kf,
                                     tmpd / "relay.log", timeout=args.relay_timeout))  # fmt: skip
        others = [psutil.Process(p.pid) for p in procs]
        # the controller waits for a relay's summary longer than the relay for its agents
        out = measure(n, policy, args.quanta, key, args.base_port, args.mode, infos, others,
                      args.profile, max(10.0, args.relay_timeout + 2.0))  # fmt: skip
        out["host_rss_mib"] = host_rss0 / 2**20
        return out
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def fit_exponent(ns: list[int], ys: list[float]) -> float:
    pts = [(math.log(n), math.log(y)) for n, y in zip(ns, ys, strict=True) if y > 0]
    if len(pts) < 2:
        return math.nan
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else math.nan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", default="16,64,256,1024")
    ap.add_argument("--policies", default="gang,paired-gang")
    ap.add_argument("--quanta", type=int, default=100, help="quanta measured per row")
    ap.add_argument("--mode", default="immediate", choices=["immediate", "timed"],
                    help="timed: plans sent 20 ms ahead with an instant")  # fmt: skip
    ap.add_argument("--relays", default="0,auto",
                    help="topologies: 0 = the controller talks to every agent; auto = about "
                    "sqrt(N) relays (controller/relay.py); or a number")  # fmt: skip
    ap.add_argument("--base-port", type=int, default=17000)
    ap.add_argument("--relay-timeout", type=float, default=2.0, metavar="S",
                    help="each relay's request timeout (default 2 s, the relay's own default; "
                    "a quantum's acks are awaited half of it); the controller's is the larger "
                    "of 10 s and this + 2 s. At 4,096 emulated nodes on two cores one emulated "
                    "host can need seconds per quantum")  # fmt: skip
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="profile the controller over the measured quanta and print its K "
                    "costliest functions per row (profiling slows it: do not compare the "
                    "figures of such a run)")  # fmt: skip
    args = ap.parse_args()
    topologies = [t.strip() for t in args.relays.split(",") if t.strip()]
    counts = [int(x) for x in args.nodes.split(",")]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        for n in counts:
            capacity(n)
    except EmulationError as e:
        print(f"control_scale: {e}", file=sys.stderr)
        return 2
    raise_fd_limit(max(counts))
    print(
        f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {args.quanta} quanta"
        f" per row, back to back, {args.mode} mode; two full-width jobs (every node switches);"
        f" relays' request timeout {args.relay_timeout:g} s (acks awaited half of it)"
    )
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cosched-scale-") as tmpd:
        key = secrets.token_hex(32).encode()
        kf = Path(tmpd) / "key"
        kf.write_bytes(key)
        kf.chmod(0o600)
        for n in counts:
            for policy in policies:
                for spec in topologies:
                    r = run_one(n, policy, relay_count(spec, n), args, key, kf, Path(tmpd))
                    r["topology"] = spec
                    rows.append(r)
                    print(fmt(r), flush=True)
    print()
    print(HEADER)
    for r in rows:
        print(fmt(r))
    print("ms; plan+fan = p99 of plan + fan-out (wall; CPU = the same in this thread's CPU time,")
    print("    which the agents and relays on the same cores cannot inflate);")
    print("ack = fan-out start -> the last ack (p50, p99);")
    print(
        "CPU % = controller CPU per quantum / 100 ms; q min = the shortest quantum (of "
        f"{', '.join(f'{q * 1000:g}' for q in QUANTA_CHOICES)} ms) above every round;"
    )
    print("ctl MiB = what the controller's objects hold after warm-up (tracemalloc: pool,")
    print("    scheduler, jobs); agents MiB = the emulated host's RSS;")
    print("others ms = CPU of the emulated host and the relays per quantum (what bounds the acks")
    print("on one host: they share its cores with the controller).")
    print()
    print("growth with N (least-squares slope of log figure vs log N; 1 = linear), over the")
    print("rows where every command was acked (a row with failed commands measures how the")
    print("controller handles failures on an overloaded host, not how it grows):")
    for group in dict.fromkeys(growth_group(r) for r in rows):
        mine = [r for r in rows if growth_group(r) == group and not r["failed"]]
        left = [r["n"] for r in rows if growth_group(r) == group and r["failed"]]
        if left:
            print(f"  {group}: left out N = {', '.join(map(str, left))} (failed commands)")
        if len(mine) < 2:
            continue
        ns = [r["n"] for r in mine]
        parts = []
        for key_, name in (("plan", "plan"), ("fanout", "fan-out"), ("last_ack", "last ack"),
                            ("plan_cpu", "plan in CPU time"), ("fan_cpu", "fan-out in CPU time"),
                            ("cpu", "CPU")):  # fmt: skip
            parts.append(
                f"{name} {fit_exponent(ns, [statistics.fmean(r[key_]) for r in mine]):.2f}"
            )
        parts.append(f"controller memory {fit_exponent(ns, [r['held_mib'] for r in mine]):.2f}")
        parts.append(f"agents memory {fit_exponent(ns, [r['host_rss_mib'] for r in mine]):.2f}")
        lo, hi = min(mine, key=lambda r: r["n"]), max(mine, key=lambda r: r["n"])
        per_node = (hi["held_mib"] - lo["held_mib"]) * 1024 / (hi["n"] - lo["n"])
        parts.append(f"controller memory per added node {per_node:.1f} KiB")
        print(f"  {group}: " + ", ".join(parts))
    big = [r for r in rows if r["n"] == max(counts)]
    print()
    print(f"targets at N = {max(counts)} (issues 15 and 32):")
    for r in big:
        pf = pct([p + f for p, f in zip(r["plan"], r["fanout"], strict=True)], 99)
        pfc = pct([p + f for p, f in zip(r["plan_cpu"], r["fan_cpu"], strict=True)], 99)
        ack = max(r["last_ack"])
        cpu = statistics.fmean(r["cpu"]) / 0.1
        print(f"  {label(r)}: plan + fan-out p99 {pf * 1e3:.1f} ms (<= 10: "
              f"{'met' if pf <= TARGET_PLAN_FANOUT_S else 'MISSED'}; in CPU time {pfc * 1e3:.1f} "
              f"ms (<= 5: {'met' if pfc <= TARGET_PLAN_FANOUT_CPU_S else 'MISSED'})); every ack "
              f"within {ack * 1e3:.1f} ms (<= 100: {'met' if ack <= TARGET_ACK_S else 'MISSED'}); "
              f"CPU {cpu * 100:.1f} % of a core at 100 ms quanta (<= 15: "
              f"{'met' if cpu <= TARGET_CPU else 'MISSED'})")  # fmt: skip
    return 0


HEADER = (
    f"{'N':>5} {'policy':>16} | {'plan p50':>8} {'p99':>6} | {'fan p50':>7} {'p99':>6} |"
    f" {'plan+fan':>8} {'CPU':>5} | {'ack p50':>7} {'p99':>6} | {'CPU %':>6} | {'q min':>6} |"
    f" {'ctl MiB':>7} {'agents MiB':>10} | {'others ms':>9} | failed"
)


def growth_group(r: dict[str, Any]) -> str:
    return f"{r['policy']}, " + ("direct" if not r["relays"] else f"relays {r['topology']}")


def label(r: dict[str, Any]) -> str:
    return f"{r['policy']}/{r['relays']}r" if r["relays"] else f"{r['policy']}/direct"


def fmt(r: dict[str, Any]) -> str:
    ms = 1e3
    pf = pct([p + f for p, f in zip(r["plan"], r["fanout"], strict=True)], 99)
    pfc = pct([p + f for p, f in zip(r["plan_cpu"], r["fan_cpu"], strict=True)], 99)
    qmin = next((q for q in QUANTA_CHOICES if q >= max(r["round"])), math.inf)
    return (
        f"{r['n']:>5} {label(r):>16} |"
        f" {pct(r['plan'], 50) * ms:8.2f} {pct(r['plan'], 99) * ms:6.2f} |"
        f" {pct(r['fanout'], 50) * ms:7.2f} {pct(r['fanout'], 99) * ms:6.2f} |"
        f" {pf * ms:8.2f} {pfc * ms:5.2f} |"
        f" {pct(r['last_ack'], 50) * ms:7.2f} {pct(r['last_ack'], 99) * ms:6.2f} |"
        f" {statistics.fmean(r['cpu']) / 0.1 * 100:6.1f} | {qmin * ms:6.0f} |"
        f" {r['held_mib']:7.2f} {r['host_rss_mib']:10.1f} | {r['other_cpu'] * ms:9.1f} |"
        f" {r['failed']}"
    )


if __name__ == "__main__":
    sys.exit(main())
