"""Asking the agents what became of our ranks: after a restart, and when a node rejoins.

Gorda & Brooks 1991 §3.1: "internal consistency-checking corrects any
inconsistent data (such as a job which has exited in the interim)". An exit
sent on a connection that broke is lost to us, so the agent's job list
decides: ranks it reports ended (or no longer knows) are recorded with its
exit codes, running ones are switched by the next plan (docs/security.md).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.jobs import Job
from controller.jobtable import JobTable
from controller.nodes import NodeInfo

log = logging.getLogger("controller.quantum")  # the scheduler's parts log as one

#: ``(job, node, exit code, the agent's record)``: the scheduler's rank-ended handler.
RankEnded = Callable[[Job, str, int | None, Mapping[str, Any] | None], None]


class Statuses(Protocol):
    def status(self, node: str) -> dict[str, Any] | None: ...

    def events(self) -> list[dict[str, Any]]: ...


def _code(info: Mapping[str, Any]) -> int | None:
    code = info.get("exit_code")
    return code if isinstance(code, int) else None


@dataclass
class Reconciler:
    """Nodes to reconcile at the next quantum, and the last reports (the status request's)."""

    agents: Statuses
    nodes: Sequence[NodeInfo]
    table: JobTable
    rank_ended: RankEnded
    on_event: Callable[[Mapping[str, Any]], None]
    _ever_connected: set[str] = field(default_factory=set)
    _rejoined: set[str] = field(default_factory=set)
    # the last rejoin reports
    reports: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=16))

    def connected(self, node: str) -> None:
        """An agent (re)connected: a node seen before is reconciled at the next quantum."""
        if node in self._ever_connected:
            self._rejoined.add(node)
        self._ever_connected.add(node)

    def rejoined(self) -> None:
        """Reconcile every node that rejoined since the last call."""
        nodes, self._rejoined = sorted(self._rejoined), set()
        for node in nodes:
            self.node(node)

    def node(self, node: str) -> dict[str, Any]:
        """A node whose agent we reach again (after a partition or an agent restart)."""
        report: dict[str, Any] = {"node": node, "ended": [], "running": []}
        st = self.agents.status(node)
        if st is None:
            self._rejoined.add(node)  # try again next quantum
            return report
        known = {str(j.get("job_id")): j for j in st.get("jobs", [])}
        for job in list(self.table.jobs.values()):
            if not job.active or not any(r.node == node and not r.ended for r in job.ranks):
                continue
            info = known.get(str(job.job_id))
            if info is None:
                self.rank_ended(job, node, None, None)
            elif info.get("state") == "ended":
                self.rank_ended(job, node, _code(info), info)
            (report["ended"] if job.ended else report["running"]).append(job.job_id)
        log.info("%s rejoined; reconciled: %s", node, report)
        self.reports.append(report)
        return report

    def restored(self) -> dict[str, Any]:
        """After a restore: every agent's view of our jobs; ended ones recorded, live ones
        re-adopted (the next quantum freezes them per the matrix again), jobs an agent no
        longer knows recorded as ended with the reason, theirs we do not know reported."""
        report: dict[str, Any] = {"adopted": [], "ended": [], "orphans": [], "unreachable": []}
        jobs = self.table.jobs
        # Only jobs started before the restart: events handled below may launch
        # new ones, which the status snapshot cannot know about yet.
        restored = sorted(j for j, job in jobs.items() if job.active)
        known: dict[str, dict[str, dict[str, Any]]] = {}
        for n in self.nodes:
            st = self.agents.status(n.name)
            if st is None:
                report["unreachable"].append(n.name)
                continue
            known[n.name] = {str(j.get("job_id")): j for j in st.get("jobs", [])}
        for ev in self.agents.events():
            self.on_event(ev)
        for job in (jobs[j] for j in restored):
            for r in job.ranks:
                if r.ended or r.node not in known:
                    continue
                info = known[r.node].get(str(job.job_id))
                if info is None:
                    self.rank_ended(job, r.node, None, None)
                elif info.get("state") == "ended":
                    self.rank_ended(job, r.node, _code(info), info)
            if job.ended:
                report["ended"].append(job.job_id)
            else:
                report["adopted"].append(job.job_id)
        ours = {str(j) for j, job in jobs.items() if job.active or j in restored}
        for node, on_node in known.items():
            for jid, info in on_node.items():
                if info.get("state") != "ended" and jid not in ours:
                    report["orphans"].append(f"{node}:{jid}")
        if report["orphans"]:
            log.warning("agents run jobs this controller does not know: %s", report["orphans"])
        log.info("reconcile: %s", report)
        return report
