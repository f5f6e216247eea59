"""One node's local coscheduling decisions: a scheme, its counters and the node's ERL.

The part of the local scheduler that both drivers share: the agent
(agent/local.py, views from the NIC emulation, boosts as cgroup weights) and
the simulator (testbed/sim/cdc/, views from the simulated processes). Given
what every registered process looks like at a decision point it

* counts the decision point, and a boost conflict when two or more processes
  have pending messages (BCR = conflicts / decision points, docs/cdc.md);
* asks the scheme (agent/cdc/schemes.py) which process holds the boost and
  counts a boost when the holder changes to a process;
* keeps the node's expected rescheduling latency, eq. (1) of Yu & Byun 2011
  §4.2, from the ED its driver measures and the ENP it saw at the last tick.

Pure: no clock, no I/O; the driver passes the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from agent.cdc.erl import erl_us
from agent.cdc.schemes import Event, ProcView, Scheme


@dataclass
class Counters:
    """What the local scheduler counted since its scheme was set."""

    decisions: int = 0
    conflicts: int = 0
    boosts: int = 0  # holder changes to a process
    ticks: int = 0
    events: int = 0  # arrival and collective events seen (decision points or not)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class NodeCdc:
    """A scheme plus the node's counters and ERL (module docstring)."""

    def __init__(self, scheme: Scheme, cost_switch_us: float = 0.0) -> None:
        self.scheme = scheme
        self.cost_switch_us = cost_switch_us
        self.counters = Counters()
        self.holder: str | None = None
        self.ed_us = 0.0
        self.enp = 0
        self.erl_us = 0.0

    def is_decision(self, event: Event) -> bool:
        return self.scheme.is_decision(event)

    def decide(
        self, now: float, event: Event, subject: str | None, views: Mapping[str, ProcView]
    ) -> str | None:
        """One decision point: count it (and a conflict), ask the scheme, count a boost."""
        c = self.counters
        c.decisions += 1
        if event is Event.TICK:
            c.ticks += 1
        pending = 0
        for v in views.values():
            if v.pending:
                pending += 1
        if pending >= 2:
            c.conflicts += 1
        key = self.scheme.decide(now, event, subject, views)
        if key is not None and key != self.holder:
            c.boosts += 1
        self.holder = key
        return key

    def skip_ticks(self, n: int, pending: int) -> None:
        """``n`` tick decisions whose outcome is known to repeat the last one.

        The simulator calls this instead of :meth:`decide` for ticks at which
        nothing the scheme looks at has changed (the scheme's
        :meth:`~agent.cdc.schemes.Scheme.tick_stable` says so): they are
        counted as decision points, and as conflicts when ``pending`` >= 2.
        """
        if n <= 0:
            return
        c = self.counters
        c.decisions += n
        c.ticks += n
        if pending >= 2:
            c.conflicts += n

    def repeat(self, event: Event, pending: int) -> None:
        """A decision point whose outcome is known to repeat the last one (the simulator's
        skip, see :meth:`skip_ticks`): counted, the scheme not asked."""
        c = self.counters
        c.decisions += 1
        if event is Event.TICK:
            c.ticks += 1
        if pending >= 2:
            c.conflicts += 1

    def update_erl(self, enp: int, ed_us: float | None = None) -> float:
        """Eq. (1) from ENP (processes with pending messages now) and ED (if re-measured)."""
        if ed_us is not None:
            self.ed_us = ed_us
        self.enp = enp
        self.erl_us = erl_us(self.ed_us, enp, self.cost_switch_us)
        return self.erl_us
