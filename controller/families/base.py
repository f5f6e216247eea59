"""The contract between the scheduler core and a family of policies.

A family sees the core through :class:`Core`: the nodes, the job table, the
agents (for the local scheme only), the clock, and three operations (start a
job's ranks, end a job, hand a job to the policy). It never imports the
scheduler (tests/unit/test_layout.py checks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.families.localscheme import Agents, LocalSchemes
from controller.jobs import Job
from controller.jobtable import JobTable
from controller.nodes import NodeInfo
from controller.policies.base import QuantumPlan


class Launch(Protocol):
    def __call__(self, job: Job, nodes: list[str], *, start_frozen: bool) -> None: ...


@dataclass(frozen=True)
class Core:
    """What a family may read and do; the scheduler builds it once."""

    nodes: Sequence[NodeInfo]
    node_index: Mapping[str, int]  # node name -> index in ``nodes``
    table: JobTable  # read; ``withdraw`` is the one change a family makes to it
    agents: Agents
    mono: Callable[[], float]
    launch: Launch  # start the job's ranks on these nodes (rank order)
    end: Callable[[Job, str, str], None]  # end a job: state, reason
    submit: Callable[[Job], None]  # hand a job to the policy
    max_slots: Callable[[], int | None]  # the operator's setting now


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

    def __init__(self, core: Core, schemes: LocalSchemes | None = None) -> None:
        self.core = core
        # The agents' local scheme (docs/cdc.md): passed on from the family a restore replaces.
        self.schemes = schemes or LocalSchemes(core.agents, core.nodes)

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

    def observe_devices(self, demand: Mapping[int, Mapping[str, float]]) -> None:
        """Each job's demand on every device measured (``cpu``, ``disk``); default: the
        CPU part to :meth:`observe`, as a family that reads only the CPU wants."""
        self.observe({j: d["cpu"] for j, d in demand.items() if "cpu" in d})

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
        self.schemes.hand_back(node, hello)
