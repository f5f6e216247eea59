"""The spec of the paired-gang-under-user-level-communication study (kind
``paired-userlevel``; experiments/paired-userlevel.toml). Every mistake is one line
(:class:`testbed.experiment.fields.SpecError`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from testbed.experiment.fields import Table
from testbed.experiment.paired.spec import CONFIGS, AppParams, _app
from testbed.experiment.userlevel.model import WaitAction, parse_action

PARTNERS = ("io", "compute")
COMM_PATTERNS = ("nn", "a2a", "allreduce")
MATCHINGS = tuple(p["matching"] for name, (_, p) in CONFIGS.items() if name != "gang")


@dataclass(frozen=True)
class CommJob:
    """The communication-bound job: the synthetic program with its communication phase."""

    gcomp: int
    comm: str
    msg_bytes: int
    comm_rounds: int

    def with_wait(self, action: WaitAction) -> CommApp:
        return CommApp(self, action)


@dataclass(frozen=True)
class CommApp:
    job: CommJob
    action: WaitAction

    def argv(self, duration: float) -> list[str]:
        j = self.job
        return ["--gcomp", str(j.gcomp), "--gio", "0", "--comm", j.comm,
                "--msg-bytes", str(j.msg_bytes), "--comm-rounds", str(j.comm_rounds),
                *self.action.argv(), "--duration", f"{duration:g}"]  # fmt: skip


@dataclass(frozen=True)
class UserlevelSpec:
    name: str
    path: Path
    duration: float
    repeats: int
    nodes: int
    link: str
    cpus_per_node: float | None
    cpu_mechanism: str
    cfs_period_us: int
    cgroup: str
    cluster_weight: int | None  # the cluster's CPU weight against the host (run.py)
    quantum: float
    matching: str
    margin: float
    comm: CommJob
    partner_jobs: dict[str, AppParams]
    # paired gang beside each partner, one run per waiting action
    partners: dict[str, tuple[WaitAction, ...]]
    gang_waits: tuple[WaitAction, ...]  # strict gang beside each partner (the baseline)
    alone_waits: tuple[WaitAction, ...]  # the comm job alone: W's distribution, u(s)'s C
    quiet_limit: float = 0.15
    quiet_timeout: float = 60.0
    quiet_retries: int = 1
    quick: dict[str, Any] | None = None

    def runs_per_repeat(self) -> int:
        return len(self.alone_waits) + sum(
            len(w) + len(self.gang_waits) for w in self.partners.values()
        )

    def quick_version(self) -> UserlevelSpec:
        q = self.quick or {}
        return replace(
            self,
            name=self.name + "-quick",
            duration=q.get("duration", self.duration),
            repeats=q.get("repeats", self.repeats),
            partners=q.get("partners", self.partners),
            gang_waits=q.get("gang_waits", self.gang_waits),
            alone_waits=q.get("alone_waits", self.alone_waits),
            quick=None,
        )

    def doc(self) -> dict[str, Any]:
        """What results.json records of the spec."""
        return {
            "name": self.name,
            "path": str(self.path),
            "duration": self.duration,
            "repeats": self.repeats,
            "nodes": self.nodes,
            "link": self.link,
            "cpus_per_node": self.cpus_per_node,
            "cpu_mechanism": self.cpu_mechanism,
            "cluster_weight": self.cluster_weight,
            "quantum": self.quantum,
            "matching": self.matching,
            "margin": self.margin,
            "comm": {
                "gcomp": self.comm.gcomp,
                "comm": self.comm.comm,
                "msg_bytes": self.comm.msg_bytes,
                "comm_rounds": self.comm.comm_rounds,
            },
            "partner_jobs": {k: vars(v) for k, v in self.partner_jobs.items()},
            "partners": {k: [a.label for a in v] for k, v in self.partners.items()},
            "gang_waits": [a.label for a in self.gang_waits],
            "alone_waits": [a.label for a in self.alone_waits],
        }


def _actions(t: Table, key: str, default: Any = None) -> tuple[WaitAction, ...]:
    labels = t.items(key, str, default, unique=True, example='["block", "spinblock:200", "spin"]')
    out = []
    for label in labels:
        try:
            out.append(parse_action(label))
        except ValueError as e:
            raise t.error(key, str(e)) from None
    return tuple(out)


def _partners(t: Table, default: Any = None) -> dict[str, tuple[WaitAction, ...]]:
    t.only(PARTNERS)
    if not t.data:
        if default is not None:
            return dict(default)
        raise t.error(None, "name a partner", fix="io = [...] and/or compute = [...]")
    return {p: _actions(t, p) for p in PARTNERS if t.has(p)}


_EXPERIMENT = {"name", "duration", "repeats", "gang_waits", "alone_waits", "quiet_limit",
               "quiet_timeout", "quiet_retries"}  # fmt: skip
_CLUSTER = {"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup",
            "weight"}  # fmt: skip


def load(doc: Table) -> UserlevelSpec:
    exp = doc.table("experiment", required=True)
    cluster = doc.table("cluster", required=True)
    ctl = doc.table("controller", required=True)
    jobs = doc.table("jobs", required=True)
    exp.only(_EXPERIMENT)
    cluster.only(_CLUSTER)
    ctl.only({"quantum", "matching", "margin"})
    jobs.only({"comm", *PARTNERS})
    c = jobs.table("comm", required=True)
    c.only({"gcomp", "comm", "msg_bytes", "comm_rounds"})
    comm = CommJob(
        gcomp=c.integer("gcomp", 0, minimum=0),
        comm=c.text("comm", "nn", choices=COMM_PATTERNS),
        msg_bytes=c.integer("msg_bytes", 1024, minimum=0),
        comm_rounds=c.integer("comm_rounds", 2, minimum=1),
    )
    partners = _partners(doc.table("partners", required=True))
    # partners' barriers block, as Wiseman & Feitelson's conventional IPC did (§3.2)
    partner_jobs = {p: _app(jobs.table(p, required=True), "block") for p in partners}
    spec = UserlevelSpec(
        name=exp.text("name", doc.path.stem),
        path=doc.path,
        duration=exp.number("duration", 8.0, above=0),
        repeats=exp.integer("repeats", 2, minimum=1),
        nodes=cluster.integer("nodes", 2, minimum=2),
        link=cluster.text("link", "gige"),
        cpus_per_node=cluster.number("cpus_per_node", None, above=0),
        cpu_mechanism=cluster.text("cpu_mechanism", "auto"),
        cfs_period_us=cluster.integer("cfs_period_us", 10_000, minimum=1),
        cgroup=cluster.text("cgroup", "auto", choices=("auto", "v1", "v2")),
        cluster_weight=cluster.integer("weight", None, minimum=1, maximum=10000),
        quantum=ctl.number("quantum", 0.2, minimum=0.01),
        matching=ctl.text("matching", "best-fit", choices=MATCHINGS),
        margin=ctl.number("margin", 0.01, minimum=0, below=1),
        comm=comm,
        partner_jobs=partner_jobs,
        partners=partners,
        gang_waits=_actions(exp, "gang_waits", ["block", "spin"]),
        alone_waits=_actions(exp, "alone_waits", ["block", "spin"]),
        quiet_limit=exp.number("quiet_limit", 0.15, minimum=0),
        quiet_timeout=exp.number("quiet_timeout", 60.0, minimum=0),
        quiet_retries=exp.integer("quiet_retries", 1, minimum=0),
    )
    if not any(a.recv == "block" for a in spec.alone_waits):
        raise exp.error("alone_waits", "needs block: the prediction's C is the blocking ratio")
    return replace(spec, quick=_quick(doc, spec))


def _quick(doc: Table, spec: UserlevelSpec) -> dict[str, Any] | None:
    if not doc.has("quick"):
        return None
    q = doc.table("quick")
    q.only({"duration", "repeats", "gang_waits", "alone_waits", "partners"})
    out: dict[str, Any] = {}
    if q.has("duration"):
        out["duration"] = q.number("duration", above=0)
    if q.has("repeats"):
        out["repeats"] = q.integer("repeats", minimum=1)
    if q.has("gang_waits"):
        out["gang_waits"] = _actions(q, "gang_waits")
    if q.has("alone_waits"):
        out["alone_waits"] = _actions(q, "alone_waits")
        if not any(a.recv == "block" for a in out["alone_waits"]):
            raise q.error("alone_waits", "needs block: the prediction's C is the blocking ratio")
    if q.has("partners"):
        parts = _partners(q.table("partners"))
        for p in parts:
            if p not in spec.partners:
                raise q.error("partners", f"{p!r} has no [jobs.{p}] in the spec")
        out["partners"] = parts
    return out
