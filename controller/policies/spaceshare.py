"""Space sharing with an MPL cap: BATCH and the communication-driven schemes (Yu & Byun 2011).

Yu & Byun 2011 runs every scheme on the same allocation: a job of ``size``
processes gets ``size`` distinct nodes and keeps them until it ends; a node
holds at most ``mpl`` jobs at once (the paper's maximum multiprogramming
level, 5 in §5.3, 3 or 5 in §5.5); jobs wait in arrival order under "the
default FIFO allocation policy provided by OpenPBS" (§5.2). BATCH is the same
with an MPL of one (§2.1: "only one parallel job in a specific node"). What
differs between the schemes is how each node time-shares its jobs, and that
is the agents' business (agent/cdc/, docs/cdc.md): this policy only carries
the scheme's name and settings to them.

Choices the paper leaves open
-----------------------------
* **FIFO** is strict: the head of the queue starts as soon as ``size`` nodes
  have a free slot (fewer than ``mpl`` jobs), and nothing behind it starts
  before it, even a job that would fit (no backfilling: OpenPBS's FIFO
  scheduler without its backfill option).
* **Which nodes.** The ``size`` least-loaded nodes that have a free slot:
  fewest running jobs first, ties to the lower node index. Spreading the load
  keeps the number of processes competing for each CPU as even as the
  placement allows, so no node becomes the one every job waits for (the
  contention CC's rescheduling latency measures, §3). With ``mpl == 1`` every
  free node has load 0 and this is first fit by index. The chosen nodes are
  returned in ascending index order: rank *r* runs on the *r*-th of them.
* **Restart.** :meth:`pin` puts a job back on the nodes it runs on even when
  that exceeds ``mpl`` (the processes run already; a controller restarted
  with a lower MPL only starts new jobs once the load has fallen below it).
* The user's run-time estimate is not used (FIFO needs none).
"""

from __future__ import annotations

from collections import deque

from controller.policies.base import JobRequest, LocalScheme, PolicyError, SpaceSharePolicy
from controller.policies.params import ParamSpec

__all__ = ["BOOSTS", "DEFAULT_MPL", "MAX_MPL", "SCHEMES", "SpaceShare"]

#: Yu & Byun 2011 Table 1 plus BATCH (§2.1); the agents' names (docs/cdc.md).
SCHEMES: tuple[str, ...] = ("batch", "local", "dcs", "pb", "ib", "sb", "hybrid", "cc-s", "cc-b")
BOOSTS: tuple[str, ...] = ("weight", "freeze")
DEFAULT_MPL = 5  # Yu & Byun 2011 §5.3: "we limited the MPL to 5"
MAX_MPL = 64  # what the agents' local schedulers accept (agent/local.py)


