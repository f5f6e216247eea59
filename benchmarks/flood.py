"""A connection flood from one local user against every daemon (root; issue 28).

Brings up a 2-node local cluster and its controller (strict gang, two 2-node
busy-loop gangs switching every quantum; the daemons run with systemd's default
soft limit of 1,024 open files), makes an unprivileged user, and has that user
open ``--connections`` connections to each of the controller's unix socket, its
TCP port and both agents' ports, as fast as it can, holding them ``--hold`` s.

Prints, for the quiet phase before and the flood itself:

* per target, the connections the user opened, those that failed and those the
  daemon closed on it meanwhile (evicted unauthenticated ones, refused ones past
  the per-user cap); the flood phase runs from the first connect until the user
  has closed every connection (the burst of connects and the hold);
* per daemon, the slowest ``status`` answer (root asks each every 0.2 s);
* per node, the longest time without a switch and, that minus the quantum, the
  longest quantum delay;
* whether every daemon is still the same process, and the targets: every daemon
  answers status within 1 s and keeps switching.

Usage: sudo .venv/bin/python benchmarks/flood.py [--connections 5000] [--hold 12]
       [--quantum 0.1] [--quiet 6]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.host import EMPTY_FOOTPRINT, cosched_footprint  # noqa: E402
from tests.support.live import Live  # noqa: E402
from tests.support.security import DAEMON_NOFILE, Sec, wait_for  # noqa: E402
from tests.support.security_measure import StatusProbe, switch_gaps  # noqa: E402
from tests.support.security_sandbox import Sandbox  # noqa: E402

SPIN = ["/bin/sh", "-c", "while :; do :; done"]


def phase(sec: Sec, seconds: float) -> tuple[dict[str, float], StatusProbe]:
    with StatusProbe(sec) as probe:
        gaps = switch_gaps(sec, seconds)
    return gaps, probe


def report(name: str, gaps: dict[str, float], probe: StatusProbe, quantum: float) -> None:
    slow = ", ".join(f"{d} {s * 1e3:.0f} ms" for d, s in sorted(probe.slowest.items()))
    print(f"  {name}: slowest status answer: {slow}; failures {len(probe.failed)}")
    for node, gap in sorted(gaps.items()):
        print(f"  {name}: {node} longest without a switch {gap * 1e3:.0f} ms, "
              f"longest quantum delay {max(0.0, gap - quantum) * 1e3:.0f} ms")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=5000, help="per target")
    ap.add_argument("--hold", type=float, default=12.0)
    ap.add_argument("--quantum", type=float, default=0.1)
    ap.add_argument("--quiet", type=float, default=6.0, help="seconds measured before")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("flood: run as root (a local cluster)", file=sys.stderr)
        return 2
    if cosched_footprint() != EMPTY_FOOTPRINT:
        print(f"flood: the host has cosched objects: {cosched_footprint()}", file=sys.stderr)
        return 2
    from testbed.cluster import clean as clean_mod
    from testbed.cluster import cluster as cluster_mod

    state = Path(tempfile.mkdtemp(prefix="cosched-flood-"))
    os.environ["COSCHED_STATE_DIR"] = str(state)
    box = Sandbox()
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(DAEMON_NOFILE, limits[1]), limits[1]))
    live = Live(state, box.run)
    ok = True
    try:
        live.up()
        sec = Sec(live, box)
        live.start("gang", quantum=a.quantum)
        for k in range(2):
            live.req("submit", spec={"size": 2, "argv": SPIN, "name": f"spin{k}"})
        wait_for(lambda: any(v == "FROZEN" for v in live.freezer_states().values()), 20)
        pids = sec.agent_pids()
        ctl = live.proc.pid if live.proc else 0
        print(f"flood: 2 nodes, strict gang, quantum {a.quantum:g} s, daemons' open-file limit "
              f"{DAEMON_NOFILE}; one user ({sec.attacker.name}) opens {a.connections} "
              f"connections to each target and holds them {a.hold:g} s")  # fmt: skip
        quiet_gaps, quiet = phase(sec, a.quiet)
        targets = [f"unix:{sec.sock}", f"tcp:127.0.0.1:{live.tcp_port}",
                   *(f"tcp:{n['ctl_ip']}:7070" for n in sec.nodes())]  # fmt: skip
        floods = []
        t0 = time.monotonic()
        for i, target in enumerate(targets):
            ready = box.drop / f"ready-{i}"
            argv = [box.python, "-m", "secattacks", "flood", str(a.connections), str(a.hold),
                    str(ready), target]  # fmt: skip
            floods.append((box.popen_as(sec.attacker, argv), ready, target))
        # from the first connect until the user lets go: the burst of connects and the hold
        with StatusProbe(sec) as flood:
            flood_gaps = switch_gaps(
                sec, 600.0, until=lambda: all(p.poll() is not None for p, _, _ in floods)
            )
        span = time.monotonic() - t0
        print(
            "targets (connections opened / failed / closed by the daemon while held, "
            "seconds to open them):"
        )
        for proc, _, target in floods:
            out, err = proc.communicate(timeout=300)
            lines = [x for x in out.splitlines() if x.startswith("{")]
            r = json.loads(lines[-1]) if lines else {}
            t = r.get("targets", {}).get(target, {})
            print(f"  {target}: {t.get('connected')} / {t.get('failed')} / "
                  f"{r.get('closed_by_server')} ({r.get('open_s')} s)"
                  + ("" if lines else f" [no report: {err.strip()[-200:]}]"))  # fmt: skip
        print(f"measured {a.quiet:g} s before the flood and {span:.1f} s during it (from the "
              "first connect until the user closed its connections):")  # fmt: skip
        report("before", quiet_gaps, quiet, a.quantum)
        report("during", flood_gaps, flood, a.quantum)
        alive = sec.alive()
        same = sec.agent_pids() == pids and live.proc is not None and live.proc.pid == ctl
        print(f"daemons afterwards: {alive}; same processes: {same}")
        slowest = max(flood.slowest.values(), default=float("inf"))
        delay = max(flood_gaps.values(), default=float("inf")) - a.quantum
        answered = all(flood.answers.get(n, 0) > 0 for n in ("controller", "n0", "n1"))
        status_ok = answered and not flood.failed and slowest <= 1.0
        switching = delay < 1.0
        print(f"targets: every daemon answers status within 1 s under the flood: "
              f"{'met' if status_ok else 'MISSED'} (slowest {slowest * 1e3:.0f} ms); "
              f"quanta keep switching: {'met' if switching else 'MISSED'} (longest quantum "
              f"delay {max(0.0, delay) * 1e3:.0f} ms); daemons alive and the same: "
              f"{'met' if same and all(alive.values()) else 'MISSED'}")  # fmt: skip
        ok = status_ok and switching and same and all(alive.values())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        live.stop()
        try:
            live.down()
        finally:
            rep = clean_mod.clean(cluster_mod.Env(state_dir=str(state)))
            if rep.problems:
                print(rep.format(), file=sys.stderr)
            box.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
