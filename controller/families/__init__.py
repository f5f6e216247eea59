"""How the live scheduler drives each family of policies.

The core (controller/scheduler.py) keeps the job table, classes, launch and
kill, accounting and checkpoints; a :class:`~controller.families.base.Family`
turns its policy's decisions into the runnable set of a quantum, seeing the
core only through :class:`~controller.families.base.Core`:

* ``gang`` (controller/families/gang.py): strict gang, paired gang,
  gang-greedy/backfill -- a matrix, jobs launched frozen, one row per quantum,
  utilization fed back;
* ``batch`` (controller/families/batch.py): FCFS, EASY, conservative,
  lookahead -- jobs start thawed on free nodes and run to completion;
* ``cdc`` (controller/families/cdc.py, with the agents' local scheme in
  controller/families/localscheme.py): BATCH and the communication-driven
  schemes of Yu & Byun 2011 -- space sharing up to an MPL, jobs start thawed
  where the policy places them, the agents run the scheme and own the weights.

A new family (hierarchical control, for one) is one more module here and one
more entry in :func:`make_family`.
"""

from __future__ import annotations

from controller.families.base import Core, Family, Plan
from controller.families.batch import BatchFamily
from controller.families.cdc import CdcFamily
from controller.families.gang import GangFamily
from controller.families.localscheme import LocalSchemes
from controller.policies.base import BatchPolicy, GangPolicy, SpaceSharePolicy
from controller.policies.registry import Policy


def make_family(core: Core, policy: Policy, schemes: LocalSchemes | None = None) -> Family:
    """The family that drives ``policy`` (by the contract it implements); ``schemes``:
    what the agents were told of their local scheme, from the family this one replaces."""
    if isinstance(policy, GangPolicy):
        return GangFamily(core, policy, schemes)
    if isinstance(policy, SpaceSharePolicy):  # before BatchPolicy: it is one
        return CdcFamily(core, policy, schemes)
    if isinstance(policy, BatchPolicy):
        return BatchFamily(core, policy, schemes)
    raise TypeError(f"no scheduler family for policy {type(policy).__name__}")


__all__ = [
    "BatchFamily",
    "CdcFamily",
    "Core",
    "Family",
    "GangFamily",
    "LocalSchemes",
    "Plan",
    "make_family",
]
