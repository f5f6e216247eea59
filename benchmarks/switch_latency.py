"""Coordinated switch latency of N agents on one host (root, cgroup v1 or v2).

Starts N agents on 127.0.0.1 (parents cosched/bench-n<i>, created and removed
here), two busy-loop jobs per agent, then alternates which job runs, sending
each quantum command to all agents back to back. Prints, per N and quantum:

* switch completion: from the start of the fan-out to each agent's ack
  (freeze + thaw confirmed by the kernel), p50/p99; and to the last ack;
* cross-node skew: max - min of the agents' own completion timestamps
  (CLOCK_MONOTONIC, same host) per switch, p50/p99;
* agent CPU use: psutil user+system time of each agent process / wall time.

Usage: sudo .venv/bin/python benchmarks/switch_latency.py [--nodes 2,4,8] [--switches 200]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent import wire  # noqa: E402
from agent.client import AgentClient  # noqa: E402
from common.cgroups import Cgroups as CgroupDriver  # noqa: E402
from common.cgroups import open_cgroups  # noqa: E402

BUSY = [sys.executable, "-c", "while True: pass"]


@dataclass
class Node:
    name: str
    parent: str
    port: int
    proc: subprocess.Popen[bytes]
    client: AgentClient | None = None
    jobs: list[str] = field(default_factory=list)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_nodes(
    n: int, key_file: Path, tmp: Path, drv: CgroupDriver, extra: list[str] | None = None
) -> list[Node]:
    nodes: list[Node] = []
    for i in range(n):
        name = f"bench-n{i}"
        parent = f"cosched/{name}"
        drv.ensure_parent(parent)
        port = free_port()
        cmd = [
            sys.executable, "-m", "agent", "--node", name, "--listen", f"127.0.0.1:{port}",
            "--key-file", str(key_file), "--cgroup-parent", parent,
            "--run-dir", str(tmp / name), "--failsafe-timeout", "10", "--log-level", "WARNING",
            *(extra or []),
        ]  # fmt: skip
        log = (tmp / f"{name}.log").open("ab")
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        nodes.append(Node(name, parent, port, proc))
    return nodes


def connect(nodes: list[Node], key: bytes) -> None:
    for nd in nodes:
        deadline = time.monotonic() + 15
        while True:
            try:
                c = AgentClient(("127.0.0.1", nd.port), key, timeout=5)
                c.connect()
                nd.client = c
                break
            except OSError:
                if nd.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"agent {nd.name} did not come up") from None
                time.sleep(0.05)


def fan_out(
    nodes: list[Node], q: int, runnable_idx: int, agent_stats: list[float] | None = None
) -> tuple[list[float], list[int]]:
    """Send quantum q to all nodes back to back; return per-node latency and done stamps.

    ``agent_stats`` collects each agent's own apply duration (ms).
    """
    frames: list[tuple[AgentClient, int, bytes]] = []
    for nd in nodes:
        assert nd.client is not None
        data = {"q": q, "node": nd.name, "start": time.time(), "jobs": {}}
        if len(nd.jobs) == 1:
            # One job: its gang runs on even quanta, another (absent) gang on odd ones.
            data["jobs"] = {} if runnable_idx % 2 else {nd.jobs[0]: 100}
        else:
            data["jobs"] = {nd.jobs[runnable_idx % len(nd.jobs)]: 100}
        seq, frame = nd.client.session.make(wire.QUANTUM, data)
        frames.append((nd.client, seq, frame))
    t0 = time.perf_counter_ns()
    for c, _, frame in frames:
        c.send_raw(frame)
    lat: list[float] = [0.0] * len(nodes)
    done: list[int] = [0] * len(nodes)
    pending = {c.fileno(): (i, c, seq) for i, (c, seq, _) in enumerate(frames)}
    deadline = time.monotonic() + 5
    while pending:
        ready, _, _ = select.select(list(pending), [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"no ack from {len(pending)} agent(s) for q={q}")
        now = time.perf_counter_ns()
        for fd in ready:
            i, c, seq = pending[fd]
            c.poll(0)
            if seq in c._replies:
                reply = c.wait_reply(seq, 0)
                lat[i] = (now - t0) / 1e6
                done[i] = int(reply.data["applied_monotonic_ns"])
                if agent_stats is not None:
                    agent_stats.append(reply.data["apply_duration_s"] * 1e3)
                if reply.data.get("errors"):
                    print(f"  ! {nodes[i].name} q={q}: {reply.data['errors']}", file=sys.stderr)
                del pending[fd]
    return lat, done


def agent_cpu(nodes: list[Node]) -> list[float]:
    out = []
    for nd in nodes:
        t = psutil.Process(nd.proc.pid).cpu_times()
        out.append(t.user + t.system)
    return out


def run_phase(nodes: list[Node], quantum: float, switches: int, q0: int) -> dict[str, float]:
    per_ack: list[float] = []
    last_ack: list[float] = []
    skew: list[float] = []
    applied: list[float] = []
    cpu0 = agent_cpu(nodes)
    w0 = time.monotonic()
    next_t = time.monotonic()
    for s in range(switches):
        lat, done = fan_out(nodes, q0 + s, s, applied)
        per_ack += lat
        last_ack.append(max(lat))
        skew.append((max(done) - min(done)) / 1e6)
        next_t += quantum
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    wall = time.monotonic() - w0
    cpu = [(b - a) / wall * 100 for a, b in zip(cpu0, agent_cpu(nodes), strict=True)]
    return {
        "ack_p50": pct(per_ack, 50),
        "ack_p99": pct(per_ack, 99),
        "last_p50": pct(last_ack, 50),
        "last_p99": pct(last_ack, 99),
        "skew_p50": pct(skew, 50),
        "skew_p99": pct(skew, 99),
        "apply_p50": pct(applied, 50),
        "apply_p99": pct(applied, 99),
        "cpu_mean": statistics.fmean(cpu),
        "cpu_max": max(cpu),
    }


def format_row(n: int, quantum: float, r: dict[str, float]) -> str:
    ms = "{:7.3f}".format
    return (
        f"{n:>2} {quantum * 1000:>5.0f}ms | {ms(r['ack_p50'])} {ms(r['ack_p99'])} |"
        f"  {ms(r['last_p50'])}  {ms(r['last_p99'])} |  {ms(r['skew_p50'])}  {ms(r['skew_p99'])} |"
        f"   {ms(r['apply_p50'])}   {ms(r['apply_p99'])} |"
        f" {r['cpu_mean']:5.2f} / {r['cpu_max']:5.2f}"
    )


def cleanup(nodes: list[Node], drv: CgroupDriver) -> None:
    for nd in nodes:
        if nd.client is not None:
            for j in nd.jobs:
                with contextlib.suppress(Exception):
                    nd.client.kill(nd.name, j)
            nd.client.close()
    for nd in nodes:
        if nd.proc.poll() is None:
            nd.proc.send_signal(signal.SIGTERM)
    for nd in nodes:
        try:
            nd.proc.wait(10)
        except subprocess.TimeoutExpired:
            nd.proc.kill()
            nd.proc.wait()
    for nd in nodes:
        for name in drv.children(nd.parent):
            cg = f"{nd.parent}/{name}"
            with contextlib.suppress(Exception):
                drv.kill_all(cg)
            for _ in range(250):
                try:
                    drv.remove(cg)
                    break
                except Exception:
                    time.sleep(0.02)
        with contextlib.suppress(Exception):
            drv.remove(nd.parent)
    with contextlib.suppress(Exception):
        drv.remove("cosched")  # only if nobody else uses it (rmdir of a non-empty group fails)


def go_realtime() -> str:
    # Like a real controller: without it, hogs delay the sender's wakeups too.
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
        return "SCHED_FIFO 10"
    except OSError as e:
        return f"SCHED_OTHER ({e})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", default="2,4,8")
    ap.add_argument("--quanta", default="0.1,0.02", help="quantum lengths in seconds")
    ap.add_argument("--switches", type=int, default=200)
    ap.add_argument("--jobs-per-agent", type=int, default=2, choices=[1, 2])
    ap.add_argument("--backend", default="auto", choices=["auto", "v1", "v2"])
    args = ap.parse_args()

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    drv = open_cgroups(args.backend)
    counts = [int(x) for x in args.nodes.split(",")]
    quanta = [float(x) for x in args.quanta.split(",")]
    print(f"host: {os.cpu_count()} CPUs, kernel {os.uname().release}, cgroup backend {drv.name}")
    # Other processes' load shows up directly in the freeze confirmations (a
    # preempted task must be scheduled to freeze), so record it with the figures.
    load_before = os.getloadavg()
    print(
        f"{args.switches} switches per row, {args.jobs_per_agent} busy job(s) per agent"
        + (
            " (switching between job busy0 and busy1)"
            if args.jobs_per_agent == 2
            else " (its gang alternately runnable on all nodes and frozen on all nodes)"
        )
    )
    header = (
        f"{'N':>2} {'quantum':>7} | {'ack p50':>7} {'ack p99':>7} | {'last p50':>8} "
        f"{'last p99':>8} | {'skew p50':>8} {'skew p99':>8} | {'apply p50':>9} {'apply p99':>9}"
        " | agent CPU % of a core (mean/max)"
    )
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cosched-bench-") as tmpd:
        tmp = Path(tmpd)
        key = secrets.token_hex(32).encode()
        key_file = tmp / "key"
        key_file.write_bytes(key)
        key_file.chmod(0o600)  # the agent refuses a key others can read
        for n in counts:
            nodes: list[Node] = []
            try:
                extra: list[str] = []
                if args.backend != "auto":
                    extra += ["--backend", args.backend]
                nodes = start_nodes(n, key_file, tmp, drv, extra)
                connect(nodes, key)
                for nd in nodes:
                    assert nd.client is not None
                    for j in range(args.jobs_per_agent):
                        jid = f"busy{j}"
                        nd.client.launch(nd.name, jid, BUSY, start_frozen=True)
                        nd.jobs.append(jid)
                sched = go_realtime()
                fan_out(nodes, 1, 0)
                time.sleep(0.3)
                q = 2
                for quantum in quanta:
                    r = run_phase(nodes, quantum, args.switches, q)
                    q += args.switches
                    rows.append(format_row(n, quantum, r))
                    print(rows[-1], flush=True)
            except KeyboardInterrupt:
                print("interrupted: cleaning up", file=sys.stderr)
                cleanup(nodes, drv)
                return 130
            finally:
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
                cleanup(nodes, drv)
    print()
    print(f"benchmark process: {sched}")
    print(
        "load average before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}".format(
            *load_before, *os.getloadavg()
        )
    )
    print(header)
    for row in rows:
        print(row)
    print("all times in ms. ack = fan-out start -> that agent's ack; last = -> the last ack of")
    print("the switch; apply = the agent's own time from frame read to freeze+thaw confirmed;")
    print("skew = max-min of the agents' own apply-completion CLOCK_MONOTONIC stamps.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
