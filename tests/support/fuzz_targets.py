"""Fuzz targets (issue 13): every input surface that takes bytes or documents from
outside, driven by hypothesis. Each target takes one generated input and returns
"accepted" or "rejected"; anything else it does — an exception other than the
surface's own error, a rejection that does not say where — is a failure.

Run by tests/fuzz/test_fuzz.py with a small budget in CI and by benchmarks/fuzz.py
with 10,000 inputs each.
"""

from __future__ import annotations

import json
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from agent import wire
from controller import checkpoint
from controller.acks import AckSummary
from controller.api import Caller, Context, handle
from controller.jobs import RequestError, SpecError, parse_spec
from controller.scheduler import Scheduler
from testbed.experiment.fields import SpecError as ExperimentSpecError
from testbed.experiment.registry import load as load_study
from testbed.sim.workloads.swf import SwfError, read_swf
from tests.support.controller_fakes import FakePool
from tests.support.fuzz_security_targets import (
    nesting_cases,
    nesting_target,
    nic_datagrams,
    nic_target,
)

REPO = Path(__file__).resolve().parents[2]
KEY = b"fuzz-key-0123456789abcdef012345"


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy[Any]
    run: Callable[[Any], str]


# ---- values a JSON document can hold ------------------------------------------------------

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = ["op", "args", "spec", "job_id", "size", "argv", "class", "env", "cwd", "name",
        "estimate", "exclusive", "all", "checkpoint", "quantum", "max_slots", "user"]  # fmt: skip
OPS = ["submit", "jobs", "job", "matrix", "slice", "kill", "class", "set", "config", "status",
       "checkpoint", "shutdown", "nope"]  # fmt: skip


# ---- the wire decoder (agent/wire.py) -----------------------------------------------------


