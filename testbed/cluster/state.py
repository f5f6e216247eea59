"""The cluster state file: a ledger of everything ``up`` created.

Default location ``/run/cosched/cluster.json`` (``/run`` is tmpfs: a reboot,
which also destroys every namespace and cgroup, forgets the state too).
``COSCHED_STATE_DIR`` overrides the directory, so tests use a temp dir.

The ledger is written as objects are created, so a crash mid-``up`` still
leaves a record. Cleanup never *depends* on it, though: ``clean`` also scans
for prefixed namespaces, links and cgroups.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from common import keys
from common.names import CLUSTER_KEY_FILE as KEY_FILE
from common.names import CLUSTER_STATE_FILE as STATE_FILE
from common.names import state_dir as state_dir

STATE_VERSION = 1


def state_path(directory: str | None = None) -> str:
    return os.path.join(directory or state_dir(), STATE_FILE)


def key_path(directory: str | None = None) -> str:
    return os.path.join(directory or state_dir(), KEY_FILE)


@dataclass
class AgentRecord:
    node: str
    pid: int
    start_time: float  # psutil create_time(), guards against PID reuse
    cmd: list[str]
    log: str


@dataclass
class ClusterState:
    status: str = "creating"
    created_at: float = field(default_factory=time.time)
    version: int = STATE_VERSION
    nodes: list[dict[str, Any]] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    htb: dict[str, Any] = field(default_factory=dict)
    netem: dict[str, Any] | None = None
    delay_mechanism: str = "userspace"
    cpu: dict[str, Any] = field(default_factory=dict)
    features: dict[str, bool] = field(default_factory=dict)
    # The ledger proper: what exists because we made it, in creation order.
    netns: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)  # group paths, in every hierarchy
    # Where each cgroup resource lived at ``up`` (common.cgroups.Layout.to_dict()),
    # so ``down`` acts on the same hierarchies even if detection would differ.
    cgroup_layout: dict[str, Any] = field(default_factory=dict)
    agents: list[AgentRecord] = field(default_factory=list)
    key_file: str | None = None
    # An emulated cluster (testbed/cluster/emulated.py): node count, base port, relays.
    emulated: dict[str, Any] | None = None
    # ``up --ssh`` (testbed/cluster/sshd.py SshState.to_dict()): files and sshd PIDs.
    ssh: dict[str, Any] | None = None
    # ``up --systemd`` (testbed/cluster/nspawn.py): the root file system, the head node,
    # the containers (ContainerRecord.to_dict()) and the run directories nspawn made.
    systemd: dict[str, Any] | None = None
    # ``up --decision-interval-ms``: the agents' local-scheme tick (None: their default, 10 ms)
    decision_interval_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClusterState:
        d = dict(d)
        agents = [AgentRecord(**a) for a in d.pop("agents", [])]
        known = set(cls.__dataclass_fields__)
        st = cls(**{k: v for k, v in d.items() if k in known})
        st.agents = agents
        return st


def save(st: ClusterState, directory: str | None = None) -> str:
    """Write atomically (temp file + rename) so a crash never leaves half a file."""
    directory = directory or state_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = state_path(directory)
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(st.to_dict(), f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load(directory: str | None = None) -> ClusterState | None:
    """The recorded state, or None if there is no (readable) state file."""
    path = state_path(directory)
    try:
        with open(path) as f:
            return ClusterState.from_dict(json.load(f))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError):
        # A corrupt file is treated as absent; clean's scan still finds everything.
        return None


def remove(directory: str | None = None) -> None:
    for path in (state_path(directory),):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def write_key(directory: str | None = None, nbytes: int = 32) -> str:
    """Create a fresh random shared key, mode 0600 from the start (common/keys.py).

    ``nbytes`` random bytes written as hex text (64 characters, no newline):
    readers that strip whitespace (the agent does) and readers that do not
    then see the same key, which raw bytes could not guarantee.
    """
    return keys.write_key(key_path(directory or state_dir()), nbytes)
