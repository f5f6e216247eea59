"""Job classes (Gorda & Brooks 1991 §3.1): interactive, production, standby, benchmark.

The policies know nothing of classes, so the rules are applied around them: the hold
order and when a held job may be handed over, the plan filter, demotion. Pure
functions; the controller feeds them its job table. The rules: docs/controller.md,
"Job classes".
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