class SpaceShare(SpaceSharePolicy):
    """FIFO space sharing with at most ``mpl`` jobs per node (module docstring)."""

    name = "spaceshare"
    PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec("mpl", int, DEFAULT_MPL, "jobs per node at most (multiprogramming level)"),
        ParamSpec(
            "tick_ms",
            float,
            None,
            "agents' decision period, ms (none: the cluster's decision interval, 10 by default)",
        ),
        ParamSpec("spin_us", float, 150.0, "spin time before blocking (sb), us"),
        ParamSpec("boost", str, "weight", "how agents enforce a boost", BOOSTS),
    )

    def __init__(
        self,
        nodes: int,
        mpl: int = DEFAULT_MPL,
        *,
        scheme: str = "local",
        tick_ms: float | None = None,
        spin_us: float = 150.0,
        boost: str = "weight",
    ) -> None:
        if scheme not in SCHEMES:
            raise PolicyError(f"unknown scheme {scheme!r}; valid schemes: {', '.join(SCHEMES)}")
        if not isinstance(mpl, bool) and isinstance(mpl, int) and mpl > MAX_MPL:
            raise PolicyError(f"mpl must be at most {MAX_MPL} (the agents' limit), got {mpl}")
        if scheme == "batch" and mpl != 1:
            raise PolicyError(
                f"policy 'batch' is space sharing only (Yu & Byun 2011 §2.1): its MPL is 1, got "
                f"{mpl!r}"
            )
        if tick_ms is not None and not 0.1 <= tick_ms <= 1000.0:  # what agents accept (local.py)
            raise PolicyError(
                f"tick_ms (the decision interval) must be in 0.1..1000 ms, got {tick_ms!r}"
            )
        if not spin_us >= 0:
            raise PolicyError(f"spin_us must be >= 0, got {spin_us!r}")
        if boost not in BOOSTS:
            raise PolicyError(f"boost must be one of {', '.join(BOOSTS)}, got {boost!r}")
        tick = None if tick_ms is None else float(tick_ms)
        super().__init__(nodes, mpl, LocalScheme(scheme, tick, float(spin_us), boost))
        self.name = scheme
        self._queue: deque[JobRequest] = deque()
        self._queued: set[int] = set()
        self._where: dict[int, tuple[int, ...]] = {}  # running job -> nodes
        self._on: list[list[int]] = [[] for _ in range(nodes)]  # node -> jobs, start order

    # ---- events ----------------------------------------------------------------
    def submit(self, job: JobRequest, now: float) -> None:
        if job.size > self.nodes:
            raise PolicyError(
                f"job {job.job_id} asks for {job.size} nodes but the machine has {self.nodes}"
            )
        if job.job_id in self._queued or job.job_id in self._where:
            raise PolicyError(f"job {job.job_id} was already submitted")
        self._queue.append(job)
        self._queued.add(job.job_id)

    def finish(self, job_id: int, now: float) -> None:
        """A running job ended, or a queued one was withdrawn."""
        if job_id in self._queued:
            self._queued.discard(job_id)
            self._queue = deque(j for j in self._queue if j.job_id != job_id)
            return
        nodes = self._where.pop(job_id, None)
        if nodes is None:
            raise PolicyError(f"job {job_id} is neither queued nor running")
        for n in nodes:
            self._on[n].remove(job_id)

    def schedule(self, now: float) -> list[JobRequest]:
        out: list[JobRequest] = []
        while self._queue:
            head = self._queue[0]
            chosen = self._choose(head.size)
            if chosen is None:
                break  # strict FIFO: nothing overtakes the head
            self._queue.popleft()
            self._queued.discard(head.job_id)
            self._place(head.job_id, chosen)
            out.append(head)
        return out

    def pin(self, job_id: int, nodes: tuple[int, ...]) -> None:
        job = next((j for j in self._queue if j.job_id == job_id), None)
        if job is None:
            raise PolicyError(f"job {job_id} is not waiting in the queue")
        if len(set(nodes)) != len(nodes) or any(not 0 <= n < self.nodes for n in nodes):
            raise PolicyError(f"job {job_id}: nodes {nodes} are not distinct nodes of the machine")
        if len(nodes) != job.size:
            raise PolicyError(f"job {job_id} has {job.size} ranks, not {len(nodes)}")
        self.finish(job_id, 0.0)  # out of the queue
        self._place(job_id, tuple(nodes))

    # ---- decisions -------------------------------------------------------------
    def _choose(self, size: int) -> tuple[int, ...] | None:
        open_ = [n for n in range(self.nodes) if len(self._on[n]) < self.mpl]
        if len(open_) < size:
            return None
        open_.sort(key=lambda n: (len(self._on[n]), n))
        return tuple(sorted(open_[:size]))

    def _place(self, job_id: int, nodes: tuple[int, ...]) -> None:
        self._where[job_id] = nodes
        for n in nodes:
            self._on[n].append(job_id)

    # ---- views -----------------------------------------------------------------
    def placement(self, job_id: int) -> tuple[int, ...] | None:
        return self._where.get(job_id)

    def node_jobs(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(js) for js in self._on)

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    @property
    def free_nodes(self) -> int:
        """Nodes running no job at all."""
        return sum(1 for js in self._on if not js)

    @property
    def open_nodes(self) -> int:
        """Nodes with a free slot (fewer than ``mpl`` jobs)."""
        return sum(1 for js in self._on if len(js) < self.mpl)
