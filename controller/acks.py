"""One quantum's acks folded into what the scheduler reads of them (issue 32).

The scheduler needs, per quantum, each job's CPU time and the CPU its nodes
offered (its utilization, Wiseman & Feitelson 2003 §3.2), the cluster's CPU
used and offered, the spread of the apply and thaw instants, the freeze
confirmations and the time-triggered lateness (docs/controller.md). All of it
is a sum, a count, a minimum or a maximum over nodes, so a group of nodes'
acks folds into one :class:`AckSummary` and summaries merge. A relay folds
its agents' acks and sends the controller one summary per quantum instead of
an ack per node (docs/scale.md, "The relay tree"); without relays the
controller folds the acks itself, so both take one accounting path.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the ack key that carries each device's bytes per job, ``{job: [a, b]}`` (issue 31):
#: the disk's read and written bytes (the job's cgroup), the network's sent and received
#: (its TCP sockets, agent/netuse.py); their sum is what the device moved for the job
DEVICE_ACK_KEYS = {"disk": "io_bytes", "net": "net_bytes"}


@dataclass
class AckSummary:
    """What the scheduler reads of a group of nodes' acks for one quantum."""

    answered: int = 0  # nodes that acked
    cpu_ns: dict[int, int] = field(default_factory=dict)  # job -> CPU, summed over nodes
    # job -> over the nodes it was runnable on in the previous quantum: its CPU there,
    # the CPU they offered (elapsed x capacity), and how many had the data to say so
    used_ns: dict[int, int] = field(default_factory=dict)
    offered_ns: dict[int, float] = field(default_factory=dict)
    counted: dict[int, int] = field(default_factory=dict)
    # device ("disk", "net") -> job -> over the nodes it was runnable on in the previous
    # quantum that reported its bytes on the device (DEVICE_ACK_KEYS; an agent that cannot
    # measure one reports none): the bytes, the quantum's length there, how many nodes
    dev_bytes: dict[str, dict[int, int]] = field(default_factory=dict)
    dev_elapsed_ns: dict[str, dict[int, int]] = field(default_factory=dict)
    dev_counted: dict[str, dict[int, int]] = field(default_factory=dict)
    cpu_total_ns: int = 0  # every job's CPU on every node that acked
    offered_total_ns: float = 0.0  # over the nodes whose quantum length is known
    applied: tuple[int, int, int] = (0, 0, 0)  # (nodes, earliest, latest) monotonic ns
    thawed: tuple[int, int, int] = (0, 0, 0)  # the same for the thaw instants, realtime ns
    freeze_confirms: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)  # time-triggered acks only
    late: list[str] = field(default_factory=list)  # nodes the plan reached after its instant
    ack_errors: dict[str, Any] = field(default_factory=dict)  # node -> its ack's errors

    def to_wire(self) -> dict[str, Any]:
        return {
            "answered": self.answered,
            "cpu_ns": {str(j): v for j, v in self.cpu_ns.items()},
            "used_ns": {str(j): v for j, v in self.used_ns.items()},
            "offered_ns": {str(j): v for j, v in self.offered_ns.items()},
            "counted": {str(j): v for j, v in self.counted.items()},
            "devices": {
                dev: {
                    "bytes": {str(j): v for j, v in self.dev_bytes[dev].items()},
                    "elapsed_ns": {str(j): v for j, v in self.dev_elapsed_ns[dev].items()},
                    "counted": {str(j): v for j, v in self.dev_counted[dev].items()},
                }
                for dev in self.dev_bytes
            },
            "cpu_total_ns": self.cpu_total_ns,
            "offered_total_ns": self.offered_total_ns,
            "applied": list(self.applied),
            "thawed": list(self.thawed),
            "freeze_confirms": self.freeze_confirms,
            "lateness": self.lateness,
            "late": self.late,
            "ack_errors": self.ack_errors,
        }

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> AckSummary:
        """From a relay's reply; a malformed summary raises ValueError (or TypeError)."""

        def jobs(key: str, kind: type) -> dict[int, Any]:
            return {int(j): kind(v) for j, v in dict(d.get(key) or {}).items()}

        devs = {
            str(dev): {k: {int(j): int(v) for j, v in dict(part.get(k) or {}).items()}
                       for k in ("bytes", "elapsed_ns", "counted")}
            for dev, part in dict(d.get("devices") or {}).items()
        }  # fmt: skip

        def span(key: str) -> tuple[int, int, int]:
            n, lo, hi = (int(x) for x in (d.get(key) or (0, 0, 0)))
            return n, lo, hi

        return cls(
            answered=int(d.get("answered", 0)),
            cpu_ns=jobs("cpu_ns", int),
            used_ns=jobs("used_ns", int),
            offered_ns=jobs("offered_ns", float),
            counted=jobs("counted", int),
            dev_bytes={dev: p["bytes"] for dev, p in devs.items()},
            dev_elapsed_ns={dev: p["elapsed_ns"] for dev, p in devs.items()},
            dev_counted={dev: p["counted"] for dev, p in devs.items()},
            cpu_total_ns=int(d.get("cpu_total_ns", 0)),
            offered_total_ns=float(d.get("offered_total_ns", 0.0)),
            applied=span("applied"),
            thawed=span("thawed"),
            freeze_confirms=[float(x) for x in d.get("freeze_confirms") or []],
            lateness=[float(x) for x in d.get("lateness") or []],
            late=[str(x) for x in d.get("late") or []],
            ack_errors=dict(d.get("ack_errors") or {}),
        )

    def add(self, o: AckSummary) -> None:
        """Merge another group's summary into this one."""
        self.answered += o.answered
        for j, v in o.cpu_ns.items():
            self.cpu_ns[j] = self.cpu_ns.get(j, 0) + v
        for j, u in o.used_ns.items():
            self.used_ns[j] = self.used_ns.get(j, 0) + u
        for j, f in o.offered_ns.items():
            self.offered_ns[j] = self.offered_ns.get(j, 0.0) + f
        for j, c in o.counted.items():
            self.counted[j] = self.counted.get(j, 0) + c
        for mine_all, theirs_all in (
            (self.dev_bytes, o.dev_bytes),
            (self.dev_elapsed_ns, o.dev_elapsed_ns),
            (self.dev_counted, o.dev_counted),
        ):
            for dev, theirs in theirs_all.items():
                mine = mine_all.setdefault(dev, {})
                for j, v in theirs.items():
                    mine[j] = mine.get(j, 0) + v
        self.cpu_total_ns += o.cpu_total_ns
        self.offered_total_ns += o.offered_total_ns
        self.applied = _span_merge(self.applied, o.applied)
        self.thawed = _span_merge(self.thawed, o.thawed)
        self.freeze_confirms += o.freeze_confirms
        self.lateness += o.lateness
        self.late += o.late
        self.ack_errors.update(o.ack_errors)

    def skew_s(self, which: tuple[int, int, int]) -> float | None:
        """Spread of the instants over the nodes (None under two nodes)."""
        n, lo, hi = which
        return (hi - lo) / 1e9 if n >= 2 else None

    def utilization(self, placement: Mapping[int, Iterable[str]]) -> dict[int, float]:
        """Per job (docs/controller.md): CPU used / CPU offered, for the jobs every node of
        whose previous placement brought its data; others are left out, not under-reported."""
        out: dict[int, float] = {}
        for job, nodes in placement.items():
            n = len(list(nodes))
            off = self.offered_ns.get(job, 0.0)
            if n and self.counted.get(job, 0) == n and off > 0:
                out[job] = min(1.0, max(0.0, self.used_ns.get(job, 0) / off))
        return out

    def device_demand(
        self, device: str, placement: Mapping[int, Iterable[str]], bps: float
    ) -> dict[int, float]:
        """Per job: the share of its nodes' ``device`` it used, bytes / (quantum x ``bps``)
        summed over its nodes, for the jobs every node of whose previous placement reported
        its bytes; clamped to [0, 1] (a device may briefly move more than its nominal rate)."""
        out: dict[int, float] = {}
        moved = self.dev_bytes.get(device, {})
        elapsed = self.dev_elapsed_ns.get(device, {})
        counted = self.dev_counted.get(device, {})
        for job, nodes in placement.items():
            n = len(list(nodes))
            cap = elapsed.get(job, 0) / 1e9 * bps
            if n and counted.get(job, 0) == n and cap > 0:
                out[job] = min(1.0, max(0.0, moved.get(job, 0) / cap))
        return out


