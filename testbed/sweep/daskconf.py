"""Dask settings for a cluster that runs sweeps (docs/sweeps.md, "A Dask cluster").

Dask's defaults wake every scheduler, worker and nanny many times a second for
housekeeping: an event-loop health check every 20 ms, each worker's sampling
profiler every 10 ms, a system monitor every 500 ms, each nanny's check of its
worker's memory every 100 ms. A sweep's runs are long pure-Python computations that
need none of it, and on a machine whose cores the runs fill every wakeup is taken
from them: an idle LocalCluster of two workers used a median 11.1 % of a core with
the defaults and 1.5 % with ``SETTINGS`` (``benchmarks/dask_idle.py``;
docs/results/sweeps/benchmark.md).

The settings are read when a scheduler, nanny or worker starts, so they are the
cluster's, not the client's: :func:`local_cluster` (tests, benchmarks) and the batch
recipe (``jobqueue.py``) start theirs with them; a cluster started by hand gets
them from :func:`environment` (``DASK_...`` variables) or a Dask config file.
"""

from __future__ import annotations

from typing import Any

SETTINGS: dict[str, Any] = {
    # event-loop health check (a warning when a loop stalls for `tick.limit`, 3 s)
    "distributed.admin.tick.interval": "1s",
    # the workers' sampling profiler (the dashboard's profile page)
    "distributed.worker.profile.enabled": False,
    # CPU, memory and network samples for the dashboard and the heartbeats
    "distributed.admin.system-monitor.interval": "2s",
    # a nanny's (and a worker's) check of the worker's memory against its limit
    "distributed.worker.memory.monitor-interval": "1s",
}


def environment() -> dict[str, str]:
    """``SETTINGS`` as the environment variables Dask reads at start-up."""
    out = {}
    for key, value in SETTINGS.items():
        name = "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split("."))
        out[name] = str(value)
    return out


def local_cluster(workers: int, **kw: Any) -> Any:
    """A LocalCluster of ``workers`` one-thread worker processes with ``SETTINGS``
    (the nannies hand their config to the workers they start)."""
    import dask
    import distributed

    cluster: Any = distributed.LocalCluster  # untyped constructor
    with dask.config.set(SETTINGS):
        return cluster(n_workers=workers, threads_per_worker=1, processes=True, **kw)
