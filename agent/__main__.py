"""``python -m agent``: run one node agent until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from agent.daemon import Agent, AgentConfig, Stop


def parse_addr(text: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port'."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def read_key(path: str) -> bytes:
    key = Path(path).read_bytes().strip()
    if len(key) < 16:
        raise SystemExit(f"key file {path} holds fewer than 16 bytes")
    return key


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agent", description="cosched node agent")
    p.add_argument("--node", required=True, help="node name (commands for others are refused)")
    p.add_argument("--listen", required=True, type=parse_addr, help="control address host:port")
    p.add_argument("--metrics", type=parse_addr, default=None, help="Prometheus host:port")
    p.add_argument("--key-file", required=True, help="shared HMAC key (>= 16 bytes)")
    p.add_argument("--cgroup-parent", default=None, help="parent cgroup (default cosched/<node>)")
    p.add_argument("--run-dir", default=None, help="job output dir (default /tmp/cosched/<node>)")
    p.add_argument("--failsafe-timeout", type=float, default=2.0, help="seconds (default 2)")
    p.add_argument("--backend", choices=["auto", "v1", "v2"], default="auto")
    p.add_argument("--cgroup-root", default=None, help="override the cgroup mount root")
    p.add_argument("--fifo-priority", type=int, default=10, help="SCHED_FIFO priority, 0 = off")
    p.add_argument("--freeze-timeout", type=float, default=1.0, help="seconds to confirm")
    p.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s agent[{args.node}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    cfg = AgentConfig(
        node=args.node,
        listen=args.listen,
        key=read_key(args.key_file),
        cgroup_parent=args.cgroup_parent or f"cosched/{args.node}",
        run_dir=Path(args.run_dir or f"/tmp/cosched/{args.node}"),
        metrics=args.metrics,
        failsafe_timeout=args.failsafe_timeout,
        backend=None if args.backend == "auto" else args.backend,
        cgroup_root=args.cgroup_root,
        fifo_priority=args.fifo_priority,
        freeze_timeout=args.freeze_timeout,
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
    try:
        agent.run()  # its finally thaws every job
    except Stop:
        return 0
    except Exception:
        logging.getLogger("agent").exception("agent crashed (jobs were thawed)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