def _frames() -> st.SearchStrategy[bytes]:
    """Valid frames, then cut, flipped, concatenated or replaced by noise."""
    msg = st.builds(
        lambda t, seq, data: wire.encode(KEY, wire.Message(t, "fuzz", seq, "", None, 1.0, data)),
        st.sampled_from(sorted(wire.MESSAGE_TYPES)),
        st.integers(min_value=1, max_value=2**40),
        st.dictionaries(st.sampled_from(KEYS), json_value, max_size=4),
    )
    mutated = st.tuples(msg, st.integers(min_value=0, max_value=400), st.integers(0, 255)).map(
        lambda t: t[0][: t[1]] + bytes([t[2]]) + t[0][t[1] + 1 :]
    )
    return st.one_of(
        st.binary(max_size=300),
        msg,
        mutated,
        st.lists(msg, min_size=2, max_size=3).map(b"".join),
        msg.map(lambda f: f[: len(f) // 2]),
    )


def wire_target(data: bytes) -> str:
    dec = wire.FrameDecoder(KEY)
    try:
        msgs = dec.feed(data)
    except wire.WireError as e:
        assert str(e), "a refusal must say why"
        return "rejected"
    for m in msgs:
        try:
            wire.validate(m)
        except wire.BadRequest as e:
            assert m.type in str(e) or "'" in str(e), e  # names the request or field
            return "rejected"
    return "accepted"


# ---- the controller's API (controller/api.py) --------------------------------------------


class _Daemon:
    def write_checkpoint(self) -> str:
        return "/nonexistent/ck.json"

    def request_shutdown(self, checkpoint: bool) -> str | None:
        return None

    def status_extra(self) -> dict[str, Any]:
        return {}


def _ctx() -> Context:
    s = Scheduler("gang", {}, FakePool(4), wall=lambda: 100.0, mono=lambda: 100.0)
    return Context(s, _Daemon(), operators=frozenset({0}), user_exists=lambda u: True)  # type: ignore[arg-type]


_CTX: list[Context] = []


def api_request() -> st.SearchStrategy[Any]:
    args = st.dictionaries(st.sampled_from(KEYS), json_value, max_size=5)
    spec = st.fixed_dictionaries(
        {},
        optional={
            k: json_value
            for k in ["size", "argv", "class", "env", "cwd", "name", "estimate", "exclusive"]
        },
    )
    structured = st.builds(
        lambda op, a, sp: {"op": op, "args": {**a, "spec": sp}},
        st.sampled_from(OPS),
        args,
        spec,
    )
    return st.one_of(json_value, structured)


def api_target(request: Any) -> str:
    if not _CTX or len(_CTX[0].sched.table.jobs) > 500:  # a fresh table now and then
        _CTX[:] = [_ctx()]
    # the unix socket's line: what reaches handle() is what json.loads gives
    request = json.loads(json.dumps(request))
    for user in ("alice", "root"):
        reply = handle(_CTX[0], request, Caller(user, "unix"))
        assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
        if not reply["ok"]:
            msg = reply["error"]
            assert "internal error" not in msg, msg  # a handler crashed
            assert "\n" not in msg and msg, msg
            return "rejected"
    return "accepted"


# ---- job specs (controller/jobs.py) -------------------------------------------------------


def spec_target(raw: Any) -> str:
    try:
        parse_spec(raw, 4)
    except SpecError as e:
        msg = str(e)
        assert msg.startswith("spec") or "JSON object" in msg, msg  # names the field
        assert "\n" not in msg
        return "rejected"
    return "accepted"


def job_spec() -> st.SearchStrategy[Any]:
    good = {"size": 2, "argv": ["true"]}
    fields = st.dictionaries(
        st.sampled_from(["size", "argv", "class", "env", "cwd", "name", "estimate",
                         "exclusive", "bogus"]), json_value, max_size=4)  # fmt: skip
    return st.one_of(json_value, fields.map(lambda d: {**good, **d}))


# ---- study specs (TOML; testbed/experiment/fields.py, registry.py) -----------------------

_SPECS = [REPO / "experiments" / n for n in
          ("paired-vs-gang.toml", "cdc-policies.toml", "cdc-npb.toml", "sim-vs-live.toml",
           "rajaei-gang-vs-backfill.toml", "dhc.toml", "sim-paired-fig10-12.toml",
           "rajaei-live.toml", "dhc-live.toml")]  # fmt: skip


def toml_doc() -> st.SearchStrategy[tuple[int, list[tuple[int, str]]]]:
    """Which real spec, and lines of it replaced by fuzz (key = value with odd values)."""
    values = st.one_of(
        st.integers(min_value=-5, max_value=10**6).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.text(alphabet="abcxyz01-_ ", max_size=8).map(json.dumps),
        st.sampled_from(["[]", "[1, 2]", '["x"]', "{}", "true", "false", '"WL9"', "-1.5"]),
    )
    keys = st.sampled_from(["nodes", "quantum", "jobs", "mpls", "schemes", "workload",
                            "programs", "duration", "seed", "loads", "kind", "link",
                            "npb_reps", "compute_ms", "paper_sizes", "cpus_per_node",
                            "gangs", "seeds", "slots", "switch_costs", "families",
                            "policies", "mode", "label"])  # fmt: skip
    edit = st.tuples(st.integers(min_value=0, max_value=150), st.tuples(keys, values).map(
        lambda kv: f"{kv[0]} = {kv[1]}"))  # fmt: skip
    return st.tuples(st.integers(0, len(_SPECS) - 1), st.lists(edit, max_size=3))


def toml_target(case: tuple[int, list[tuple[int, str]]]) -> str:
    which, edits = case
    lines = _SPECS[which].read_text().splitlines()
    for at, text in edits:
        if lines:
            lines[at % len(lines)] = text
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.toml"
        path.write_text("\n".join(lines) + "\n")
        try:
            tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError:
            parsable = False
        else:
            parsable = True
        try:
            load_study(path)
        except ExperimentSpecError as e:
            msg = str(e)
            assert str(path) in msg or "fuzz.toml" in msg, msg  # names the file
            assert "\n" not in msg, msg
            return "rejected"
        assert parsable, "an unparsable TOML file was accepted"
    return "accepted"


# ---- SWF lines (testbed/sim/workloads/swf.py) ---------------------------------------------


def swf_lines() -> st.SearchStrategy[list[str]]:
    field = st.one_of(
        st.integers(min_value=-2, max_value=10**7).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(alphabet="0123456789.-eE+xa", min_size=1, max_size=6),
    )
    good = "1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"
    line = st.lists(field, min_size=0, max_size=20).map(" ".join)
    return st.lists(st.one_of(line, st.just(good), st.just("; comment")), max_size=5)


def swf_target(lines: list[str]) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.swf"
        path.write_text("\n".join(lines) + "\n")
        try:
            read_swf(path)
        except SwfError as e:
            msg = str(e)
            assert msg.startswith(f"{path}:"), msg  # file:line
            assert "\n" not in msg, msg
            return "rejected"
    return "accepted"


# ---- the relay's quantum_batch frames (controller/relay.py) ------------------------------


class _RelayPool:
    """Three agents that ack whatever they are sent (the relay's parsing is the target)."""

    def __init__(self) -> None:
        from controller.nodes import NodeInfo

        self.nodes = [NodeInfo(f"n{i}", ("127.0.0.1", 1), "10.0.0.1") for i in range(3)]
        self.clients: dict[str, object] = {n.name: object() for n in self.nodes}

    def quantum(self, q: int, commands: dict[str, Any], at: float | None = None,
                start: float | None = None, measure: Any = None) -> dict[str, Any]:  # fmt: skip
        from controller.nodes import QuantumResult

        assert isinstance(q, int) and all(isinstance(j, dict) for j in commands.values())
        return {n: QuantumResult(n, {"q": q, "jobs": sorted(j)}, None, 1) for n, j in
                commands.items()}  # fmt: skip

    def maintain(self, every: float = 0.5) -> None:
        pass

    def connected(self) -> dict[str, bool]:
        return {n: True for n in self.clients}


def _relay() -> Any:
    from controller.relay import Relay, RelayConfig

    r = Relay(RelayConfig("r0", ("127.0.0.1", 1), [], KEY))
    r.pool = _RelayPool()
    r.sent = []
    r._send = lambda conn, mtype, data, re: r.sent.append((mtype, data))
    return r


_RELAY = _relay()


def relay_batch() -> st.SearchStrategy[Any]:
    """quantum_batch data: well-formed, then with any field or a node's command wrong."""
    weights = st.dictionaries(st.text(max_size=4), st.integers(0, 1000) | json_value, max_size=3)
    commands = st.dictionaries(
        st.sampled_from(["n0", "n1", "n2", "n9", ""]) | st.text(max_size=4),
        weights | json_value,
        max_size=4,
    )
    good = st.fixed_dictionaries(
        {"q": st.integers(0, 2**40), "start": st.floats(0, 2e9), "commands": commands},
        optional={"at": st.floats(0, 2e9) | json_value},
    )
    return good | st.dictionaries(st.sampled_from(["q", "start", "commands", "at", "x"]),
                                  json_value, max_size=4)  # fmt: skip


def relay_batch_target(data: Any) -> str:
    _RELAY.sent.clear()
    msg = wire.Message(wire.QUANTUM_BATCH, "controller", 1, "", None, 1.0, data)
    _RELAY._on_message(object(), msg)
    assert len(_RELAY.sent) == 1, _RELAY.sent  # one answer, whatever came
    mtype, reply = _RELAY.sent[0]
    if mtype == wire.ERROR:
        why = str(reply["reason"])
        assert reply["code"] and ("quantum_batch" in why or "'" in why), reply
        return "rejected"
    assert mtype == wire.ACK, mtype
    # one summary of the acks (controller/acks.py): every node answered or has its error
    summary = AckSummary.from_wire(reply["summary"])
    assert set(reply["errors"]) <= set(data["commands"]), reply
    assert summary.answered + len(reply["errors"]) == len(data["commands"]), reply
    assert all(isinstance(v, str) and v for v in reply["errors"].values()), reply
    return "rejected" if reply["errors"] else "accepted"


# ---- checkpoint files (controller/checkpoint.py, Scheduler.restore) ----------------------


def _scheduler() -> Scheduler:
    return Scheduler("gang", {}, FakePool(4), wall=lambda: 100.0, mono=lambda: 100.0)


def _checkpoint_payload() -> dict[str, Any]:
    """A real payload: jobs queued and running, a checkpointed scheduler's own words."""
    s = _scheduler()
    for size in (2, 4, 1):
        s.submit({"size": size, "argv": ["/bin/true"], "name": f"j{size}"}, "fuzz")
    s.tick()
    return s.to_payload()


_PAYLOAD = _checkpoint_payload()


def _swap(payload: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(payload))
    if key.startswith("jobs."):
        field = key.split(".", 1)[1]
        if out["jobs"]:
            out["jobs"][0][field] = value
    else:
        out[key] = value
    return out


def checkpoint_files() -> st.SearchStrategy[bytes]:
    """A real checkpoint; with a field of the payload or of a job replaced (the checksum
    made to match, as an edit by hand would); a byte flipped; cut; noise."""
    good = checkpoint.encode(_PAYLOAD)
    keys = sorted(_PAYLOAD) + [f"jobs.{k}" for k in sorted(_PAYLOAD["jobs"][0])]
    edited = st.builds(
        lambda k, v: checkpoint.encode(_swap(_PAYLOAD, k, v)), st.sampled_from(keys), json_value
    )
    flipped = st.tuples(st.integers(0, len(good) - 1), st.integers(0, 255)).map(
        lambda t: good[: t[0]] + bytes([t[1]]) + good[t[0] + 1 :]
    )
    return st.one_of(
        st.just(good), edited, flipped, st.integers(0, len(good)).map(lambda n: good[:n]),
        st.binary(max_size=200),
    )  # fmt: skip


def checkpoint_target(data: bytes) -> str:
    try:
        payload = checkpoint.decode(data, "ck.json")
        _scheduler().restore(payload)
    except checkpoint.CheckpointError as e:
        assert str(e).startswith("ck.json: "), e  # says which file
        return "rejected"
    except RequestError as e:
        assert str(e), "a refusal must say why"
        return "rejected"
    return "accepted"


# ---- inventory YAML (testbed/remote.py, `cosched remote`) ---------------------------------

_INVENTORY = (REPO / "ansible/inventory/example/hosts.yml").read_text()
INVENTORY_KEYS = ["all", "vars", "hosts", "children", "agents", "controller", "head0",
                  "ansible_host", "ansible_port", "ansible_user", "ansible_ssh_common_args",
                  "ansible_ssh_private_key_file", "{{ ansible_user }}"]  # fmt: skip


def inventory_yaml() -> st.SearchStrategy[str]:
    """The example inventory; with a line replaced by a YAML line made of inventory words
    and any value; a variable set to a reference; noise."""
    lines = _INVENTORY.splitlines()
    odd = ["", "[]", "{}", "[1, 2]", "-3", "99999999", "x", "null", "*a", "&a {}",
           "{{ ansible_port }}", "'{{ x }}'"]  # fmt: skip
    value = st.sampled_from(odd) | st.text(max_size=12)
    line = st.builds(
        lambda indent, key, v: " " * indent + f"{key}: {v}",
        st.integers(0, 8),
        st.sampled_from(INVENTORY_KEYS),
        value,
    )
    edited = st.builds(
        lambda i, new: "\n".join([*lines[:i], new, *lines[i + 1 :]]),
        st.integers(0, len(lines) - 1),
        line | st.text(max_size=30),
    )
    return st.one_of(st.just(_INVENTORY), edited, st.text(max_size=200))


def inventory_target(text: str) -> str:
    from testbed.remote import RemoteError, load_inventory

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "hosts.yml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            hosts = load_inventory(str(path))
        except RemoteError as e:
            assert str(e) and "\n" not in str(e).split(":", 1)[0], e
            return "rejected"
    assert all(isinstance(h.port, int) and h.address for h in hosts), hosts
    return "accepted"


# ---- cluster state (testbed/cluster/state.py's file, as the controller reads it) ----------

_STATE: dict[str, Any] = {
    "status": "up",
    "version": 1,
    "nodes": [
        {"name": "n0", "ctl_ip": "10.212.0.1", "data_ip": "10.213.0.1", "agent_port": 7070},
        {"name": "n1", "ctl_ip": "10.212.0.2", "data_ip": "10.213.0.2"},
    ],
    "addresses": {"host_ctl_ip": "10.212.0.254"},
    "cpu": {"mechanism": "cfs", "per_node": [{"quota_us": 50000, "period_us": 100000}, {}]},
    "profile": {"delay_us": 100.0, "jitter_us": 10.0, "loss_pct": 0.0, "rate_bps": 10**9},
    "delay_mechanism": "userspace",
    "emulated": {"relays": [{"name": "r0", "ctl_ip": "127.0.0.1", "port": 7100,
                             "nodes": ["n0", "n1"]}]},
    "key_file": "/run/cosched/cluster.key",
    "agents": [{"node": "n0", "pid": 1, "start_time": 0.0, "cmd": ["x"], "log": "/l"}],
}  # fmt: skip
# Where a field sits in the file: top level, a node, the cpu table, the link profile, a relay.
_STATE_FIELDS = (
    [(k,) for k in sorted(_STATE)]
    + [("nodes", 0, k) for k in sorted(_STATE["nodes"][0])]
    + [("cpu", k) for k in sorted(_STATE["cpu"])]
    + [("cpu", "per_node", 0, k) for k in ("quota_us", "period_us", "cpus")]
    + [("profile", k) for k in sorted(_STATE["profile"])]
    + [("emulated", "relays", 0, k) for k in sorted(_STATE["emulated"]["relays"][0])]
    + [("agents", 0, k) for k in sorted(_STATE["agents"][0])]
)
_ODD_NUMBERS = [float("inf"), float("-inf"), float("nan"), -1, 0, 10**30, 1e-300]
# The numbers the readers convert (ports, CPU quota and period, the link profile).
_NUMBER_FIELDS = [
    ("nodes", 0, "agent_port"),
    ("cpu", "per_node", 0, "quota_us"),
    ("cpu", "per_node", 0, "period_us"),
    *[("profile", k) for k in sorted(_STATE["profile"])],
    ("emulated", "relays", 0, "port"),
]


def _set(where: tuple[Any, ...], value: Any) -> bytes:
    out = json.loads(json.dumps(_STATE))
    node = out
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    return json.dumps(out).encode()  # Infinity and NaN as Python's json writes them


def cluster_states() -> st.SearchStrategy[bytes]:
    """A real state file; with one field (top level, a node's, the cpu table's, the link
    profile's, a relay's, an agent's) replaced by any JSON value or an odd number;
    a number the readers convert set to an odd one; a byte flipped; cut; noise."""
    good = json.dumps(_STATE).encode()
    edited = st.builds(
        _set, st.sampled_from(_STATE_FIELDS), json_value | st.sampled_from(_ODD_NUMBERS)
    )
    numbers = st.builds(_set, st.sampled_from(_NUMBER_FIELDS), st.sampled_from(_ODD_NUMBERS))
    flipped = st.tuples(st.integers(0, len(good) - 1), st.integers(0, 255)).map(
        lambda t: good[: t[0]] + bytes([t[1]]) + good[t[0] + 1 :]
    )
    return st.one_of(
        st.just(good), edited, numbers, flipped,
        st.integers(0, len(good)).map(lambda n: good[:n]), st.binary(max_size=200),
    )  # fmt: skip


def cluster_state_target(data: bytes) -> str:
    """`cosched controller start` reads the file (controller/__main__.py): nodes, relays,
    network variables and key file, or one line naming the file; `cosched cluster`'s own
    reader (testbed/cluster/state.py load) takes it or treats it as absent, never raises."""
    from controller.__main__ import ConfigError, cluster_from_state
    from testbed.cluster import state

    with tempfile.TemporaryDirectory() as d:
        path = Path(state.state_path(d))
        path.write_bytes(data)
        st_ = state.load(d)
        assert st_ is None or isinstance(st_, state.ClusterState)
        try:
            nodes, relays, env, key_file = cluster_from_state(str(path), 7070)
        except ConfigError as e:
            line = str(e)
            assert line.startswith(f"cannot use cluster state {path}: ") and "\n" not in line, e
            return "rejected"
    assert nodes and all(isinstance(n.address[1], int) for n in nodes), nodes
    assert all(isinstance(r.address[1], int) for r in relays), relays
    assert all(isinstance(v, str) for v in env.values()), env
    assert key_file is None or isinstance(key_file, str)
    return "accepted"


TARGETS = [
    Target("wire decoder", _frames(), wire_target),
    Target("controller API", api_request(), api_target),
    Target("job specs", job_spec(), spec_target),
    Target("experiment TOML", toml_doc(), toml_target),
    Target("SWF lines", swf_lines(), swf_target),
    Target("relay batches", relay_batch(), relay_batch_target),
    # issue 28 (tests/support/fuzz_security_targets.py)
    Target("NIC datagrams", nic_datagrams(), nic_target),
    Target("JSON nesting", nesting_cases(), nesting_target),
    # issue 29
    Target("checkpoint files", checkpoint_files(), checkpoint_target),
    Target("inventory YAML", inventory_yaml(), inventory_target),
    Target("cluster state", cluster_states(), cluster_state_target),
]
