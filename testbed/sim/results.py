"""What a simulation run produces: per-job times and run-wide series."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from testbed.sim.job import SimJob

EARLY_END = "early-end"
FULL = "full"
OCCUPANCIES = (EARLY_END, FULL)


@dataclass(slots=True)
class SimConfig:
    """Parameters of the execution model (docs/simulator.md).

    ``quantum`` and ``context_switch`` are seconds; ``interference`` is the
    fraction of speed a process loses while it shares its node. ``mode`` is
    ``exact`` (every quantum simulated) or ``fluid`` (rates change only at
    arrivals, departures and phase changes; Feitelson & Rudolph 1996 appendix). Batch policies
    ignore all of these.

    The terms of issue 25 (docs/simulator.md, "What ParPar had"), all off by
    default so that a configuration without them runs as before:

    * ``launch`` -- seconds of a job's scheduled time, at its start, in which
      its processes start and connect: no progress, no competition for the CPU,
      ``launch_cpu`` of it charged as CPU;
    * ``teardown`` -- seconds from a job's last barrier until its end is known
      and its slot freed: it holds its cells and uses nothing;
    * ``occupancy`` -- ``early-end`` (a quantum ends when every job runnable in
      it has ended) or ``full`` (ParPar's slots last the whole quantum).
      Exact mode only;
    * ``device`` -- each node's one I/O device is shared by the processes on it
      (phases' ``io`` share; testbed/sim/execution.py). Exact mode only;
    * ``network`` -- each node has a disk *and* a network link (phases' ``io`` and
      ``net`` shares), each job slowed by the most over-subscribed device it uses
      (issue 31's three-device rule, testbed/sim/execution.py), and the policy is fed
      each job's demand on every device (``GangPolicy.observe_devices``). Implies
      ``device``. Exact mode only;
    * ``resident_cost`` -- the fraction of a node's speed each job placed on it but
      frozen in the quantum costs the jobs that run there (a machine holding many jobs
      runs each slower: the agent's per-job work each quantum, memory; issue 25,
      docs/paired-fidelity.md "A cost per resident job"). The running jobs' rates on a
      node with ``f`` frozen residents are multiplied by ``max(0, 1 - resident_cost *
      f)`` (testbed/sim/execution.py). Exact mode only; 0 switches it off.
    """

    nodes: int
    quantum: float = 1.0
    context_switch: float = 0.0
    interference: float = 0.05
    mode: str = "exact"
    launch: float = 0.0
    launch_cpu: float = 0.0
    teardown: float = 0.0
    occupancy: str = "early-end"
    device: bool = False
    network: bool = False
    resident_cost: float = 0.0

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if not self.quantum > 0:
            raise ValueError(f"quantum must be > 0 seconds, got {self.quantum}")
        if not 0 <= self.context_switch < self.quantum:
            raise ValueError(f"context switch must be in [0, quantum), got {self.context_switch}")
        if not 0 <= self.interference < 1:
            raise ValueError(f"interference must be in [0, 1), got {self.interference}")
        if self.mode not in ("exact", "fluid"):
            raise ValueError(f"mode must be 'exact' or 'fluid', got {self.mode!r}")
        if not (self.launch >= 0 and self.teardown >= 0):
            raise ValueError(
                f"launch and teardown must be >= 0 seconds, got {self.launch}, {self.teardown}"
            )
        if not 0 <= self.launch_cpu <= 1:
            raise ValueError(f"launch_cpu must be in [0, 1], got {self.launch_cpu}")
        if self.occupancy not in OCCUPANCIES:
            raise ValueError(
                f"occupancy must be one of {', '.join(OCCUPANCIES)}, got {self.occupancy!r}"
            )
        if not 0 <= self.resident_cost < 1:
            raise ValueError(f"resident_cost must be in [0, 1), got {self.resident_cost}")
        if self.mode == "fluid" and (
            self.launch
            or self.teardown
            or self.occupancy == FULL
            or self.device
            or self.network
            or self.resident_cost
        ):
            raise ValueError(
                "fluid mode has no launch, teardown, full-quantum occupancy, device or "
                "resident cost (its rounds are not quanta); use mode exact"
            )

    @property
    def overhead(self) -> float:
        """Seconds a job alone spends beyond its run time: launch and teardown."""
        return self.launch + self.teardown


@dataclass(slots=True)
class MatchingStats:
    """Paired gang matching, weighted by quanta.

    ``matched / quanta`` is the matching success rate. ``slot_partner[s] /
    quanta`` is Wiseman & Feitelson 2003 Fig. 7 bottom: the fraction of quanta in which the
    row ``s`` was *used for matching*, i.e. chosen as the partner of the row
    whose turn it was (best-fit with four I/O-bound rows gives row 3 75 % and
    row 2 25 %, as §4.1.2 explains).
    """

    quanta: float = 0.0  # quanta in which some slot had its turn
    matched: float = 0.0  # of those, quanta that ran with a partner slot
    slot_partner: dict[int, float] = field(default_factory=dict)  # slot -> quanta as partner

    def record(self, slot: int | None, partner: int | None, weight: float = 1.0) -> None:
        if slot is None:
            return
        self.quanta += weight
        if partner is not None:
            self.matched += weight
            self.slot_partner[partner] = self.slot_partner.get(partner, 0.0) + weight


@dataclass(slots=True)
class SimResult:
    """Raw outcome of one run. Times are seconds of virtual time.

    ``start[i]``/``end[i]``/``cpu[i]`` belong to ``jobs[i]``; ``cpu`` is
    processor-seconds of CPU the job consumed. Rejected jobs (larger than the
    machine) are listed with their reason and have NaN times.
    ``series_t``/``series_n`` sample the number of jobs in the system after
    every event, ``series_w`` the work backlog then: node-seconds of dedicated
    run time admitted and not yet done (Wiseman & Feitelson 2003 Fig. 11 counts
    jobs; in a heavy-tailed workload the work shows a backlog the count hides).
    """

    policy: str
    config: SimConfig
    jobs: list[SimJob]
    start: array[float]
    end: array[float]
    cpu: array[float]
    rejected: list[tuple[int, str]] = field(default_factory=list)
    series_t: array[float] = field(default_factory=lambda: array("d"))
    series_n: array[float] = field(default_factory=lambda: array("d"))
    series_w: array[float] = field(default_factory=lambda: array("d"))
    # with simulate(..., until=T): seconds of dedicated run time each job had done by then
    done: array[float] = field(default_factory=lambda: array("d"))
    matching: MatchingStats | None = None
    wall_seconds: float = 0.0
    # with SimConfig.network: after every quantum, the share of each device of the
    # machine used in it (device -> values beside series_t; docs/nplus1.md)
    series_devices: dict[str, array[float]] = field(default_factory=dict)
