"""DHC as a gang policy: the buddy tree's waves turned into quantum plans.

Feitelson & Rudolph 1996 scheduled in continuous time; :class:`DhcPolicy` samples
each round of the tree (controller/policies/dhc.py) at one instant per quantum,
so the simulator and the live controller drive DHC like any gang policy
(``--policy dhc``; docs/dhc.md, "The waves as quantum commands").
"""

from __future__ import annotations

import random

from controller.policies.base import GangPolicy, JobRequest, PolicyError, QuantumPlan
from controller.policies.dhc import (
    ALGORITHMS,
    BALANCING,
    MAPPINGS,
    ORIGINS,
    DhcConfig,
    DhcError,
    DhcTree,
    Slot,
)
from controller.policies.params import ParamSpec

GOLDEN = 0.6180339887498949


class DhcPolicy(GangPolicy):
    """DHC behind the :class:`GangPolicy` contract, so the simulator engine and the live
    controller drive it like any gang policy (``--policy dhc``).

    Every gang is mapped on arrival (DHC has no queue: time slicing is unbounded).
    A scheduling round of the tree (length 1) is spread over ``round_quanta``
    quanta; quantum ``i`` of round ``r`` runs the gangs whose slot covers the
    instant ``(i + phase_r) / round_quanta`` of the round, where ``phase_r`` is the
    fractional part of ``r`` times the golden ratio. One instant per quantum means
    no PE ever gets two threads (slots that overlap in time use disjoint PEs); the
    rotating phase makes every slot of positive length sampled in proportion to its
    length over the rounds, so even a slot shorter than a quantum is not starved
    (docs/dhc.md). The plan names no slot: :meth:`tree_view` shows the front.

    The machine must have a power-of-two number of nodes (the buddy tree).
    """

    name = "dhc"
    PARAMS = (
        ParamSpec("balancing", str, "cube", "controllers that may take a new gang", BALANCING),
        ParamSpec("origin", str, "any", "where requests come from: any thread, or PE 0", ORIGINS),
        ParamSpec(
            "mapping",
            str,
            "fragmentation",
            "threads to PEs (Feitelson & Rudolph 1996 §3.2)",
            MAPPINGS,
        ),
        ParamSpec(
            "algorithm",
            str,
            "weight/uniform",
            "time division between / within controllers (Feitelson & Rudolph 1996 §3.3)",
            tuple(ALGORITHMS),
        ),
        ParamSpec("selective", bool, True, "selective disabling: leftover PEs run other gangs"),
        ParamSpec("round_quanta", int, 8, "quanta per scheduling round of the tree"),
        ParamSpec("seed", int, 0, "random choices (random balancing, request origins)"),
    )

    def __init__(
        self,
        nodes: int,
        balancing: str = "cube",
        origin: str = "any",
        mapping: str = "fragmentation",
        algorithm: str = "weight/uniform",
        selective: bool = True,
        round_quanta: int = 8,
        seed: int = 0,
    ) -> None:
        super().__init__(nodes)
        if nodes & (nodes - 1):
            raise PolicyError(
                f"dhc needs a power-of-two number of nodes (its buddy tree), got {nodes}; "
                "use 2, 4, 8, 16, ..."
            )
        if algorithm not in ALGORITHMS:
            raise PolicyError(
                f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}"
            )
        if round_quanta < 1:
            raise PolicyError(f"round_quanta must be >= 1, got {round_quanta}")
        between, within = ALGORITHMS[algorithm]
        try:
            cfg = DhcConfig(nodes, balancing, origin, mapping, between, within, selective)
        except DhcError as e:
            raise PolicyError(str(e)) from None
        self.tree = DhcTree(cfg, rng=random.Random(seed))
        self.round_quanta = round_quanta
        self._k = 0
        self.last_instant = 0.0  # where in the round the last plan was sampled
        self._slots: list[Slot] | None = None
        self._rows: dict[int, int] | None = None

    def _changed(self) -> None:
        self._slots = None
        self._rows = None

    def submit(self, job: JobRequest, now: float) -> None:
        if job.size > self.nodes:
            raise PolicyError(f"job {job.job_id}: {job.size} nodes > the {self.nodes} there are")
        try:
            self.tree.place(job.job_id, job.size)
        except DhcError as e:
            raise PolicyError(str(e)) from None
        self._changed()

    def finish(self, job_id: int, now: float) -> None:
        if job_id in self.tree.gangs:
            self.tree.remove(job_id)
            self._changed()

    def round_slots(self) -> list[Slot]:
        if self._slots is None:
            self._slots = self.tree.round()
        return self._slots

    def next_quantum(self, now: float) -> QuantumPlan:
        r, i = divmod(self._k, self.round_quanta)
        self._k += 1
        t = (i + (r * GOLDEN) % 1.0) / self.round_quanta
        self.last_instant = t
        cells: list[list[int]] = [[] for _ in range(self.nodes)]
        if not self.tree.gangs:
            return QuantumPlan(None, None, tuple(() for _ in range(self.nodes)))
        for s in self.round_slots():
            if s.start <= t < s.start + s.length:
                for pe in self.tree.gangs[s.gang_id].pes:
                    cells[pe].append(s.gang_id)
        # no matrix row has "its turn": the plan's slot stays None (tree_view has the front)
        return QuantumPlan(None, None, tuple(tuple(c) for c in cells))

    @property
    def queue_length(self) -> int:
        return 0

    def _row_of(self) -> dict[int, int]:
        """Gangs packed first-fit into rows without a shared PE (for matrix displays)."""
        if self._rows is None:
            rows: list[set[int]] = []
            self._rows = {}
            for g in sorted(self.tree.gangs.values(), key=lambda x: x.gang_id):
                for k, used in enumerate(rows):
                    if not used & set(g.pes):
                        used |= set(g.pes)
                        self._rows[g.gang_id] = k
                        break
                else:
                    rows.append(set(g.pes))
                    self._rows[g.gang_id] = len(rows) - 1
        return self._rows

    @property
    def slot_count(self) -> int:
        return max(self._row_of().values(), default=-1) + 1

    def placement(self, job_id: int) -> tuple[int, tuple[int, ...]] | None:
        g = self.tree.gangs.get(job_id)
        return None if g is None else (self._row_of()[job_id], g.pes)

    def matrix_view(self) -> list[list[int | None]]:
        rows: list[list[int | None]] = [[None] * self.nodes for _ in range(self.slot_count)]
        for gid, k in self._row_of().items():
            for pe in self.tree.gangs[gid].pes:
                rows[k][pe] = gid
        return rows

    def tree_view(self) -> dict[str, object]:
        """The controllers with gangs, and the active front at the last plan's instant
        (``cosched matrix``)."""
        t = self.last_instant
        slots = self.round_slots()
        front = sorted({s.controller for s in slots if s.start <= t < s.start + s.length})
        ctls = []
        for c in sorted(self.tree.own, key=lambda c: (-c[0], c[1])):
            r = self.tree.block(c)
            ctls.append({"level": c[0], "index": c[1], "pes": [r.start, r.stop - 1],
                         "gangs": list(self.tree.own[c])})  # fmt: skip
        return {
            "instant": round(t, 4),
            "round_quanta": self.round_quanta,
            "controllers": ctls,
            "front": [list(c) for c in front],
            "running": sorted(s.gang_id for s in slots if s.start <= t < s.start + s.length),
        }

    def pin(self, job_id: int, nodes: tuple[int, ...]) -> None:
        try:
            self.tree.pin(job_id, tuple(sorted(nodes)))
        except DhcError as e:
            raise PolicyError(str(e)) from None
        self._changed()
