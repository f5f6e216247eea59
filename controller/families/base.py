"""The contract between the scheduler core and a family of policies."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller.jobs import Job
from controller.policies.base import QuantumPlan

if TYPE_CHECKING:
    from controller.quantum import Scheduler

log = logging.getLogger("controller.quantum")

#: ``scheme`` of the local_policy request that hands a node back to the
#: controller's quanta (docs/cdc.md).
NO_SCHEME = "none"


@dataclass
class Plan:
    """One quantum as the core sends it: job -> node names, job -> weight."""

    runnable: dict[int, list[str]] = field(default_factory=dict)
    weights: dict[int, int] = field(default_factory=dict)
    policy_plan: QuantumPlan | None = None


class Family(ABC):
    """Hooks the core calls; the defaults fit a family without a matrix."""

    #: Whether quanta switch gangs, so the daemon sends them time-triggered
    #: (``--lead-ms``, docs/cluster.md). Families whose quantum command is only
    #: a heartbeat and CPU collector (batch, cdc) keep the immediate mode.
    switches_gangs = False

    def __init__(self, sched: Scheduler) -> None:
        self.s = sched

    @property
    @abstractmethod
    def queue_length(self) -> int:
        """Jobs the policy holds but has not started or placed."""

    def waiting_for_classes(self, head: Job) -> int:
        """The queue length the class rules see when ``head`` asks to be handed over."""
        return self.queue_length

    def withdraw_outranked(self) -> None:  # noqa: B027
        """Take back jobs a held job outranks (families that keep jobs waiting inside)."""

    def after_hand_over(self) -> None:  # noqa: B027
        """Launch what the policy has placed since the last call."""

    @abstractmethod
    def plan(self, now: float) -> Plan:
        """The runnable set of the next quantum (may start jobs)."""

    def observe(self, utilization: Mapping[int, float]) -> None:  # noqa: B027
        """Utilization of the jobs that ran in the previous quantum."""

    def ended(self, job_id: int) -> None:  # noqa: B027
        """A job ended (the policy was told already)."""

    @abstractmethod
    def rows(self) -> list[list[int | None]]:
        """What each node runs, as matrix rows (job id or None per node)."""

    def set_max_slots(self, max_slots: int | None) -> None:  # noqa: B027
        """Operator control on families with a matrix."""

    def snapshot(self) -> dict[int, tuple[float, ...]]:
        """Policy state for a checkpoint (beyond the job table)."""
        return {}

    @abstractmethod
    def readopt(self, started: list[Job]) -> None:
        """After a restart: give the policy the running jobs where they run."""

    def restore(self, history: Mapping[int, tuple[float, ...]]) -> None:  # noqa: B027
        """Replay :meth:`snapshot` output."""

    def describe(self) -> dict[str, Any]:
        """What the family adds to the controller's status and matrix (e.g. MPL, scheme)."""
        return {}

    def agent_connected(self, node: str, hello: Mapping[str, Any]) -> None:
        """An agent (re)connected. Families without a local scheme hand back a node
        that a previous controller left running one (its status says which)."""
        st = self.s.pool.status(node)
        cdc = st.get("cdc") if st else None
        scheme = cdc.get("scheme") if isinstance(cdc, dict) else None
        if scheme not in (None, NO_SCHEME):
            log.info("agent %s still runs local scheme %s: handing it back to quanta", node, scheme)
            self.s.tell_agent(node, self.s.local_policy_request(node, NO_SCHEME), hello)
