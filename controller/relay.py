"""A relay: one sub-controller between the controller and a group of agents (issue 15).

To the controller a relay looks like an agent; it fans each quantum's batch out to its
agents with the controller's own pool code and answers with one frame: the summary of
its agents' acks (controller/acks.py) and the nodes that gave none. Its
protocol and fail-safe choice: docs/scale.md, "The relay tree".

    python -m controller.relay --name r0 --listen 127.0.0.1:17900 \
        --state cluster.json --slice 0:32 --key-file KEY
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import selectors
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from agent import wire
from agent.client import AgentError
from agent.failsafe import FailSafe, Transition
from agent.server import AgentConn, AgentServer
from controller.acks import AckFolder
from controller.nodes import HEARTBEAT_EVERY, AgentPool, NodeInfo

log = logging.getLogger("controller.relay")

# Job events from the agents are read this often when no frame wakes the loop.
EVENT_POLL_S = 0.02
FORWARDED = frozenset({wire.LAUNCH, wire.KILL, wire.STATUS, wire.LOCAL_POLICY})


@dataclass
class RelayConfig:
    name: str
    listen: tuple[str, int]
    nodes: list[NodeInfo]
    key: bytes = field(repr=False)
    failsafe_timeout: float = 2.0
    timeout: float = 2.0  # per agent request, as the controller's pool


class Relay:
    """Serve one controller; drive ``cfg.nodes``' agents with an :class:`AgentPool`."""

    def __init__(self, cfg: RelayConfig, sel: selectors.BaseSelector | None = None) -> None:
        self.cfg = cfg
        self.sel = sel or selectors.DefaultSelector()
        self.server = AgentServer(self.sel, cfg.key, cfg.name, self._on_message, self._heard)
        self.pool = AgentPool(cfg.nodes, cfg.key, timeout=cfg.timeout)
        self.pool.on_connect = self._agent_connected
        self.folder = AckFolder({n.name: n.capacity for n in cfg.nodes})
        self.failsafe = FailSafe(cfg.failsafe_timeout, time.monotonic)
        self.hellos: dict[str, dict[str, Any]] = {}
        self.stopping = False
        self._started = False

    # ---- life ---------------------------------------------------------------
    def start(self) -> None:
        self.server.listen(self.cfg.listen)
        for n in self.cfg.nodes:  # one try each; the rest when the controller is there
            self.pool._try_connect(n)
        self._started = True

    def run(self) -> None:
        if not self._started:
            self.start()
        while not self.stopping:
            self.step(EVENT_POLL_S)

    def step(self, timeout: float) -> None:
        for key, mask in self.sel.select(timeout):
            if self.server.owns(key.data):
                self.server.ready(key.data, mask)
        self.server.sweep()
        if self.failsafe.poll() is Transition.ACTIVATE:
            log.warning(
                "relay %s: controller silent for %.1f s; its agents hear nothing either "
                "and fail safe on their own",
                self.cfg.name,
                self.failsafe.age(),
            )
        for ev in self.pool.events():
            self.server.send_event(ev)

    def close(self) -> None:
        self.server.close()
        self.pool.close()

    # ---- upstream -----------------------------------------------------------
    def _heard(self, conn: AgentConn) -> None:
        self.failsafe.heard()
        # Heartbeats and reconnects downstream only on the controller's frames; at half
        # the controller's period, so an agent hears as often as without the relay.
        self.pool.maintain(every=HEARTBEAT_EVERY / 2)

    def _agent_connected(self, node: str, hello: Any) -> None:
        self.hellos[node] = dict(hello)
        if self._started:  # tell the controller (controller/relaypool.py re-runs on_connect)
            self.server.send_event({"event": "agent_connected", "node": node, "hello": dict(hello)})

    def _send(self, conn: AgentConn, mtype: str, data: dict[str, Any], re: int) -> None:
        self.server.send(conn, mtype, data, re)

    def _on_message(self, conn: AgentConn, msg: wire.Message) -> None:
        try:
            wire.validate(msg)
        except wire.BadRequest as e:
            self._send(conn, wire.ERROR, {"code": e.code, "reason": str(e)}, msg.seq)
            return
        if msg.type == wire.HELLO:
            self._on_hello(conn, msg)
        elif msg.type == wire.HEARTBEAT:
            self._send(conn, wire.HEARTBEAT, self._summary(), msg.seq)
        elif msg.type == wire.QUANTUM_BATCH:
            self._send(conn, wire.ACK, self._on_batch(msg.data), msg.seq)
        elif msg.type == wire.STATUS and "node" not in msg.data:
            self._send(conn, wire.OK, self._summary(), msg.seq)
        elif msg.type in FORWARDED:
            self._forward(conn, msg)
        else:
            reason = f"{msg.type!r} is not a request a relay takes"
            self._send(conn, wire.ERROR, {"code": "bad_request", "reason": reason}, msg.seq)

    def _summary(self) -> dict[str, Any]:
        up = self.pool.connected()
        return {
            "node": self.cfg.name,
            "relay": True,
            "failsafe_active": self.failsafe.active,
            "heartbeat_age_s": self.failsafe.age(),
            "nodes": [n.name for n in self.cfg.nodes],
            "connected": sorted(n for n, ok in up.items() if ok),
        }

    def _on_hello(self, conn: AgentConn, msg: wire.Message) -> None:
        if conn.established:
            reason = "hello on an established connection"
            self._send(conn, wire.ERROR, {"code": "bad_request", "reason": reason}, msg.seq)
            return
        conn.session.conn = os.urandom(16).hex()
        conn.established = True
        conn.peer_sender = msg.sender
        self.failsafe.heard()
        self.pool.maintain(every=HEARTBEAT_EVERY / 2)
        data = {
            **self._summary(),
            "nonce": msg.data["nonce"],
            "conn": conn.session.conn,
            "protocol": wire.VERSION,
            "failsafe_timeout": self.failsafe.timeout,
            "agents": {n: h for n, h in self.hellos.items() if self.pool.connected().get(n)},
            "pid": os.getpid(),
        }
        self._send(conn, wire.HELLO, data, msg.seq)
        self.server.send_backlog(conn)

    def _on_batch(self, data: dict[str, Any]) -> dict[str, Any]:
        """Fan one quantum out to this relay's agents; every node's ack or error back."""
        commands = data["commands"]
        mine = {n: jobs for n, jobs in commands.items() if n in self.pool.clients}
        errors = {n: "not behind this relay" for n in commands if n not in mine}
        for n, jobs in mine.items():
            if not isinstance(jobs, dict):
                errors[n] = "bad_request: a node's command must be an object of job -> weight"
        mine = {n: j for n, j in mine.items() if n not in errors}
        at = data.get("at")
        at = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None
        measure = data.get("measure")
        measure = [str(d) for d in measure] if isinstance(measure, list) else None
        results = self.pool.quantum(
            data["q"], mine, at=at, start=float(data["start"]), measure=measure
        )
        for n, r in results.items():
            if r.ack is None:
                errors[n] = r.error or "no ack"
        # one summary, not an ack per node: what the scheduler reads is sums, counts and
        # extremes over nodes (controller/acks.py, docs/scale.md)
        summary = self.folder.fold(mine, {n: r.ack for n, r in results.items()})
        return {"node": self.cfg.name, "summary": summary.to_wire(), "errors": errors}

    def _forward(self, conn: AgentConn, msg: wire.Message) -> None:
        node = msg.data.get("node")
        if node not in self.pool.clients:
            reason = f"node {node!r} is not behind relay {self.cfg.name}"
            self._send(conn, wire.ERROR, {"code": "wrong_node", "reason": reason}, msg.seq)
            return
        try:
            reply = self.pool.request(str(node), msg.type, dict(msg.data))
        except AgentError as e:
            self._send(conn, wire.ERROR, {"code": e.code, "reason": e.reason}, msg.seq)
            return
        except ConnectionError as e:
            self._send(conn, wire.ERROR, {"code": "unreachable", "reason": str(e)}, msg.seq)
            return
        self._send(conn, wire.OK, reply, msg.seq)


