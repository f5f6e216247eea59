"""Names every part of cosched agrees on: directories, ports, job classes.

Only constants and the two environment lookups live here; what each part does
with them stays with that part.

Directories. ``/run/cosched`` (tmpfs: a reboot forgets it, as it forgets the
namespaces and cgroups it describes) holds the controller socket, its log and
the cluster state and key. Two variables move it, so tests and unprivileged
users can run elsewhere:

* ``COSCHED_RUN_DIR``  -- the controller's socket, log and checkpoint default;
* ``COSCHED_STATE_DIR`` -- the cluster state file ``cluster.json`` and ``cluster.key``.

An empty variable counts as unset.
"""

from __future__ import annotations

import os

# -- directories and files ------------------------------------------------------

DEFAULT_RUN_DIR = "/run/cosched"
RUN_DIR_ENV = "COSCHED_RUN_DIR"
STATE_DIR_ENV = "COSCHED_STATE_DIR"
CONTROLLER_SOCKET = "controller.sock"
CONTROLLER_LOG = "controller.log"
CLUSTER_STATE_FILE = "cluster.json"
CLUSTER_KEY_FILE = "cluster.key"
#: Where agents put their jobs' output (``<dir>/<node>/job-<id>/rank-<r>.{out,err}``):
#: root-owned, outside any world-writable directory (docs/security.md).
JOB_OUTPUT_DIR = "/var/lib/cosched/jobs"


def run_dir() -> str:
    """The controller's directory: ``$COSCHED_RUN_DIR`` or ``/run/cosched``."""
    return os.environ.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR


def state_dir() -> str:
    """The cluster state's directory: ``$COSCHED_STATE_DIR`` or ``/run/cosched``."""
    return os.environ.get(STATE_DIR_ENV) or DEFAULT_RUN_DIR


def controller_socket(directory: str | None = None) -> str:
    """The controller's unix socket in ``directory`` (default :func:`run_dir`)."""
    return os.path.join(directory or run_dir(), CONTROLLER_SOCKET)


def cluster_state_path(directory: str | None = None) -> str:
    """``cluster.json`` in ``directory`` (default :func:`state_dir`)."""
    return os.path.join(directory or state_dir(), CLUSTER_STATE_FILE)


# -- ports ----------------------------------------------------------------------

AGENT_PORT = 7070  # every node's agent, on the node's control address
# Exporter ports (docs/monitoring.md). 9100 is node_exporter's, held on every real
# node. Prometheus's "Default port allocations" wiki tracks 9090-9094 for its own
# components and 9100-9999 for public exporters (a range now fully allocated);
# for internal applications its exporter guidelines recommend ports outside that
# range. 9096 and 9097 are in neither list.
METRICS_PORT = 9096  # every node's agent's Prometheus exporter
CONTROLLER_METRICS_PORT = 9097  # the controller's exporter (`--metrics HOST:9097`)
CONTROLLER_PORT = 7000  # the port the docs and examples give `--listen-tcp`

# -- job classes (Gorda & Brooks 1991 §3.1; the rules are controller/classes.py) ----------

INTERACTIVE = "interactive"
PRODUCTION = "production"
STANDBY = "standby"
BENCHMARK = "benchmark"
CLASSES = (INTERACTIVE, PRODUCTION, STANDBY, BENCHMARK)
