"""Job classes (Gorda & Brooks 1991 §3.1, the gang scheduler's service classes).

Gorda & Brooks 1991 distinguishes:

* **interactive** -- served first, on the assumption that it runs briefly;
  after ``interactive_limit`` seconds of run time it is demoted to production
  "to prevent monopolization of the machine". Its owner may raise it back
  (``class`` op); each raise is counted.
* **production** -- the normal class.
* **standby** -- receives only "free cycles that the machine has to offer".
* **benchmark** -- "single-user access for timing": never paired, and its
  nodes run nothing else while it runs.

The policies in ``controller/policies`` know nothing of classes, so the rules
are applied around them (none of them needs a policy change):

1. *Admission order.* The controller keeps its own hold queue ordered by
   class rank (interactive, benchmark, production, standby) then submission,
   and hands a job to a gang policy only when the policy has nobody waiting,
   so an interactive job overtakes production jobs that are still waiting.
   Standby jobs are handed over only when no other job waits at all.
2. *Plan filter* (:func:`filter_plan`), applied to each quantum plan:
   a benchmark job's nodes run only that job; a standby job runs only when
   none of its nodes holds a non-standby job anywhere in the matrix (then
   the cycles are really idle), otherwise it stays frozen on all its nodes
   (gang semantics: all ranks or none).
3. *Benchmark jobs are submitted as exclusive* (Wiseman & Feitelson 2003 §2.4) so paired
   gang never pairs their row.

Pure functions; the controller feeds them its job table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common.names import BENCHMARK, CLASSES, INTERACTIVE, PRODUCTION, STANDBY
from controller.jobs import Job

RANK = {INTERACTIVE: 0, BENCHMARK: 1, PRODUCTION: 2, STANDBY: 3}
assert set(RANK) == set(CLASSES)


def hold_order(jobs: Iterable[Job]) -> list[Job]:
    """Jobs in the order they should be handed to the policy (rule 1)."""
    return sorted(jobs, key=lambda j: (RANK[j.job_class], j.submit_time, j.job_id))


def may_hand_over(job: Job, policy_waiting: int, others_held: int) -> bool:
    """Rule 1: hand ``job`` (the head of the hold queue) to the policy now?

    ``policy_waiting`` is the policy's own queue length; ``others_held`` the
    number of non-standby jobs still held (0 when the head is not standby).
    """
    if policy_waiting > 0:
        return False
    return not (job.job_class == STANDBY and others_held > 0)


def should_demote(job: Job, interactive_limit: float) -> bool:
    """Interactive jobs that ran longer than the limit become production."""
    return job.job_class == INTERACTIVE and job.interactive_run_s > interactive_limit


def filter_plan(
    node_jobs: tuple[tuple[int, ...], ...],
    classes: Mapping[int, str],
    job_nodes: Mapping[int, tuple[int, ...]],
) -> tuple[tuple[tuple[int, ...], ...], frozenset[int]]:
    """Apply rule 2 to a plan's per-node job lists.

    ``classes`` maps every placed job to its class, ``job_nodes`` every placed
    job to its node indices. Returns the filtered lists and the jobs removed.
    """
    if STANDBY not in classes.values() and BENCHMARK not in classes.values():
        return node_jobs, frozenset()  # neither rule applies: skip the per-node passes
    removed: set[int] = set()
    # Nodes that some non-standby job occupies in any row: not idle.
    occupied: set[int] = set()
    for job, nodes in job_nodes.items():
        if classes.get(job) != STANDBY:
            occupied.update(nodes)
    for jobs in node_jobs:
        for j in jobs:
            if classes.get(j) == STANDBY and occupied.intersection(job_nodes.get(j, ())):
                removed.add(j)
    bench_nodes: dict[int, int] = {}
    for n, jobs in enumerate(node_jobs):
        for j in jobs:
            if classes.get(j) == BENCHMARK:
                bench_nodes[n] = j
    out: list[tuple[int, ...]] = []
    for n, jobs in enumerate(node_jobs):
        if n in bench_nodes:
            keep: tuple[int, ...] = (bench_nodes[n],)
            removed.update(j for j in jobs if j != bench_nodes[n])
        else:
            keep = tuple(j for j in jobs if j not in removed)
        out.append(keep)
    # A gang runs on all its nodes or none: drop removed jobs everywhere.
    final = tuple(tuple(j for j in jobs if j not in removed) for jobs in out)
    return final, frozenset(removed)


def plan_is_empty(node_jobs: tuple[tuple[int, ...], ...]) -> bool:
    return not any(node_jobs)