def _bytes_per_job(raw: Any) -> dict[int, int]:
    """An ack's ``{job: [a, b]}`` as bytes moved per job (a + b); whatever is malformed
    is skipped (an agent's ack is never trusted to be well formed)."""
    out: dict[int, int] = {}
    if not isinstance(raw, dict):
        return out
    for k, v in raw.items():
        try:
            r, w = v
            out[int(k)] = max(0, int(r)) + max(0, int(w))
        except (TypeError, ValueError):
            continue
    return out


def _span_merge(a: tuple[int, int, int], b: tuple[int, int, int]) -> tuple[int, int, int]:
    if not a[0]:
        return b
    if not b[0]:
        return a
    return a[0] + b[0], min(a[1], b[1]), max(a[2], b[2])


class AckFolder:
    """Folds a group of nodes' acks, quantum by quantum.

    Keeps what a quantum's figures need from the one before: each node's last
    apply instant (the quantum's length there) and which jobs it was told to
    run (the jobs its CPU was offered to).
    """

    def __init__(self, capacity: Mapping[str, float]) -> None:
        self.capacity = dict(capacity)
        self._prev_applied: dict[str, int] = {}
        self._prev_jobs: dict[str, list[int]] = {}

    def fold(
        self,
        commands: Mapping[str, Mapping[str, int]],
        acks: Mapping[str, Mapping[str, Any] | None],
    ) -> AckSummary:
        """The summary of one quantum: ``acks[node]`` for every commanded node, None for
        a node without an ack; ``commands`` are this quantum's (the next one's placement)."""
        s = AckSummary()
        cpu_ns, used_ns, offered_ns, counted = s.cpu_ns, s.used_ns, s.offered_ns, s.counted
        prev_applied, prev_jobs = self._prev_applied, self._prev_jobs
        a_n = a_lo = a_hi = t_n = t_lo = t_hi = 0
        for node, ack in acks.items():
            if ack is None:
                prev_applied.pop(node, None)
                continue
            s.answered += 1
            per: dict[int, int] = {}
            for k, v in (ack.get("cpu_ns") or {}).items():
                try:
                    per[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue
            for j, ns in per.items():
                cpu_ns[j] = cpu_ns.get(j, 0) + ns
                s.cpu_total_ns += ns
            moved = {dev: _bytes_per_job(ack.get(key)) for dev, key in DEVICE_ACK_KEYS.items()}
            if ack.get("errors"):
                s.ack_errors[node] = ack["errors"]
            t = ack.get("thawed_realtime_ns")
            if isinstance(t, int):
                if not t_n or t < t_lo:
                    t_lo = t
                if not t_n or t > t_hi:
                    t_hi = t
                t_n += 1
            fc = ack.get("freeze_confirm_s")
            if isinstance(fc, int | float):
                s.freeze_confirms.append(float(fc))
            if ack.get("mode") == "time-triggered":
                lat = ack.get("lateness_s")
                if isinstance(lat, int | float):
                    s.lateness.append(float(lat))
                if ack.get("late"):
                    s.late.append(node)
            t = ack.get("applied_monotonic_ns")
            if not isinstance(t, int):
                prev_applied.pop(node, None)
                continue
            if not a_n or t < a_lo:
                a_lo = t
            if not a_n or t > a_hi:
                a_hi = t
            a_n += 1
            prev = prev_applied.get(node)
            prev_applied[node] = t
            if prev is None or t <= prev:
                continue
            offered = (t - prev) * self.capacity.get(node, 1.0)
            s.offered_total_ns += offered
            for j in prev_jobs.get(node, ()):
                if j in per:
                    used_ns[j] = used_ns.get(j, 0) + per[j]
                    offered_ns[j] = offered_ns.get(j, 0.0) + offered
                    counted[j] = counted.get(j, 0) + 1
                for dev, per_job in moved.items():
                    if j in per_job:
                        b = s.dev_bytes.setdefault(dev, {})
                        e = s.dev_elapsed_ns.setdefault(dev, {})
                        c = s.dev_counted.setdefault(dev, {})
                        b[j] = b.get(j, 0) + per_job[j]
                        e[j] = e.get(j, 0) + (t - prev)
                        c[j] = c.get(j, 0) + 1
        s.applied = (a_n, a_lo, a_hi)
        s.thawed = (t_n, t_lo, t_hi)
        self._prev_jobs = {n: _job_ids(jobs) for n, jobs in commands.items()}
        return s


def _job_ids(jobs: Iterable[str]) -> list[int]:
    out = []
    for j in jobs:
        try:
            out.append(int(j))
        except ValueError:
            continue  # not a scheduler's job id: nothing to account it to
    return out
