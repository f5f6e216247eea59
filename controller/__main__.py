"""``python -m controller``: the cosched controller daemon (docs/controller-api.md)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from agent.__main__ import read_key
from controller.daemon import AGENT_PORT, DEFAULT_RUN_DIR, Daemon, DaemonConfig, nodes_from_cluster
from controller.nodes import NodeInfo
from controller.operator import MIN_QUANTUM
from controller.policies.base import PolicyError
from controller.policies.registry import lookup, names, parse_params


def parse_addr(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"want host:port, got {text!r}")
    return host, int(port)


def parse_agents(text: str, capacity: float) -> list[NodeInfo]:
    out = []
    for item in text.split(","):
        name, sep, addr = item.partition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"--agents: want name=host:port,..., got {item!r}")
        host, port = parse_addr(addr)
        out.append(NodeInfo(name=name, address=(host, port), data_ip=host, capacity=capacity))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m controller", description="cosched controller")
    p.add_argument("--policy", required=True, help=f"one of: {', '.join(names())}")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="policy parameter")
    p.add_argument("--quantum", type=float, default=0.1, help="seconds (>= 0.01)")
    p.add_argument("--cluster-state", default=None, help="cluster.json (default /run/cosched)")
    p.add_argument("--agents", default=None, help="n0=ip:port,... instead of --cluster-state")
    p.add_argument("--capacity", type=float, default=None, help="CPUs per node (--agents)")
    p.add_argument("--agent-port", type=int, default=AGENT_PORT)
    p.add_argument("--key-file", default=None, help="cluster HMAC key (default: the state's)")
    p.add_argument("--run-dir", default=os.environ.get("COSCHED_RUN_DIR", DEFAULT_RUN_DIR))
    p.add_argument("--listen-tcp", type=parse_addr, default=None, metavar="HOST:PORT")
    p.add_argument("--metrics", type=parse_addr, default=None, metavar="HOST:PORT")
    p.add_argument("--checkpoint", default=None, metavar="PATH")
    p.add_argument("--checkpoint-every", type=float, default=5.0, help="autosave period, s")
    p.add_argument("--restore", action="store_true", help="resume from --checkpoint")
    p.add_argument("--operator", action="append", default=[], help="extra operator user")
    p.add_argument("--fifo-priority", type=int, default=20, help="0 = SCHED_OTHER")
    p.add_argument("--log-level", default="INFO")
    return p


def config_from_args(a: argparse.Namespace) -> DaemonConfig:
    try:
        entry = lookup(a.policy)
        raw = {}
        for kv in a.param:
            k, sep, v = kv.partition("=")
            if not sep:
                raise PolicyError(f"--param: want key=value, got {kv!r}")
            raw[k] = v
        params = parse_params(entry, raw)
    except PolicyError as e:
        raise SystemExit(f"error: {e}") from None
    if not a.quantum >= MIN_QUANTUM:
        raise SystemExit(f"error: --quantum must be >= {MIN_QUANTUM} s, got {a.quantum}")
    key_file = a.key_file
    if a.agents:
        nodes = parse_agents(a.agents, a.capacity or 1.0)
    else:
        path = a.cluster_state or os.path.join(
            os.environ.get("COSCHED_STATE_DIR", "/run/cosched"), "cluster.json"
        )
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: cannot read cluster state {path}: {e}") from None
        nodes = nodes_from_cluster(state, a.agent_port)
        if a.capacity:
            nodes = [NodeInfo(n.name, n.address, n.data_ip, a.capacity) for n in nodes]
        key_file = key_file or state.get("key_file")
    if not key_file:
        raise SystemExit("error: no key: give --key-file")
    return DaemonConfig(
        policy=a.policy,
        params=params,
        nodes=nodes,
        key=read_key(key_file),
        quantum=a.quantum,
        run_dir=a.run_dir,
        listen_tcp=a.listen_tcp,
        metrics=a.metrics,
        checkpoint=a.checkpoint,
        checkpoint_every=a.checkpoint_every,
        restore=a.restore,
        fifo_priority=a.fifo_priority,
        operators=frozenset(a.operator),
    )


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    logging.basicConfig(
        level=a.log_level.upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    Daemon(config_from_args(a)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
