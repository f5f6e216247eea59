"""Time-triggered thaw skew by the agents' wake-up mechanism, interleaved (root).

The setting of tests/integration/test_timed_switch_live.py
(``test_both_agents_apply_each_plan_at_its_instant``): ``cluster up`` with 2 nodes
of one core each (cpuset), two spinning jobs per node, the plans sent by this
(SCHED_OTHER) process over the control network. Each round runs every arm once,
in a rotating order (ABC, BCA, CAB, ...); an arm is set from here on both agents'
loop threads (the agent's pid) by the same agent/realtime.py calls the agent
makes on itself, so all arms run on the same cluster, agents and jobs:

* ``plain``: SCHED_OTHER, nice 0, the default slice;
* ``nice-20``: SCHED_OTHER at nice -20;
* ``slice-<us>``: SCHED_OTHER with that slice (``slice-100``: the agent's fallback);
* ``leaf-<w>``: the agent's leaf group (cgroup2 ``cpu.weight``, 100 otherwise) at
  ``w`` against its node's job groups (100 each); parts combine with ``+``.

Each block is ``--switches`` switches on arrival (immediate mode, the test's
reference) then as many time-triggered ones at ``--quantum`` intervals. Per
block it prints the thaw skew p50 (immediate, time-triggered), the lateness
p50 and whether the test's bound held (time-triggered skew p50 <= max(immediate
p50, lateness p50), as the test asserts for agents without SCHED_FIFO); per arm,
over all blocks, the time-triggered skew p50/p99, the wake-up-to-thaw time
(``thaw_writes_s``: the freeze requests written first, then the thaws) and the
blocks within the bound. It also probes once whether the kernel grants an agent
SCHED_DEADLINE (put back at once if it does), and prints the agents' own choice
(status ``wakeup``: what an agent took at start), the cgroup layout and the load.

Usage: sudo .venv/bin/python benchmarks/wakeup_skew.py [--rounds 3] [--switches 40]
       [--quantum 0.05] [--lead 0.02]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent import wire  # noqa: E402
from agent.client import AgentClient  # noqa: E402
from agent.realtime import set_deadline, set_plain, set_short_slice  # noqa: E402

SPIN = ["python3", "-c", "while True: pass"]
ARMS = ("plain", "nice-20", "slice-100")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def set_arm(arm: str, pid: int, leaf: Path) -> None:
    """``arm``: parts joined by ``+``: plain, nice-20, slice-<us>, leaf-<cpu.weight>."""
    set_plain(pid)
    weight = 100
    for part in arm.split("+"):
        if part == "nice-20":
            os.setpriority(os.PRIO_PROCESS, pid, -20)  # the thread ``pid``
        elif part.startswith("slice-"):
            set_short_slice(int(part[len("slice-") :]), pid)
        elif part.startswith("leaf-"):
            weight = int(part[len("leaf-") :])
        elif part != "plain":
            raise SystemExit(
                f"wakeup_skew: unknown arm {part!r} (plain, nice-20, slice-<us>, leaf-<w>)"
            )
    (leaf / "cpu.weight").write_text(f"{weight}\n")


def slice_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return f"{int(line.split(':')[1]) / 1000:g} us"
    return "?"


def probe_deadline(pid: int) -> str:
    try:
        set_deadline(500, 10_000, pid)
    except OSError as e:
        return f"refused ({e})"
    set_plain(pid)
    return "granted (put back to SCHED_OTHER)"


def one_round(
    clients: list[tuple[str, AgentClient]], q: int, at: float | None
) -> list[dict[str, Any]]:
    job = "a" if q % 2 else "b"
    seqs = [
        (c, c.send(wire.QUANTUM, c.quantum_message(name, q, {job: 100}, at=at)))
        for name, c in clients
    ]
    acks = [c.wait_reply(seq, 5).data for c, seq in seqs]
    for ack in acks:
        if ack["errors"]:
            raise RuntimeError(f"switch {q}: {ack['errors']}")
    return acks


def skew_us(acks: list[dict[str, Any]]) -> float:
    t = [int(a["thawed_realtime_ns"]) for a in acks]
    return (max(t) - min(t)) / 1e3


def block(
    clients: list[tuple[str, AgentClient]], q: int, n: int, quantum: float, lead: float
) -> tuple[int, dict[str, list[float]]]:
    out: dict[str, list[float]] = {
        "imm": [],
        "tt": [],
        "late_us": [],
        "writes_us": [],
        "woke_us": [],
    }
    next_t = time.monotonic()
    for _ in range(n):
        out["imm"].append(skew_us(one_round(clients, q, None)))
        q += 1
        next_t += quantum
        time.sleep(max(0.0, next_t - time.monotonic()))
    boundary = time.time() + lead
    late = 0
    for _ in range(n):
        time.sleep(max(0.0, boundary - lead - time.time()))
        acks = one_round(clients, q, boundary)
        q += 1
        out["tt"].append(skew_us(acks))
        for a in acks:
            late += bool(a["late"])
            out["late_us"].append(a["lateness_s"] * 1e6)
            out["writes_us"].append(a["thaw_writes_s"] * 1e6)
            out["woke_us"].append(a["woke_s"] * 1e6)
        boundary += quantum
    out["late_plans"] = [float(late)]
    return q, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--switches", type=int, default=40)
    ap.add_argument("--quantum", type=float, default=0.05)
    ap.add_argument("--lead", type=float, default=0.02)
    ap.add_argument("--arms", default=",".join(ARMS), help="plain, nice-20, slice-<us>")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("wakeup_skew: needs root (cluster up)", file=sys.stderr)
        return 2
    from agent.__main__ import read_key
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster.profiles import parse_profile

    print(f"# {' '.join([Path(sys.executable).name, *sys.argv])}")
    with tempfile.TemporaryDirectory(prefix="cosched-wakeup-") as state_dir:
        env = cluster_mod.Env(state_dir=state_dir)
        clients: list[tuple[str, AgentClient]] = []
        try:
            st = cluster_mod.up(
                cluster_mod.ClusterConfig(nodes=2, profile=parse_profile("gige"), cpus_per_node=1),
                env,
            )
            assert st.key_file is not None
            key = read_key(st.key_file)
            print(f"cgroup layout: {st.cgroup_layout}; cpu: {st.cpu}")
            for node in st.nodes:
                c = AgentClient((node["ctl_ip"], 7070), key, timeout=5)
                deadline = time.monotonic() + 10
                while True:
                    try:
                        c.connect()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                clients.append((str(node["name"]), c))
            pids = [a.pid for a in st.agents]
            unified = Path(st.cgroup_layout.get("unified") or "/sys/fs/cgroup")
            by_node = {str(n["name"]): n for n in st.nodes}
            leaves = [unified / by_node[a.node]["agent_cgroup"] for a in st.agents]
            chosen = [c.status(n)["plans"].get("wakeup", "?") for n, c in clients]
            print(f"agents' own wake-up at start: {chosen}; slices {[slice_of(p) for p in pids]}")
            print(f"SCHED_DEADLINE (500 us / 10 ms) for agent {pids[0]}: {probe_deadline(pids[0])}")
            for name, c in clients:
                for job in ("a", "b"):
                    c.launch(name, job, SPIN, start_frozen=True)
            q = 1
            arms = tuple(args.arms.split(","))
            res: dict[str, dict[str, list[float]]] = {a: {} for a in arms}
            within: dict[str, int] = dict.fromkeys(arms, 0)
            for r in range(args.rounds):
                order = arms[r % len(arms) :] + arms[: r % len(arms)]
                for arm in order:
                    for p, leaf in zip(pids, leaves, strict=True):
                        set_arm(arm, p, leaf)
                    load = os.getloadavg()[0]
                    q, out = block(clients, q, args.switches, args.quantum, args.lead)
                    imm, tt = statistics.median(out["imm"]), statistics.median(out["tt"])
                    lat = statistics.median(out["late_us"])
                    bound = max(imm, lat)
                    ok = tt <= bound
                    within[arm] += ok
                    for k, v in out.items():
                        res[arm].setdefault(k, []).extend(v)
                    print(
                        f"round {r + 1} {arm:10s} load {load:4.2f}: thaw skew p50 us"
                        f" immediate {imm:7.1f}, time-triggered {tt:7.1f} (p99"
                        f" {pct(out['tt'], 99):7.1f}); lateness p50 {lat:6.1f} us;"
                        f" bound {bound:6.1f} {'held' if ok else 'MISSED'};"
                        f" {int(out['late_plans'][0])} late plans"
                    )
            print("per arm, all rounds (time-triggered):")
            for arm in arms:
                d = res[arm]
                print(
                    f"  {arm:10s} thaw skew p50 {statistics.median(d['tt']):7.1f} us,"
                    f" p99 {pct(d['tt'], 99):7.1f} us; lateness p50"
                    f" {statistics.median(d['late_us']):6.1f} us, p99 {pct(d['late_us'], 99):7.1f}"
                    f" us; woke p50 {statistics.median(d['woke_us']):6.1f} us, p99"
                    f" {pct(d['woke_us'], 99):7.1f} us after the instant;"
                    f" wake-up to thaw p50 {statistics.median(d['writes_us']):5.1f} us, p99"
                    f" {pct(d['writes_us'], 99):7.1f} us;"
                    f" bound held in {within[arm]} of {args.rounds} blocks;"
                    f" {int(sum(d['late_plans']))} late plans"
                )
            print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            for _, c in clients:
                c.close()
            cluster_mod.down(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
