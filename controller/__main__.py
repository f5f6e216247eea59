"""``python -m controller``: the cosched controller daemon (docs/controller-api.md).

Its flags are declared once, in controller/flags.py, and shared with
``cosched controller start``. A known failure (bad policy or parameter,
unreadable cluster state or key, an agent that does not answer) ends the
daemon with one line on stderr, ``controller: error: ... — fix``, and a
non-zero status; ``cosched controller start`` shows that line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from common.addr import parse_addr
from common.errors import CoschedError, UsageError
from common.exits import report
from common.keys import daemon_owners, read_key, read_user_keys
from common.names import cluster_state_path
from controller.daemon import Daemon, DaemonConfig, nodes_from_cluster, relays_from_cluster
from controller.flags import MAX_LEAD_MS, SCHEME_FLAGS, add_daemon_flags, cdc_policies
from controller.launchenv import net_env
from controller.nodes import NodeInfo
from controller.operator import MIN_QUANTUM
from controller.policies.base import PolicyError
from controller.policies.registry import lookup, make_policy, parse_params
from controller.relaypool import RelayInfo
from controller.rights import operator_uids

PROG = "controller"


class ConfigError(UsageError):
    """The daemon's command line or the files it names cannot be used."""


def parse_agents(text: str, capacity: float) -> list[NodeInfo]:
    """``n0=10.0.0.1:7070,n1=...`` -> the nodes (``--agents``)."""
    out = []
    for item in text.split(","):
        name, sep, addr = item.partition("=")
        if not sep or not name:
            raise ConfigError(
                f"--agents: want name=host:port,..., got {item!r}",
                fix="e.g. --agents n0=10.212.0.1:7070,n1=10.212.0.2:7070",
            )
        try:
            host, port = parse_addr(addr)
        except ValueError as err:
            raise ConfigError(f"--agents {name}: {err}") from None
        out.append(NodeInfo(name=name, address=(host, port), data_ip=host, capacity=capacity))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m controller",
        description="The cosched controller daemon. Usually started by "
        "`cosched controller start`, which takes the same flags.",
    )
    add_daemon_flags(p)
    return p


def _policy_params(a: argparse.Namespace) -> dict[str, object]:
    try:
        entry = lookup(a.policy)
        raw = {}
        for kv in a.param:
            k, sep, v = kv.partition("=")
            if not sep:
                raise PolicyError(f"--param: want key=value, got {kv!r}")
            raw[k] = v
        known = {p.name for p in entry.params}
        for flag, key in SCHEME_FLAGS.items():
            value = getattr(a, key, None)
            if value is None:
                continue
            if key not in known:
                raise PolicyError(
                    f"{flag} applies to the space-sharing policies ({', '.join(cdc_policies())}),"
                    f" not to {entry.name!r}"
                )
            if key in raw:
                raise PolicyError(f"{flag} and --param {key}=... both given; give one of them")
            raw[key] = str(value)
        params = parse_params(entry, raw)
        make_policy(entry.name, 1, params)  # values the constructor refuses: one line now
        return params
    except PolicyError as e:
        # policies are pure and know nothing of CoschedError: wrap here
        raise ConfigError(str(e), fix="see `cosched policies`") from None


def cluster_from_state(
    path: str, agent_port: int
) -> tuple[list[NodeInfo], list[RelayInfo], dict[str, str], str | None]:
    """Nodes, relays, the ranks' network variables and the key file a cluster state file
    (testbed/cluster/state.py) gives; anything wrong in it is one ConfigError naming it."""
    try:
        with open(path) as f:
            state = json.load(f)
        if not isinstance(state, dict):
            raise ValueError(f"a JSON object is wanted, not {type(state).__name__}")
        key_file = state.get("key_file")
        if key_file is not None and not isinstance(key_file, str):
            raise ValueError(f"key_file is {type(key_file).__name__}, not a path")
        nodes = nodes_from_cluster(state, agent_port)
        relays = relays_from_cluster(state)
        job_env = net_env(state)
    # ArithmeticError: JSON's Infinity where an int is wanted (a rate, a port)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ArithmeticError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise ConfigError(
            f"cannot use cluster state {path}: {why!s}".replace("\n", " "),
            fix="bring a cluster up with `cosched cluster up`, or give --agents",
        ) from None
    return nodes, relays, job_env, key_file


def config_from_args(a: argparse.Namespace) -> DaemonConfig:
    params = _policy_params(a)
    if not a.quantum >= MIN_QUANTUM:
        raise ConfigError(f"--quantum must be >= {MIN_QUANTUM} s, got {a.quantum}")
    if a.keep_ended < 0:
        raise ConfigError(f"--keep-ended must be >= 0 jobs, got {a.keep_ended}")
    if not a.connect_timeout > 0:
        raise ConfigError(f"--connect-timeout must be > 0 s, got {a.connect_timeout:g}")
    if not 0 <= a.lead_ms <= MAX_LEAD_MS:
        raise ConfigError(
            f"--lead-ms must be in 0..{MAX_LEAD_MS:g} ms, got {a.lead_ms:g}",
            fix="e.g. --lead-ms 20 (time-triggered switches) or --lead-ms 0 (on arrival)",
        )
    key_file = a.key_file
    job_env: dict[str, str] = {}
    relays: list[RelayInfo] = []
    if a.agents:
        nodes = parse_agents(a.agents, a.capacity or 1.0)
    else:
        nodes, relays, job_env, state_key = cluster_from_state(
            a.cluster_state or cluster_state_path(), a.agent_port
        )
        if a.capacity:
            nodes = [NodeInfo(n.name, n.address, n.data_ip, a.capacity) for n in nodes]
        key_file = key_file or state_key
    if not key_file:
        raise ConfigError("no cluster key", fix="give --key-file")
    key = read_key(key_file, daemon_owners())
    user_keys = read_user_keys(a.user_keys, key) if a.user_keys else None
    if user_keys is not None and not a.listen_tcp:
        raise ConfigError("--user-keys without --listen-tcp", fix="add --listen-tcp HOST:PORT")
    try:
        operators = operator_uids(a.operator)  # names to uids once, at start
    except ValueError as e:
        raise ConfigError(str(e), fix="give users of this host, or no --operator") from None
    return DaemonConfig(
        policy=a.policy,
        params=params,
        nodes=nodes,
        key=key,
        quantum=a.quantum,
        run_dir=a.run_dir,
        listen_tcp=a.listen_tcp,
        metrics=a.metrics,
        checkpoint=a.checkpoint,
        checkpoint_every=a.checkpoint_every,
        connect_timeout=a.connect_timeout,
        keep_ended=a.keep_ended,
        restore=a.restore,
        fifo_priority=a.fifo_priority,
        lead_ms=a.lead_ms,
        ack_devices=a.ack_devices,
        operators=operators,
        job_env=job_env,
        relays=relays,
        user_keys=user_keys,
    )


def run(a: argparse.Namespace) -> None:
    cfg = config_from_args(a)
    try:
        daemon = Daemon(cfg)
    except PolicyError as e:  # a value the policy's constructor refuses (e.g. band=-1)
        raise ConfigError(str(e), fix="see `cosched policies`") from None
    daemon.run()


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        level = logging.getLevelNamesMapping().get(a.log_level.upper())
        if level is None:
            raise ConfigError(f"--log-level: unknown level {a.log_level!r}", fix="e.g. INFO")
        logging.basicConfig(
            level=level,
            format="%(asctime)s %(name)s %(levelname)s %(message)s",
            stream=sys.stderr,
        )
        run(a)
    except CoschedError as err:
        return report(PROG, err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
