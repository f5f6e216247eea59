"""The local cluster a live study runs on: brought up for it, torn down after it.

:func:`local_cluster` brings up the cluster a study's settings describe (or reuses one
already up, when asked and when it has the right size) and tears down what it brought
up, also on failure, Ctrl-C or SIGTERM (:func:`sigterm_as_interrupt`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from testbed.experiment.harness import LiveError

Say = Callable[[str], None]


class ClusterSettings(Protocol):
    """What bringing the cluster up needs from a study's spec."""

    @property
    def nodes(self) -> int: ...
    @property
    def link(self) -> str: ...
    @property
    def cpus_per_node(self) -> float | None: ...
    @property
    def cpu_mechanism(self) -> str: ...
    @property
    def cfs_period_us(self) -> int: ...
    @property
    def cgroup(self) -> str: ...


def require_root(what: str = "the live experiment") -> None:
    if os.geteuid() != 0:
        raise LiveError(
            f"{what} needs root (network namespaces, cgroups): run it with sudo",
            fix="or run a simulated study (cosched experiment list)",
        )


def host_cores() -> int:
    """Cores this process may use (what ``cpus_per_node = "fit"`` divides)."""
    return len(os.sched_getaffinity(0))


def sigterm_as_interrupt() -> None:
    """SIGTERM unwinds like Ctrl-C, so the cluster this run brought up is torn down.

    Only in this process: a child forked from it (pyroute2 forks one per
    network namespace and ends it with SIGTERM) still dies at once.
    """
    owner = os.getpid()

    def interrupt(signum: int, _frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


@contextlib.contextmanager
def local_cluster(
    spec: ClusterSettings, reuse: bool, say: Say, *, switch: str = "freezer"
) -> Iterator[dict[str, Any]]:
    """The cluster for ``spec`` (``switch``: the agents' switch mechanism); yields what a
    report says about it and ``state``, the path of its state file."""
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod
    from testbed.cluster.errors import ClusterError
    from testbed.cluster.profiles import parse_profile

    env = cluster_mod.Env()
    existing = state_mod.load(env.sdir())
    made = False
    if existing is not None:
        if not reuse:
            raise LiveError(
                "a local cluster is already up: `cosched cluster down` first, or pass "
                "--reuse-cluster to run on it"
            )
        if len(existing.nodes) != spec.nodes:
            raise LiveError(
                f"the running cluster has {len(existing.nodes)} nodes, the spec wants "
                f"{spec.nodes}: `cosched cluster down` first"
            )
        st = existing
    else:
        say(f"cluster up: {spec.nodes} nodes, link {spec.link}, cpus/node {spec.cpus_per_node}")
        try:
            st = cluster_mod.up(
                cluster_mod.ClusterConfig(
                    nodes=spec.nodes,
                    profile=parse_profile(spec.link),
                    cpus_per_node=spec.cpus_per_node,
                    cpu_mechanism=spec.cpu_mechanism,
                    cfs_period_us=spec.cfs_period_us,
                    cgroup=spec.cgroup,
                    switch=switch,
                    # heterogeneous nodes and the agents' tick, where a spec has them (CDC)
                    speeds=getattr(spec, "speeds", None),
                    decision_interval_ms=getattr(spec, "decision_interval_ms", None),
                ),
                env,
            )
        except (ClusterError, ValueError) as exc:
            raise LiveError(f"cluster up failed: {exc}") from None
        made = True
    info = {
        "nodes": [n["name"] for n in st.nodes],
        "link": st.profile,
        "delay_mechanism": st.delay_mechanism,
        "cgroups": st.cgroup_layout.get("mode", "unknown"),
        "cpu": st.cpu,
        "state": state_mod.state_path(env.sdir()),
    }
    try:
        yield info
    finally:
        if made:
            say("cluster down")
            cluster_mod.down(env)


def cluster_cpu_reader() -> Callable[[], float] | None:
    """CPU seconds of the running cluster's cgroup (jobs and agents), or None without one:
    what the host did besides the experiment is its busy time less this."""
    from testbed.cluster import cluster as cluster_mod
    from testbed.cluster import state as state_mod
    from testbed.experiment.harness import hostload

    st = state_mod.load(cluster_mod.Env().sdir())
    return hostload.cluster_cpu_reader(st) if st is not None else None