def nodes_from_state(path: str, slice_: str | None) -> list[NodeInfo]:
    """The nodes of a cluster state file (controller.daemon's reader), optionally a slice a:b."""
    import json

    from controller.daemon import nodes_from_cluster

    with open(path, encoding="utf-8") as f:
        nodes = nodes_from_cluster(json.load(f))
    if slice_:
        a, _, b = slice_.partition(":")
        nodes = nodes[int(a or 0) : int(b) if b else None]
    return nodes


def main(argv: list[str] | None = None) -> int:
    from common.addr import addr_arg, format_addr
    from common.errors import CoschedError
    from common.keys import daemon_owners, read_key

    ap = argparse.ArgumentParser(
        prog="python -m controller.relay",
        description="A relay between the controller and a group of agents (docs/scale.md).",
    )
    ap.add_argument("--name", required=True, help="the relay's name (the controller's relay list)")
    ap.add_argument(
        "--listen", required=True, type=addr_arg(), help="HOST:PORT the controller connects to"
    )
    ap.add_argument("--state", required=True, help="cluster state file listing the agents")
    ap.add_argument("--slice", default=None, help="START:END of the state's nodes (default all)")
    ap.add_argument("--key-file", required=True, help="the cluster's key (0600)")
    ap.add_argument("--failsafe-timeout", type=float, default=2.0)
    ap.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        help="seconds to wait for each agent's reply (default 2.0, as the controller's pool)",
    )
    args = ap.parse_args(argv)
    if args.timeout <= 0:
        ap.error(f"--timeout {args.timeout}: must be a positive number of seconds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s relay %(message)s")
    try:
        key = read_key(args.key_file, daemon_owners())
        nodes = nodes_from_state(args.state, args.slice)
    except (CoschedError, OSError, ValueError) as e:
        print(f"relay: {args.state}: {e}" if isinstance(e, OSError | ValueError)
              and not isinstance(e, CoschedError) else f"relay: {e}", file=sys.stderr)  # fmt: skip
        return 2
    if not nodes:
        print(f"relay: no nodes in {args.state} slice {args.slice}", file=sys.stderr)
        return 2
    relay = Relay(
        RelayConfig(args.name, args.listen, nodes, key, args.failsafe_timeout, args.timeout)
    )

    def _stop(*_: object) -> None:
        relay.stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        relay.start()
    except OSError as e:
        print(f"relay: cannot listen on {format_addr(args.listen)}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"relay {args.name}: {len(nodes)} agents, listening on {format_addr(args.listen)}",
          flush=True)  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        relay.run()
    relay.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
