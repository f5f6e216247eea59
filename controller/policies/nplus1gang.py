"""N + 1 gang scheduling: the policy (Wiseman & Feitelson 2003 §5, N + 1 gangs for N I/O
devices), behind the :class:`GangPolicy` contract so that the simulator and the live
controller drive it by name (``nplus1``).

Each quantum the row whose turn it is runs with up to N partner rows chosen by
:func:`nplus1.nplus1_match` on the rows' predicted demand vectors (CPU, disk, network;
eq. (1) per device, devices.py). A row's vector is, per device, the largest prediction
among its jobs (§2.5 takes the row's utilization as the largest of its jobs'); a row
holding an exclusive job (§2.4) is 1.0 everywhere, so it neither takes nor joins a group.
On a node the selected row's job comes first, then the partners' in the order chosen.

Choices where §5 is silent (docs/nplus1.md):

* The matcher runs every quantum (paired gang's best-fit variant); there is no
  counterpart of Fig. 4's once-per-round matching, nor of §2.5's band rule.
* Alternate scheduling (§2.6) fills only the nodes that no row of the group uses, and an
  alternate runs alone there, as under strict gang.
* A sharp change (§4.2.3) on any device makes a job run alone; at N = 1 only the CPU's
  counts, as under paired gang, so that N = 1 makes paired gang's decisions.
* Fed only the CPU (:meth:`observe`, as a caller that measures nothing else does), disk
  and network are taken as 0: every row's dominant device is then the CPU, so for N >= 2
  no row finds a partner and the policy schedules as strict gang; N = 1 is paired gang's
  best-fit rule on the CPU either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import add

from controller.policies.base import PolicyError, QuantumPlan
from controller.policies.devices import CPU, MEASURED, VectorPredictor, check_devices, check_n
from controller.policies.gang import ADMISSION_PARAM, FCFS, MatrixGang, matrix_params
from controller.policies.matrix import FIRST_FIT
from controller.policies.nplus1 import nplus1_match
from controller.policies.params import ParamSpec


@dataclass(slots=True)
class GroupStats:
    """How many rows ran together, for reports and tests."""

    quanta: int = 0  # quanta in which some row ran
    grouped: int = 0  # ... of which with at least one partner row
    sizes: dict[int, int] = field(default_factory=dict)  # rows in the group -> quanta
    rows: dict[int, int] = field(default_factory=dict)  # rows in the matrix -> quanta


def parse_devices(text: str) -> tuple[str, ...]:
    """``"cpu,disk,net"`` -> the device tuple; one line naming the valid ones otherwise."""
    return check_devices([d.strip() for d in text.split(",") if d.strip()])


class NPlus1Gang(MatrixGang):
    """N + 1 gangs on N I/O devices (Wiseman & Feitelson 2003 §5); see docs/nplus1.md."""

    name = "nplus1"
    PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec("n", int, 2, "I/O devices N: up to N partner rows per quantum"),
        ParamSpec(
            "devices",
            str,
            ",".join(MEASURED),
            f"devices measured, comma-separated, cpu first (from: {', '.join(MEASURED)})",
        ),
        ParamSpec(
            "margin",
            float,
            0.01,
            "safety margin m in sum + m < 1 per device (Wiseman & Feitelson 2003 §2.4)",
        ),
        ParamSpec(
            "sharp_change",
            float,
            0.20,
            "demand jump on any device that makes a job run alone (§4.2.3); none = off",
            nullable=True,
        ),
        *matrix_params(None),
        ADMISSION_PARAM,
        ParamSpec(
            "alternate",
            bool,
            True,
            "fill nodes no row of the group uses with jobs of other rows (§2.6)",
        ),
    )

    def __init__(
        self,
        nodes: int,
        *,
        n: int = 2,
        devices: str = ",".join(MEASURED),
        margin: float = 0.01,
        sharp_change: float | None = 0.20,
        max_slots: int | None = None,
        placement: str = FIRST_FIT,
        admission: str = FCFS,
        alternate: bool = True,
    ) -> None:
        devs = parse_devices(devices)
        self.n = check_n(n, devs)
        if not 0.0 <= margin < 1.0:
            raise PolicyError(f"margin must be in [0, 1), got {margin}")
        self.devices = devs
        self.margin = margin
        self.predictor = VectorPredictor(devs, sharp_change=sharp_change)
        self.stats = GroupStats()
        self.last_group: tuple[int, ...] = ()  # partner rows of the last quantum
        super().__init__(
            nodes,
            max_slots=max_slots,
            placement=placement,
            admission=admission,
            alternate=alternate,
        )

    # ----------------------------------------------------------------- public
    def observe(self, utilization: Mapping[int, float]) -> None:
        """CPU only (module docstring: the other devices count as unused)."""
        self.observe_devices({j: {CPU: u} for j, u in utilization.items()})

    def io_devices(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d != CPU)

    def observe_devices(self, demand: Mapping[int, Mapping[str, float]]) -> None:
        """Each job's share of every device; jobs no longer in the system are ignored,
        devices not configured are dropped (a caller may measure more than is used)."""
        for job_id, vector in demand.items():
            if job_id in self._jobs:
                self.predictor.observe(
                    job_id, {d: v for d, v in vector.items() if d in self.devices}
                )

    def row_demand(self, slot: int) -> tuple[float, ...]:
        """The row's predicted demand vector: per device, the largest of its jobs'."""
        jobs = self.matrix.jobs_in(slot)
        if not jobs or any(self._jobs[j].exclusive for j in jobs):
            return tuple(1.0 for _ in self.devices)
        any_device = self.n > 1  # N = 1: paired gang's sharp-change rule, the CPU's
        vectors = [self.predictor.predict(j, any_device=any_device) for j in jobs]
        return tuple(max(v[i] for v in vectors) for i in range(len(self.devices)))

    def snapshot(self) -> dict[int, tuple[float, ...]]:
        """The CPU history only: a restored policy relearns disk and network."""
        out: dict[int, tuple[float, ...]] = {}
        for job_id in sorted(self._jobs):
            h = self.predictor.history(job_id, CPU)
            if h:
                out[job_id] = h
        return out

    # ------------------------------------------------------------------ hooks
    def _forget(self, job_id: int) -> None:
        self.predictor.forget(job_id)

    def _build_plan(self, slot: int) -> QuantumPlan:
        count = self.matrix.slot_count
        demands = {s: self.row_demand(s) for s in range(count)}
        partners = nplus1_match(demands, slot, self.n, self.margin) if count > 1 else ()
        node_jobs, running, busy = self._row_cells(slot)
        for p in partners:
            other = self._row_cells(p)
            node_jobs = tuple(map(add, node_jobs, other[0]))
            running = running | other[1]
            busy |= other[2]
        self.stats.quanta += 1
        if partners:
            self.stats.grouped += 1
        size = 1 + len(partners)
        self.stats.sizes[size] = self.stats.sizes.get(size, 0) + 1
        self.stats.rows[count] = self.stats.rows.get(count, 0) + 1
        self.last_group = partners
        alternates: tuple[int, ...] = ()
        if self.alternate:
            alternates = self.matrix.alternates_masked(slot, busy, skip_slots=partners)
            if alternates:
                node_jobs = self._with_alternates(node_jobs, alternates, beside=False)
                running = running | frozenset(alternates)
        self._built_running = running
        return QuantumPlan(
            slot=slot,
            partner=partners[0] if partners else None,
            node_jobs=node_jobs,
            alternates=frozenset(alternates),
        )
