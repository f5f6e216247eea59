"""What a rank is told when it starts: its barrier port, its peers and the emulated link.

Every rank gets ``COSCHED_PEERS`` (the data IPs of its job's nodes, in rank
order), rank 0's address and barrier port (:func:`job_port`) and, when the
cluster emulates delay, jitter or loss in user space, the link's figures
(``COSCHED_NET_*``, :func:`net_env`; docs/cdc.md). The agents running a local
scheme are told every node's control and data address (:func:`scheme_peers`).
Pure: used by the scheduler, ``python -m controller`` and ``cosched calibrate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.jobs import Job
from controller.nodes import NodeInfo

PORT_BASE = 20000
PORT_SPAN = 12000  # 20000..31999: below Linux's ephemeral range (32768-), see job_port


def job_port(job_id: int) -> int:
    """Rank 0's barrier port: unique among the 12,000 most recent jobs.

    Kept below the kernel's ephemeral range so that no outgoing connection on
    the node can already hold a rank's listening port.
    """
    return PORT_BASE + job_id % PORT_SPAN


def net_env(state: Mapping[str, Any]) -> dict[str, str]:
    """``COSCHED_NET_*`` for every rank, from the cluster state (testbed/cluster/state.py).

    Only where the link's delay is emulated in user space (no netem: the
    message library adds it) and the link profile has delay, jitter or loss;
    empty otherwise (netem does it in the kernel, or there is nothing to add).
    """
    if state.get("delay_mechanism") != "userspace":
        return {}
    prof = state.get("profile") or {}
    delay = float(prof.get("delay_us") or 0.0)
    jitter = float(prof.get("jitter_us") or 0.0)
    loss = float(prof.get("loss_pct") or 0.0)
    if not (delay > 0 or jitter > 0 or loss > 0):
        return {}
    return {
        "COSCHED_NET_DELAY_US": f"{delay:g}",
        "COSCHED_NET_JITTER_US": f"{jitter:g}",
        "COSCHED_NET_LOSS_PCT": f"{loss:g}",
        "COSCHED_NET_RATE_BPS": str(int(prof.get("rate_bps") or 0)),
    }


def rank_env(
    job: Job,
    rank: int,
    node: str,
    peers: Sequence[str],
    extra: Mapping[str, str],
    instance: str,
) -> dict[str, str]:
    """One rank's environment: the job's own, ``extra`` (net_env), then the COSCHED_ names.

    ``instance`` is the launch's, the same for all its ranks: the agents key the job's
    secret and name its output directories with it (agent/jobsecret.py).
    """
    env = dict(job.spec.env)
    env.update(extra)
    env.update(
        COSCHED_JOB_INSTANCE=instance,
        COSCHED_JOB=str(job.job_id),
        COSCHED_RANK=str(rank),
        COSCHED_SIZE=str(job.spec.size),
        COSCHED_PEERS=",".join(peers),
        COSCHED_RANK0_ADDR=peers[0],
        COSCHED_PORT=str(job_port(job.job_id)),
        COSCHED_NODE=node,
    )
    return env


def scheme_peers(nodes: Sequence[NodeInfo]) -> dict[str, dict[str, str]]:
    """The ``peers`` of a local_policy request: every node's control and data address."""
    return {n.name: {"ctl": n.address[0], "data": n.data_ip} for n in nodes}
