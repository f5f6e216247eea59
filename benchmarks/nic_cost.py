"""What the NIC emulation costs the agent: CPU per message and at 1,000 messages/s.

An agent runs in a child process with a local scheme, on real cgroups when
run as root (a sleeping process keeps each job's group alive; the boosts are
real cpu weight writes) or, with ``--fake``, on the fake cgroupfs (whose
Python file writes cost far more than the kernel's). The NIC path is the
real one: SEQPACKET registration, duplicated sockets in a one-shot epoll set,
SIOCINQ at every tick. This process plays the ranks: it registers ``--ranks``
mesh connections (TCP on 127.0.0.1) and sealed state pages, then sends
messages at ``--rate`` per second spread over the ranks and consumes each one
shortly after it lands, as a program would. The agent's own CPU time
(getrusage in the child) is measured for an idle run (no messages, same tick)
and a loaded run in the same invocation; the difference per message is the
NIC emulation's cost per message.

    .venv/bin/python benchmarks/nic_cost.py [--rate 1000] [--seconds 5] [--scheme cc-b]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import mmap
import multiprocessing as mp
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent import nicproto  # noqa: E402
from agent.daemon import Agent, AgentConfig  # noqa: E402
from agent.jobs import Job  # noqa: E402
from agent.local import LocalConfig  # noqa: E402
from agent.nicguard import JobView  # noqa: E402
from common.cgroups import V1Driver, open_cgroups  # noqa: E402
from common.cgroups.fake import fake_v1  # noqa: E402
from common.ports import free_port  # noqa: E402

KEY = b"benchmark-key-0123456789abcdef"


PARENT = "cosched/bench-nic"


def agent_proc(
    tmp: str,
    scheme: str,
    tick_ms: float,
    ranks: int,
    fake: bool,
    ready: mp.Event,
    stop: mp.Event,
    out: mp.Queue,  # type: ignore[type-arg]
    ports: list[int],
) -> None:
    fs = fake_v1(Path(tmp) / "cg") if fake else None
    drv = V1Driver(Path(tmp) / "cg", fs=fs) if fs is not None else open_cgroups("auto")
    cfg = AgentConfig(
        node="b0",
        listen=("127.0.0.1", 0),
        key=KEY,
        cgroup_parent=PARENT,
        run_dir=Path(tmp) / "run",
        fifo_priority=0,
    )
    agent = Agent(cfg, driver=drv)
    agent.start()
    sleepers = []
    for j in range(ranks):
        cg = f"{PARENT}/job-{j}"
        drv.create(cg)
        agent.jobs[str(j)] = Job(str(j), cg, reattached=True)
        if fake:
            drv.add_pid(cg, 4_000_000 + j)  # keeps the reattached job alive across reap()
        else:
            p = subprocess.Popen(["sleep", "3600"])
            sleepers.append(p)
            drv.add_pid(cg, p.pid)
    agent.local.gossip_port = 0
    # every "rank" is the parent process, rank 0 of a 2-rank job on 127.0.0.1 (agent/nicguard.py)
    me = os.getppid()
    agent.local._authorize = lambda job: JobView(  # type: ignore[method-assign]
        job, {0: me}, lambda: [me], PEERS, ports[int(job)]
    )
    agent.local.configure(LocalConfig(scheme, mpl=ranks, tick_s=tick_ms / 1e3))
    ready.set()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    steps = 0
    while not stop.is_set():
        agent.step(min(0.05, agent.local.timeout()))
        steps += 1
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    st = agent.local.status()
    out.put(
        {
            "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
            "wall_s": time.monotonic() - t0,
            "decisions": st["decisions"],
            "conflicts": st["conflicts"],
            "arrival_events": st["arrival_events"],
            "ticks": st["ticks"],
            "decision_cost_s": st["decision_cost_s"],
            "wakeups": steps,
        }
    )
    agent.shutdown()
    for j in range(ranks):
        with contextlib.suppress(Exception):
            drv.kill_all(f"{PARENT}/job-{j}")
    for p in sleepers:
        p.kill()
        p.wait()
    for j in range(ranks):
        with contextlib.suppress(Exception):
            drv.remove(f"{PARENT}/job-{j}")
    with contextlib.suppress(Exception):
        drv.remove(PARENT + "/agent")
    with contextlib.suppress(Exception):
        drv.remove(PARENT)


PEERS = ("127.0.0.1", "127.0.0.1")


class FakeRank:
    """Rank 0 of job ``job``: its mesh connection to rank 1 (accepted on the job's port, as
    the library's is) and a sealed state page, registered as the library does."""

    def __init__(self, sock_path: Path, job: int, port: int) -> None:
        lst = socket.create_server(("127.0.0.1", port))
        self.far = socket.create_connection(("127.0.0.1", port))
        self.near, _ = lst.accept()
        lst.close()
        self.near.setblocking(False)
        self.fd = os.memfd_create("state", os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, nicproto.STATE_SIZE)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        self.page = mmap.mmap(self.fd, nicproto.STATE_SIZE)
        nicproto.init_state(self.page)
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.conn.connect(str(sock_path))
        msg = {
            "op": "register",
            "job": str(job),
            "rank": 0,
            "pid": os.getpid(),
            "socks": [{"peer": 1, "addr": "127.0.0.1"}],
        }
        socket.send_fds(self.conn, [json.dumps(msg).encode()], [self.fd, self.near.fileno()])
        self.conn.settimeout(5)
        reply, fds, _, _ = socket.recv_fds(self.conn, 4096, 4)
        assert json.loads(reply)["ok"], reply
        for f in fds:
            os.close(f)


def run(
    scheme: str, rate: float, seconds: float, ranks: int, tick_ms: float, fake: bool
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("fork")
        ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
        ports = [free_port() for _ in range(ranks)]
        p = ctx.Process(
            target=agent_proc, args=(tmp, scheme, tick_ms, ranks, fake, ready, stop, out, ports)
        )
        p.start()
        ready.wait(10)
        rs = [FakeRank(Path(tmp) / "run" / "nic.sock", j, ports[j]) for j in range(ranks)]
        sent = 0
        t0 = time.monotonic()
        nxt = t0
        buf = bytearray(64)
        while time.monotonic() - t0 < seconds:
            if rate > 0:
                r = rs[sent % ranks]
                r.far.send(b"m" * 40)  # a header's worth
                sent += 1
                time.sleep(0.0002)  # the program gets to it a little later
                with contextlib.suppress(BlockingIOError):
                    r.near.recv_into(buf)
                nxt += 1.0 / rate
                delay = nxt - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            else:
                time.sleep(0.05)
        stop.set()
        res = out.get(timeout=10)
        p.join(10)
        res["messages"] = sent
        return res


def bare_wakeup_cpu_us(period_s: float, seconds: float = 1.0) -> float:
    """CPU per wake-up of an empty select loop: what the host charges for waking at all."""
    import selectors

    sel = selectors.DefaultSelector()
    a, b = socket.socketpair()
    sel.register(a, selectors.EVENT_READ)
    n, c0, w0 = 0, time.process_time(), time.monotonic()
    while time.monotonic() - w0 < seconds:
        sel.select(period_s)
        n += 1
    cpu = time.process_time() - c0
    sel.close()
    a.close()
    b.close()
    return cpu / max(1, n) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second to the node")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--ranks", type=int, default=4, help="registered ranks (MPL)")
    ap.add_argument("--scheme", default="cc-b")
    ap.add_argument("--tick-ms", type=float, default=10.0)
    ap.add_argument("--fake", action="store_true", help="fake cgroupfs (no root needed)")
    a = ap.parse_args()
    fake = a.fake or os.geteuid() != 0
    bare = bare_wakeup_cpu_us(a.tick_ms / 1e3)
    print(f"this host: one idle select() wake-up costs {bare:.0f} us of CPU (bare loop)")
    idle = run(a.scheme, 0.0, a.seconds, a.ranks, a.tick_ms, fake)
    busy = run(a.scheme, a.rate, a.seconds, a.ranks, a.tick_ms, fake)
    for name, r in (("idle", idle), ("loaded", busy)):
        print(
            f"{name:7s} scheme={a.scheme} ranks={a.ranks} tick={a.tick_ms:g}ms "
            f"messages={r['messages']} ({r['messages'] / r['wall_s']:.0f}/s) "
            f"agent CPU={100 * r['cpu_s'] / r['wall_s']:.2f}% of a core "
            f"decisions={r['decisions']} arrival_events={r['arrival_events']} "
            f"conflicts={r['conflicts']}"
        )
    extra = busy["cpu_s"] / busy["wall_s"] - idle["cpu_s"] / idle["wall_s"]
    per_msg = extra * busy["wall_s"] / max(1, busy["messages"])
    print(
        f"NIC emulation cost per message: {per_msg * 1e6:.2f} us of agent CPU "
        f"(loaded - idle, same run); target: agent CPU <= 2% of a core at 1000 msg/s: "
        f"{100 * busy['cpu_s'] / busy['wall_s']:.2f}%"
    )
    floor = busy["wakeups"] * bare / 1e6 / busy["wall_s"]
    print(
        f"cgroups {'fake' if fake else 'real'}; loaded run: "
        f"{busy['wakeups'] / busy['wall_s']:.0f} wake-ups/s x {bare:.0f} us = "
        f"{100 * floor:.2f}% of a core is this host's wake-up floor; the agent's own work "
        f"above it: {100 * (busy['cpu_s'] / busy['wall_s'] - floor):.2f}%"
    )


if __name__ == "__main__":
    main()
