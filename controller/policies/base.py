"""The contract every scheduling policy fulfils.

Policies are pure (docs/architecture.md, "Policies are pure"): they are fed events
(a job submitted, a job ended, a quantum ended with the CPU utilization each
job showed) and asked for decisions. They read no clock, open no socket and
touch no file, so the live controller and the simulator drive the same objects
and every decision can be checked in a unit test.

Two families, and a variant of the first:

* :class:`BatchPolicy` -- space sharing, run to completion (FCFS, EASY,
  conservative and lookahead backfilling; Rajaei et al. 2008 §3.1).
* :class:`SpaceSharePolicy` -- a :class:`BatchPolicy` whose nodes hold up to
  ``mpl`` jobs at once and which chooses the nodes itself (BATCH and the
  communication-driven schemes of Yu & Byun 2011; the agents time-share each node).
* :class:`GangPolicy` -- time sharing through an Ousterhout matrix (strict gang,
  paired gang, gang with greedy or backfilling admission; Wiseman & Feitelson 2003 §2,
  Rajaei et al. 2008 §3.2). The caller asks for one :class:`QuantumPlan` per quantum and
  reports the measured utilization of the jobs that ran.

Time is a float in seconds, whatever clock the caller keeps (virtual in the
simulator, monotonic in the controller).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field


class PolicyError(ValueError):
    """A request the policy cannot honour (bad job, unknown id, bad parameter)."""


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a policy knows about a job: never its true run time.

    ``size`` is the number of processes, one per node (a gang occupies
    ``size`` distinct nodes). ``estimate`` is the user's run-time estimate in
    seconds of dedicated execution; backfilling trusts it, gang policies use it
    only for reservations. ``exclusive`` (Wiseman & Feitelson 2003 §2.4) forbids pairing.
    """

    job_id: int
    size: int
    estimate: float
    submit_time: float = 0.0
    exclusive: bool = False
    user: str = ""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise PolicyError(f"job {self.job_id}: size must be >= 1, got {self.size}")
        if not self.estimate >= 0:
            raise PolicyError(f"job {self.job_id}: estimate must be >= 0, got {self.estimate}")


class BatchPolicy(ABC):
    """Space sharing without preemption.

    The caller submits jobs, reports completions, and after every event calls
    :meth:`schedule` to learn which queued jobs start now. A started job is
    considered running by the policy until :meth:`finish` is called for it; the
    policy assumes it ends at ``start + estimate`` when it plans reservations.
    """

    name: str = "batch"

    def __init__(self, nodes: int) -> None:
        if nodes < 1:
            raise PolicyError(f"nodes must be >= 1, got {nodes}")
        self.nodes = nodes

    @abstractmethod
    def submit(self, job: JobRequest, now: float) -> None:
        """Queue a job. Raises PolicyError if ``job.size > nodes``."""

    @abstractmethod
    def finish(self, job_id: int, now: float) -> None:
        """A running job ended (possibly before its estimate)."""

    @abstractmethod
    def schedule(self, now: float) -> list[JobRequest]:
        """Jobs to start at ``now``, in start order; they are running from now on."""

    @property
    @abstractmethod
    def queue_length(self) -> int:
        """Jobs waiting (submitted, not started)."""

    @property
    @abstractmethod
    def free_nodes(self) -> int:
        """Nodes not used by running jobs."""


@dataclass(frozen=True, slots=True)
class LocalScheme:
    """The local scheduling scheme the agents run under a space-sharing policy.

    ``name`` is a row of Yu & Byun 2011 Table 1 (docs/cdc.md); ``tick_ms`` the
    agents' decision period (None: each agent's own, the cluster's decision
    interval), ``spin_us`` the spin time of spin-block,
    ``boost`` how a boost is enforced (``weight`` or ``freeze``). The policy
    only carries these to the agents (the ``local_policy`` request).
    """

    name: str
    tick_ms: float | None = None
    spin_us: float = 150.0
    boost: str = "weight"


class SpaceSharePolicy(BatchPolicy):
    """Space sharing with a multiprogramming level (Yu & Byun 2011 §2.1, §5.2).

    The :class:`BatchPolicy` calls (``submit``, ``finish``, ``schedule``;
    a started job runs to completion) with two differences: a node holds up
    to ``mpl`` jobs at once, one rank of each, and the policy chooses a job's
    nodes, which :meth:`placement` tells (rank *r* runs on the *r*-th node).
    With ``mpl == 1`` this is plain batch space sharing, which the simulator
    runs as it runs any batch policy; above 1 the nodes are time-shared by
    the agents' local scheme (:attr:`scheme`), which the simulator has no
    model of.
    """

    name = "spaceshare"

    def __init__(self, nodes: int, mpl: int, scheme: LocalScheme) -> None:
        super().__init__(nodes)
        if isinstance(mpl, bool) or not isinstance(mpl, int) or mpl < 1:
            raise PolicyError(f"mpl must be a whole number >= 1, got {mpl!r}")
        self.mpl = mpl
        self.scheme = scheme

    @abstractmethod
    def placement(self, job_id: int) -> tuple[int, ...] | None:
        """Node indices of a started job (rank order), None if queued or unknown."""

    @abstractmethod
    def node_jobs(self) -> tuple[tuple[int, ...], ...]:
        """Per node, the running jobs in the order they started there."""

    @abstractmethod
    def pin(self, job_id: int, nodes: tuple[int, ...]) -> None:
        """Start a submitted job exactly on ``nodes`` (a restart restores where
        its processes already run). PolicyError if the job or the nodes are wrong."""


