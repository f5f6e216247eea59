"""The spec of the paired-vs-gang study (kind ``paired-live``; Wiseman & Feitelson 2003 §4.1):
job mixes under strict and paired gang on the local cluster, with a ``[sweep]`` over the
cluster's size (Fig. 8) or the compute jobs' granularity (Fig. 9). See
``experiments/paired-vs-gang.toml`` for the keys; every mistake is one line
(:class:`testbed.experiment.fields.SpecError`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.fields import SpecError, Table, read_toml

# config name -> (policy, parameters). "paired-fig4" is Fig. 4 to the letter;
# "paired-fig4-prose" also matches the job where Fig. 4's pointers meet, as
# §4.1.2's prose says ("matched with *all* the compute-bound jobs in turn");
# docs/policies.md.
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "gang": ("gang", {}),
    "paired-fig4": ("paired-gang", {"matching": "fig4"}),
    "paired-fig4-prose": ("paired-gang", {"matching": "fig4-prose"}),
    "paired-best-fit": ("paired-gang", {"matching": "best-fit"}),
}

WAITS = ("spin", "block", "spinblock")
# [jobs.*].device: "rank" (each rank sleeps its own device latency) or "node" (the
# node's one I/O device, shared by every job there; agent/iodevice.py)
DEVICES = ("rank", "node")

# [sweep] keys (Wiseman & Feitelson 2003 Figs. 8 and 9): one per spec.
#   nodes       cluster sizes; each point brings up its own cluster
#   gcomp_scale factors on the compute-bound jobs' G_comp (the paper's null loop
#               2.5M -> 2.0M -> 1.5M -> 1.0M is 1.0, 0.8, 0.6, 0.4)
SWEEP_KEYS = ("nodes", "gcomp_scale")

# [cluster].cpus_per_node = "fit": one core per node while the host's cores
# last, else k nodes share each core equally (k = ceil(nodes / cores), the
# "shared" mechanism) -- what a nodes sweep needs on any host.
FIT = "fit"


@dataclass(frozen=True)
class AppParams:
    gcomp: int
    gio: int
    nbytes: int = 8193
    device_latency: float = 0.0
    wait: str | None = None  # receive waiting action; None: the program's default (spin)
    device: str = "rank"  # whose device the latency waits on: the rank's, or the node's shared

    def argv(self, duration: float) -> list[str]:
        args = ["--gcomp", str(self.gcomp), "--gio", str(self.gio), "--bytes", str(self.nbytes)]
        if self.device_latency > 0:
            args += ["--device-latency", str(self.device_latency)]
        if self.device != "rank":
            args += ["--device", self.device]
        if self.wait is not None:
            args += ["--wait", self.wait]
        return [*args, "--duration", str(duration)]

    def scaled(self, factor: float) -> AppParams:
        """The same job with G_comp scaled (Wiseman & Feitelson 2003 Fig. 9's granularity)."""
        return replace(self, gcomp=max(0, round(self.gcomp * factor)))


@dataclass(frozen=True)
class Sweep:
    """One [sweep] key and its values (Wiseman & Feitelson 2003 Fig. 8: nodes; Fig. 9:
    gcomp_scale)."""

    key: str
    values: tuple[float, ...]

    def label(self, value: float) -> str:
        if self.key == "nodes":
            return f"nodes{int(value)}"
        return f"gcomp{value:g}"


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    path: Path
    duration: float
    mixes: tuple[int, ...]
    configs: tuple[str, ...]
    nodes: int
    link: str
    cpus_per_node: float | None
    cpu_mechanism: str
    cfs_period_us: int
    quantum: float
    compute: AppParams
    io: AppParams
    extra: dict[str, Any] = field(default_factory=dict)
    cgroup: str = "auto"  # which cgroup hierarchies: auto | v1 | v2 (docs/cluster.md)
    sweep: Sweep | None = None
    cpus_fit: bool = False  # cpus_per_node = "fit": derived from nodes and the host's cores
    # A quiet host (harness/hostload.py, paired/run.py's _quiet_run): each run
    # waits (up to quiet_timeout s) until the host spends less than quiet_limit
    # cores outside the experiment, and one during which it spent more is run
    # again. The wait is bounded so that `make run` on a busy host still ends.
    quiet_limit: float = 0.15
    quiet_timeout: float = 60.0
    quiet_retries: int = 3

    def with_cores(self, cores: int) -> ExperimentSpec:
        """``cpus_per_node = "fit"`` resolved for a host of ``cores`` cores."""
        if not self.cpus_fit:
            return self
        cpus, mechanism = fit_cpus(self.nodes, cores)
        return replace(self, cpus_per_node=cpus, cpu_mechanism=mechanism)

    def points(self, cores: int) -> list[tuple[str, float, ExperimentSpec]]:
        """(label, value, spec) for every point of the sweep; one point without one."""
        if self.sweep is None:
            return [("", 0.0, self.with_cores(cores))]
        out = []
        for v in self.sweep.values:
            if self.sweep.key == "nodes":
                point = replace(self, nodes=int(v), sweep=None)
            else:
                point = replace(self, compute=self.compute.scaled(v), sweep=None)
            out.append((self.sweep.label(v), v, point.with_cores(cores)))
        return out


def fit_cpus(nodes: int, cores: int) -> tuple[float, str]:
    """CPU per node and mechanism for ``cpus_per_node = "fit"`` (see FIT)."""
    if nodes <= cores:
        return 1.0, "cpuset"
    share = math.ceil(nodes / cores)
    return 1.0 / share, "shared"


def _app(t: Table, wait: str | None) -> AppParams:
    t.only({"gcomp", "gio", "bytes", "device_latency", "wait", "device"})
    return AppParams(
        gcomp=t.integer("gcomp", minimum=0),
        gio=t.integer("gio", minimum=0),
        nbytes=t.integer("bytes", 8193, minimum=0),
        device_latency=t.number("device_latency", 0.0, minimum=0),
        wait=t.text("wait", wait, choices=WAITS),
        device=t.text("device", "rank", choices=DEVICES),
    )


def _sweep(doc: Table) -> Sweep | None:
    if not doc.has("sweep"):
        return None
    t = doc.table("sweep")
    t.only(SWEEP_KEYS)
    if len(t.data) != 1:
        raise t.error(None, f"exactly one of {', '.join(SWEEP_KEYS)} (one sweep per spec)")
    if t.has("nodes"):
        values = t.items("nodes", int, minimum=1, unique=True, example="[2, 4]")
        return Sweep("nodes", tuple(float(v) for v in values))
    values = t.items(
        "gcomp_scale", (int, float), above=0, unique=True, example="[1.0, 0.8, 0.6, 0.4]"
    )
    return Sweep("gcomp_scale", tuple(float(v) for v in values))


_EXPERIMENT = {"name", "duration", "mixes", "configs", "quiet_limit", "quiet_retries"}
_CLUSTER = {"nodes", "link", "cpus_per_node", "cpu_mechanism", "cfs_period_us", "cgroup"}


def load_experiment(doc: Table) -> ExperimentSpec:
    """A ``paired-live`` spec (experiments/paired-vs-gang.toml)."""
    exp = doc.table("experiment", required=True)
    cluster = doc.table("cluster", required=True)
    ctl = doc.table("controller", required=True)
    jobs = doc.table("jobs", required=True)
    exp.only(_EXPERIMENT)
    cluster.only(_CLUSTER)
    ctl.only({"quantum"})
    jobs.only({"wait", "compute", "io"})
    cpus = cluster.data.get("cpus_per_node")
    fit = cpus == FIT
    if fit:
        if cluster.has("cpu_mechanism"):
            raise cluster.error(
                "cpu_mechanism", f'cpus_per_node = "{FIT}" chooses it', fix="remove the key"
            )
        cpus = None
    elif cpus is not None:
        cpus = cluster.number("cpus_per_node", above=0)
    wait = jobs.text("wait", None, choices=WAITS) if jobs.has("wait") else None
    return ExperimentSpec(
        name=exp.text("name", doc.path.stem),
        path=doc.path,
        duration=exp.number("duration", 20.0, above=0),
        mixes=tuple(
            exp.items(
                "mixes", int, [0, 1, 2, 3, 4], minimum=0, maximum=4, example="[0, 1, 2, 3, 4]"
            )
        ),
        configs=tuple(exp.items("configs", str, list(CONFIGS), choices=tuple(CONFIGS))),
        nodes=cluster.integer("nodes", 4, minimum=1),
        link=cluster.text("link", "myrinet"),
        cpus_per_node=float(cpus) if cpus is not None else None,
        cpu_mechanism=cluster.text("cpu_mechanism", "auto"),
        cfs_period_us=cluster.integer("cfs_period_us", 10_000, minimum=1),
        quantum=ctl.number("quantum", 0.2, minimum=0.01),
        compute=_app(jobs.table("compute", required=True), wait),
        io=_app(jobs.table("io", required=True), wait),
        cgroup=cluster.text("cgroup", "auto", choices=("auto", "v1", "v2")),
        sweep=_sweep(doc),
        cpus_fit=fit,
        quiet_limit=exp.number("quiet_limit", 0.15, minimum=0),
        quiet_retries=exp.integer("quiet_retries", 3, minimum=0),
    )


def read_experiment(path: str | Path) -> ExperimentSpec:
    """A paired-live spec file (``cosched calibrate --spec`` reads its cluster and jobs)."""
    from testbed.experiment import registry

    p = Path(path)
    doc = read_toml(p)
    if registry.kind_of(doc, p) != "paired-live":
        raise SpecError(
            f"{p}: not a paired-live spec", fix="give e.g. experiments/paired-vs-gang-2node.toml"
        )
    return load_experiment(Table.document(doc, p))
