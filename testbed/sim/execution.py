"""Execution model: how fast each runnable job progresses in a quantum.

Assumptions (documented in docs/simulator.md, issue 2 "Execution model"):

* One process of a gang per node; a job's *rate* is its progress in seconds of
  dedicated run time per second of wall time (1.0 = as on a dedicated machine).
* A process in a phase with CPU utilization ``u`` needs the CPU for a fraction
  ``u`` of its dedicated wall time; the rest is I/O or communication wait,
  which overlaps with other processes' CPU use (Wiseman & Feitelson 2003 §2.2).
* The processes left runnable on one node share its CPU. When their demands
  sum to at most 1 they all progress at full speed; otherwise the CPU is
  shared in proportion to demand, so each progresses at ``1 / sum(u)``.
* Sharing a node costs an ``interference`` fraction of speed (caches, memory
  bus, I/O device contention), applied to every process that shares; Wiseman & Feitelson 2003
  §4.1 measured a few percent for a compute job paired with an I/O job.
* Processes of a gang synchronise (barriers), so a gang progresses at the
  speed of its slowest process: the minimum of its per-node rates. Gangs are
  coscheduled, so no extra barrier wait arises beyond that minimum.
* With the device term (issue 25; ``io`` given), each node has one I/O device:
  a process in a phase with device share ``d`` needs it for that fraction of its
  dedicated time, and the processes sharing a node are slowed by the busier of
  the two resources, ``max(1, sum(u), sum(d))`` (Wiseman & Feitelson 2003 §4.1.2:
  I/O-bound jobs paired together "interfere with each other when writing to the
  disk").
* With a network term as well (issue 31, N + 1 gangs; ``net`` given), each node has
  three devices: the CPU, one disk and one network link. A process in a phase with
  shares ``(u, d, w)`` needs each device for that fraction of its dedicated time. On
  each device the processes' shares are summed; a device whose sum ``S`` exceeds 1 is
  over-subscribed and gives each process using it ``1 / S`` of its need, so a process
  progresses at ``1 / max(1, S over the devices it uses)`` (it waits for its slowest
  device). Unlike the node-wide rule above, a process that does not use an
  over-subscribed device is not slowed by it: two disk-bound jobs sharing a disk do not
  slow a compute job beside them, which is the overlap N + 1 gangs count on
  (docs/nplus1.md). ``interference`` applies as above to every process that shares.
* With a cost per resident job (issue 25; ``node_factor`` given), every process on
  node ``n`` progresses at ``node_factor[n]`` times the rate above: the engine passes
  ``1 - resident_cost * f`` for a node holding ``f`` jobs placed on it but frozen in
  this quantum (testbed/sim/results.py ``SimConfig.resident_cost``; docs/paired-fidelity.md
  "A cost per resident job"). A gang still progresses at its slowest node's rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence


def gang_rates(
    node_jobs: Sequence[Sequence[int]],
    demand: Callable[[int], float],
    interference: float,
    io: Callable[[int], float] | None = None,
    net: Callable[[int], float] | None = None,
    node_factor: Sequence[float] | None = None,
) -> dict[int, float]:
    """Progress rate of every job runnable somewhere in ``node_jobs``.

    ``demand(job_id)`` is the job's CPU utilization in its current phase, ``io(job_id)``
    its device share, ``net(job_id)`` its network share (None: no such term);
    ``node_factor[n]`` the share of node ``n``'s speed its resident jobs leave (None: 1).
    """
    if node_factor is not None:
        return _with_node_factor(node_jobs, demand, interference, io, net, node_factor)
    rates: dict[int, float] = {}
    share_factor = 1.0 - interference
    # Nodes with the same runnable jobs give the same rates: visit each
    # distinct tuple once, in order of first appearance (so ``rates`` keeps the
    # order in which jobs first appear in ``node_jobs``).
    distinct: Iterable[Sequence[int]]
    try:
        distinct = dict.fromkeys(node_jobs)
    except TypeError:  # unhashable (lists): no shortcut
        distinct = node_jobs
    for jobs in distinct:
        if not jobs:
            continue
        if len(jobs) == 1:
            j = jobs[0]
            if j not in rates:
                rates[j] = 1.0
            continue
        if net is not None:
            _per_device(jobs, demand, io, net, share_factor, rates)
            continue
        total = 0.0
        for j in jobs:
            total += demand(j)
        if io is not None:
            disk = 0.0
            for j in jobs:
                disk += io(j)
            total = max(total, disk)
        r = share_factor if total <= 1.0 else share_factor / total
        for j in jobs:
            old = rates.get(j)
            if old is None or r < old:
                rates[j] = r
    return rates


def _with_node_factor(
    node_jobs: Sequence[Sequence[int]],
    demand: Callable[[int], float],
    interference: float,
    io: Callable[[int], float] | None,
    net: Callable[[int], float] | None,
    node_factor: Sequence[float],
) -> dict[int, float]:
    """:func:`gang_rates` node by node, each node's rates times its factor; the minimum over
    a job's nodes is kept (no shortcut over equal nodes: their factors may differ)."""
    rates: dict[int, float] = {}
    for n, jobs in enumerate(node_jobs):
        if not jobs:
            continue
        node = gang_rates([jobs], demand, interference, io, net)
        f = node_factor[n]
        for j, r in node.items():
            r *= f
            old = rates.get(j)
            if old is None or r < old:
                rates[j] = r
    return rates


def _per_device(
    jobs: Sequence[int],
    demand: Callable[[int], float],
    io: Callable[[int], float] | None,
    net: Callable[[int], float],
    share_factor: float,
    rates: dict[int, float],
) -> None:
    """Rates on one node under the three-device rule (module docstring): each job is
    slowed by the most over-subscribed device it uses; the minimum over nodes is kept."""
    needs = [(j, demand(j), io(j) if io is not None else 0.0, net(j)) for j in jobs]
    cpu = sum(n[1] for n in needs)
    disk = sum(n[2] for n in needs)
    link = sum(n[3] for n in needs)
    for j, u, d, w in needs:
        worst = 1.0
        if u > 0.0 and cpu > worst:
            worst = cpu
        if d > 0.0 and disk > worst:
            worst = disk
        if w > 0.0 and link > worst:
            worst = link
        r = share_factor / worst
        old = rates.get(j)
        if old is None or r < old:
            rates[j] = r