@dataclass(frozen=True, slots=True)
class QuantumPlan:
    """What runs during one quantum (docs/architecture.md, "A quantum command").

    ``node_jobs[n]`` is the tuple of job ids left runnable on node ``n``; every
    other job on that node is frozen. Strict gang leaves at most one job per
    node, paired gang at most two (Wiseman & Feitelson 2003 §2.1).

    ``slot`` is the matrix row whose turn it is (None when the matrix is
    empty); ``partner`` the row matched with it by paired gang (None when none
    matched or the policy does not pair). ``alternates`` are jobs from other
    rows run by alternate scheduling (Wiseman & Feitelson 2003 §2.6). ``weights`` maps a job to
    a CPU weight on the cgroup v2 scale (1..10000, default 100); a job absent
    from it gets 100.
    """

    slot: int | None
    partner: int | None
    node_jobs: tuple[tuple[int, ...], ...]
    alternates: frozenset[int] = frozenset()
    weights: Mapping[int, int] = field(default_factory=dict)

    @property
    def running(self) -> frozenset[int]:
        """Every job runnable somewhere in this quantum."""
        return frozenset(j for jobs in self.node_jobs for j in jobs)


class GangPolicy(ABC):
    """Time sharing through an Ousterhout matrix (rows = slots, columns = nodes).

    Per quantum the caller calls :meth:`next_quantum`, runs the plan, then
    calls :meth:`observe` with the CPU utilization each running job showed in
    that quantum (0..1, averaged over the job's processes). Jobs that cannot be
    placed yet wait in a queue; :meth:`next_quantum` admits them as the
    admission rule allows.
    """

    name: str = "gang"

    def __init__(self, nodes: int) -> None:
        if nodes < 1:
            raise PolicyError(f"nodes must be >= 1, got {nodes}")
        self.nodes = nodes

    @abstractmethod
    def submit(self, job: JobRequest, now: float) -> None:
        """Accept a job (placed in the matrix or queued). PolicyError if too large."""

    @abstractmethod
    def finish(self, job_id: int, now: float) -> None:
        """A job ended: free its cells (compaction is the policy's business)."""

    @abstractmethod
    def next_quantum(self, now: float) -> QuantumPlan:
        """Decide the next quantum, admitting waiting jobs first if possible."""

    def observe(self, utilization: Mapping[int, float]) -> None:  # noqa: B027
        """CPU utilization per job in the quantum just run. Default: ignored."""

    def io_devices(self) -> tuple[str, ...]:
        """The I/O devices (``disk``, ``net``) whose demand :meth:`observe_devices` uses;
        the agents measure only these (issue 32: reading them costs the jobs' cores at
        every switch). Default: none, the policy reads the CPU alone."""
        return ()

    def observe_devices(self, demand: Mapping[int, Mapping[str, float]]) -> None:
        """Each job's share of every device it used in the quantum just run (``cpu``,
        ``disk``, ``net``: controller/policies/devices.py), for callers that measure
        more than the CPU. Default: the CPU part goes to :meth:`observe`, so a policy
        that reads only the CPU decides as it would from :meth:`observe` alone."""
        self.observe({j: d.get("cpu", 0.0) for j, d in demand.items()})

    @property
    @abstractmethod
    def queue_length(self) -> int:
        """Jobs submitted but not yet placed in the matrix."""

    @property
    @abstractmethod
    def slot_count(self) -> int:
        """Rows currently in the matrix."""

    @abstractmethod
    def placement(self, job_id: int) -> tuple[int, tuple[int, ...]] | None:
        """(slot, nodes) of a placed job, or None if it is queued or unknown."""

    # ---- what a live controller needs beyond scheduling ----------------------
    def matrix_view(self) -> list[list[int | None]]:
        """The matrix as rows of cells (job id or None), for displays and statistics."""
        return []

    def set_max_slots(self, max_slots: int | None) -> None:  # noqa: B027
        """Operator control: bound the rows of the matrix (None = unbounded).

        Only rows made from now on are affected; existing rows stay.
        """

    def pin(self, job_id: int, nodes: tuple[int, ...]) -> None:
        """Place a submitted job exactly on ``nodes`` (a restart restores where
        its processes already run; Gorda & Brooks 1991 §3.1). PolicyError if impossible."""
        raise PolicyError(f"{self.name} cannot place job {job_id} on given nodes")

    def snapshot(self) -> dict[int, tuple[float, ...]]:
        """State worth a checkpoint beyond the jobs: per-job utilization history,
        most recent first (empty for policies that keep none)."""
        return {}

    def restore(self, history: Mapping[int, tuple[float, ...]]) -> None:
        """Replay :meth:`snapshot` output into a fresh policy holding the same jobs."""
        for job_id, values in history.items():
            for u in reversed(values):  # stored most recent first
                self.observe({job_id: u})
