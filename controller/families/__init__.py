"""How the live scheduler drives each family of policies.

The core (controller/quantum.py) keeps the job table, classes, launch and
kill, accounting and checkpoints; a :class:`~controller.families.base.Family`
turns its policy's decisions into the runnable set of a quantum:

* ``gang`` (controller/families/gang.py): strict gang, paired gang,
  gang-greedy/backfill -- a matrix, jobs launched frozen, one row per quantum,
  utilization fed back;
* ``batch`` (controller/families/batch.py): FCFS, EASY, conservative,
  lookahead -- jobs start thawed on free nodes and run to completion;
* ``cdc`` (controller/families/cdc.py): BATCH and the communication-driven
  schemes of Yu & Byun 2011 -- space sharing up to an MPL, jobs start thawed where
  the policy places them, the agents run the scheme and own the weights.

A new family (hierarchical control, for one) is one more module here and one
more entry in :func:`make_family`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.families.base import Family, Plan
from controller.families.batch import BatchFamily
from controller.families.cdc import CdcFamily
from controller.families.gang import GangFamily
from controller.policies.base import BatchPolicy, GangPolicy, SpaceSharePolicy
from controller.policies.registry import Policy

if TYPE_CHECKING:
    from controller.quantum import Scheduler


def make_family(sched: Scheduler, policy: Policy) -> Family:
    """The family that drives ``policy`` (by the contract it implements)."""
    if isinstance(policy, GangPolicy):
        return GangFamily(sched, policy)
    if isinstance(policy, SpaceSharePolicy):  # before BatchPolicy: it is one
        return CdcFamily(sched, policy)
    if isinstance(policy, BatchPolicy):
        return BatchFamily(sched, policy)
    raise TypeError(f"no scheduler family for policy {type(policy).__name__}")


__all__ = ["BatchFamily", "CdcFamily", "Family", "GangFamily", "Plan", "make_family"]
