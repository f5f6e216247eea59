"""``python -m agent``: run one node agent until SIGTERM/SIGINT.

A known failure (an unusable key file, a cgroup layout the agent cannot
use, an address it cannot listen on) ends it with one line on stderr,
``agent: error: ... — fix``, and a non-zero status.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from agent.daemon import Agent, AgentConfig, Stop
from agent.plan import WAIT_MODES
from agent.profile import LoopProfile
from agent.realtime import DEFAULT_SLICE_US
from agent.uts import own_hostname
from common.addr import addr_arg
from common.addr import parse_addr as _parse_addr
from common.errors import CoschedError, UsageError
from common.exits import report
from common.keys import daemon_owners, read_key
from common.names import JOB_OUTPUT_DIR, METRICS_PORT

__all__ = ["build_parser", "main", "parse_addr", "read_key"]

PROG = "agent"


def parse_addr(text: str) -> tuple[str, int]:
    """'host:port', '[v6]:port' or ':port' (every address)."""
    return _parse_addr(text, default_host="0.0.0.0")


def build_parser() -> argparse.ArgumentParser:
    any_host = addr_arg(default_host="0.0.0.0")
    p = argparse.ArgumentParser(
        prog="python -m agent",
        description="cosched node agent (started per node by `cosched cluster up`)",
    )
    p.add_argument("--node", required=True, help="node name (commands for others are refused)")
    p.add_argument("--listen", required=True, type=any_host, help="control address host:port")
    p.add_argument(
        "--metrics",
        type=any_host,
        default=None,
        help=f"Prometheus host:port (e.g. :{METRICS_PORT})",
    )
    p.add_argument("--key-file", required=True, help="shared HMAC key (>= 16 bytes, mode 0600)")
    p.add_argument("--cgroup-parent", default=None, help="parent cgroup (default cosched/<node>)")
    p.add_argument(
        "--hostname",
        default=None,
        metavar="NAME",
        help="give this node's jobs their own hostname (a UTS namespace; root; the local "
        "cluster passes the node's name so MPI runtimes see distinct nodes)",
    )
    p.add_argument(
        "--run-dir",
        default=None,
        help=f"job output dir (default {JOB_OUTPUT_DIR}/<node>; root-owned, not"
        " world-writable: docs/security.md)",
    )
    p.add_argument("--failsafe-timeout", type=float, default=2.0, help="seconds (default 2)")
    p.add_argument("--backend", choices=["auto", "v1", "v2"], default="auto")
    p.add_argument("--cgroup-root", default=None, help="override the cgroup mount root")
    p.add_argument("--fifo-priority", type=int, default=10, help="SCHED_FIFO priority, 0 = off")
    p.add_argument(
        "--slice-us",
        type=int,
        default=0,
        help="if SCHED_FIFO is refused: SCHED_OTHER with this slice (100..100000 us;"
        f" {DEFAULT_SLICE_US} is the shortest), 0 = off (default: measured no better)",
    )
    p.add_argument(
        "--leaf-weight",
        type=int,
        default=10000,
        help="if SCHED_FIFO (and --slice-us) is refused: the cpu weight of the agent's own"
        " cgroup leaf against the jobs' (1..10000), 0 = off",
    )
    p.add_argument("--freeze-timeout", type=float, default=1.0, help="seconds to confirm")
    p.add_argument(
        "--tt-wait",
        choices=WAIT_MODES,
        default="sleep",
        help="last stretch before a time-triggered plan's instant: an absolute"
        " clock_nanosleep (default) or a busy spin (docs/cluster.md)",
    )
    p.add_argument(
        "--switch",
        choices=["freezer", "signals"],
        default="freezer",
        help="how jobs are switched: the cgroup freezer (default) or SIGSTOP/SIGCONT to every"
        " process of the job's cgroup, as Rajaei et al. 2008 does (docs/cluster.md, 'Switch "
        "mechanisms')",
    )
    p.add_argument(
        "--decision-interval-ms",
        type=float,
        default=10.0,
        metavar="MS",
        help="how often a local CDC scheme decides (its tick) when the controller does not say;"
        " 0.1..1000 ms (default 10; `cosched cluster up --decision-interval-ms`)",
    )
    p.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s agent[{args.node}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return run(args)
    except CoschedError as err:
        return report(PROG, err)


def run(args: argparse.Namespace) -> int:
    from agent.local import MIN_TICK_MS

    if not MIN_TICK_MS <= args.decision_interval_ms <= 1000.0:
        raise UsageError(
            f"--decision-interval-ms {args.decision_interval_ms:g} is outside "
            f"{MIN_TICK_MS:g}..1000 ms",
            fix="give the local schemes' tick in ms, e.g. 1, 2, 5 or 10",
        )
    if args.slice_us and not 100 <= args.slice_us <= 100_000:
        # the kernel would clamp it silently to its 0.1..100 ms range
        raise UsageError(
            f"--slice-us {args.slice_us} is outside 100..100000 us",
            fix="give the fallback slice in us, e.g. 100 (the shortest), or 0 for none",
        )
    if not 0 <= args.leaf_weight <= 10000:
        raise UsageError(
            f"--leaf-weight {args.leaf_weight} is outside 0..10000",
            fix="give a cgroup cpu weight (10000 is the highest), or 0 for none",
        )
    if args.hostname:
        own_hostname(args.hostname)  # before any thread or job: they inherit it
    cfg = AgentConfig(
        node=args.node,
        listen=args.listen,
        key=read_key(args.key_file, daemon_owners()),
        # "" = cosched/<node> below the host's base (a systemd-delegated unit on v2)
        cgroup_parent=args.cgroup_parent or "",
        run_dir=Path(args.run_dir or f"{JOB_OUTPUT_DIR}/{args.node}"),
        metrics=args.metrics,
        failsafe_timeout=args.failsafe_timeout,
        backend=None if args.backend == "auto" else args.backend,
        cgroup_root=args.cgroup_root,
        fifo_priority=args.fifo_priority,
        slice_us=args.slice_us,
        leaf_weight=args.leaf_weight,
        freeze_timeout=args.freeze_timeout,
        tt_wait=args.tt_wait,
        switch=args.switch,
        decision_interval_ms=args.decision_interval_ms,
    )

    def on_term(signum: int, frame: FrameType | None) -> None:
        # Only the first signal interrupts: a second one must not cut short
        # the thaw-everything in the shutdown path (SIGKILL still works).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Stop(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    agent = Agent(cfg)
    LoopProfile(lambda: agent.cfg.run_dir).install()  # a debug switch: agent/profile.py
    try:
        agent.run()  # its finally thaws every job
    except Stop:
        return 0
    except CoschedError:
        raise  # one line from main (jobs were thawed)
    except Exception:
        logging.getLogger("agent").exception("agent crashed (jobs were thawed)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
