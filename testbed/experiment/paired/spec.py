"""Experiment specs (TOML) for live runs on the local cluster.

Two kinds, named by ``[experiment].kind``:

* ``paired`` (the default): Wiseman & Feitelson 2003 §4.1, job mixes under gang and paired
  gang; see ``experiments/paired-vs-gang.toml`` for the keys.
* ``job-stream``: Yu & Byun 2011 §5.3/§5.5, a seeded stream of jobs with
  exponential interarrival times under every scheme and MPL; see
  ``experiments/cdc-policies.toml`` and :mod:`testbed.experiment.cdc.stream`.

:func:`load_any` reads either. Every mistake raises :class:`SpecError` with
``file: [table].key: what is wrong; how to fix it``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.experiment.cdc.stream import StreamSpec, StreamSpecError, load_stream_spec

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

# [sweep] keys (Wiseman & Feitelson 2003 Figs. 8 and 9): one per spec.
#   nodes       cluster sizes; each point brings up its own cluster
#   gcomp_scale factors on the compute-bound jobs' G_comp (the paper's null loop
#               2.5M -> 2.0M -> 1.5M -> 1.0M is 1.0, 0.8, 0.6, 0.4)
SWEEP_KEYS = ("nodes", "gcomp_scale")

# [cluster].cpus_per_node = "fit": one core per node while the host's cores
# last, else k nodes share each core equally (k = ceil(nodes / cores), the
# "shared" mechanism) -- what a nodes sweep needs on any host.
FIT = "fit"


class SpecError(ValueError):
    """A malformed experiment spec."""


@dataclass(frozen=True)
class AppParams:
    gcomp: int
    gio: int
    nbytes: int = 8193
    device_latency: float = 0.0
    wait: str | None = None  # receive waiting action; None: the program's default (spin)

    def argv(self, duration: float) -> list[str]:
        args = ["--gcomp", str(self.gcomp), "--gio", str(self.gio), "--bytes", str(self.nbytes)]
        if self.device_latency > 0:
            args += ["--device-latency", str(self.device_latency)]
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
    # A quiet host (testbed/experiment/hostload.py, runner._quiet_run): each run
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


def _get(
    table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = ...
) -> Any:
    if key not in table:
        if default is ...:
            raise SpecError(f"{where}.{key}: missing; add `{key} = ...` to the table")
        return default
    value = table[key]
    if isinstance(value, bool) and kind is not bool:
        raise SpecError(f"{where}.{key}: expected {_kind_name(kind)}, got {value!r}")
    if not isinstance(value, kind):
        raise SpecError(f"{where}.{key}: expected {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _table(doc: dict[str, Any], name: str, origin: str) -> dict[str, Any]:
    table = doc.get(name)
    if not isinstance(table, dict):
        raise SpecError(f"{origin}: [{name}] table missing; see experiments/paired-vs-gang.toml")
    return table


def _app(table: dict[str, Any], where: str, wait: str | None) -> AppParams:
    known = {"gcomp", "gio", "bytes", "device_latency", "wait"}
    for key in table:
        if key not in known:
            raise SpecError(f"{where}.{key}: unknown key; valid keys: {', '.join(sorted(known))}")
    app = AppParams(
        gcomp=_get(table, "gcomp", int, where),
        gio=_get(table, "gio", int, where),
        nbytes=_get(table, "bytes", int, where, 8193),
        device_latency=float(_get(table, "device_latency", (int, float), where, 0.0)),
        wait=_wait(table, where, wait),
    )
    if app.gcomp < 0 or app.gio < 0 or app.nbytes < 0 or app.device_latency < 0:
        raise SpecError(f"{where}: gcomp, gio, bytes and device_latency must be >= 0")
    return app


def _wait(table: dict[str, Any], where: str, default: str | None) -> str | None:
    wait = _get(table, "wait", str, where, default)
    if wait is not None and wait not in WAITS:
        raise SpecError(f"{where}.wait: one of {', '.join(WAITS)}, got {wait!r}")
    return wait  # type: ignore[no-any-return]


def _sweep(doc: dict[str, Any], origin: str) -> Sweep | None:
    table = doc.get("sweep")
    if table is None:
        return None
    w = f"{origin}: [sweep]"
    if not isinstance(table, dict):
        raise SpecError(f"{w}: must be a table, e.g. [sweep] nodes = [2, 4]")
    keys = list(table)
    for key in keys:
        if key not in SWEEP_KEYS:
            raise SpecError(f"{w}.{key}: unknown key; valid keys: {', '.join(SWEEP_KEYS)}")
    if len(keys) != 1:
        raise SpecError(f"{w}: exactly one of {', '.join(SWEEP_KEYS)} (one sweep per spec)")
    key = keys[0]
    values = table[key]
    if not isinstance(values, list) or not values:
        raise SpecError(f"{w}.{key}: a non-empty list, e.g. {key} = [2, 4]")
    if key == "nodes":
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise SpecError(f"{w}.nodes: whole node counts >= 1, e.g. [2, 4]")
    elif any(isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 for v in values):
        raise SpecError(f"{w}.gcomp_scale: factors > 0, e.g. [1.0, 0.8, 0.6, 0.4]")
    if len(set(values)) != len(values):
        raise SpecError(f"{w}.{key}: a value appears twice")
    return Sweep(key, tuple(float(v) for v in values))


KINDS = ("paired", "job-stream")


def _read(p: Path) -> dict[str, Any]:
    origin = str(p)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise SpecError(f"{origin}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{origin}: not valid TOML: {exc}") from None


def _kind(doc: dict[str, Any], origin: str) -> str:
    exp = doc.get("experiment")
    kind = exp.get("kind", "paired") if isinstance(exp, dict) else "paired"
    if kind not in KINDS:
        raise SpecError(f"{origin}: [experiment].kind: one of {', '.join(KINDS)}, got {kind!r}")
    return str(kind)


def load_any(path: str | Path) -> ExperimentSpec | StreamSpec:
    """An experiment spec of either kind (module docstring)."""
    p = Path(path)
    doc = _read(p)
    if _kind(doc, str(p)) == "job-stream":
        try:
            return load_stream_spec(doc, p)
        except StreamSpecError as exc:
            raise SpecError(str(exc)) from None
    return load_experiment(p)


def load_experiment(path: str | Path) -> ExperimentSpec:
    p = Path(path)
    origin = str(p)
    doc = _read(p)
    if _kind(doc, origin) != "paired":
        raise SpecError(f"{origin}: a job-stream spec; read it with load_any")
    exp = _table(doc, "experiment", origin)
    cluster = _table(doc, "cluster", origin)
    ctl = _table(doc, "controller", origin)
    jobs = _table(doc, "jobs", origin)
    w = f"{origin}: [experiment]"
    duration = float(_get(exp, "duration", (int, float), w, 20.0))
    if duration <= 0:
        raise SpecError(f"{w}.duration: must be > 0 seconds")
    mixes = tuple(_get(exp, "mixes", list, w, [0, 1, 2, 3, 4]))
    if not mixes or any(not isinstance(m, int) or not 0 <= m <= 4 for m in mixes):
        raise SpecError(f"{w}.mixes: a list of I/O job counts in 0..4, e.g. [0, 1, 2, 3, 4]")
    configs = tuple(_get(exp, "configs", list, w, list(CONFIGS)))
    for c in configs:
        if c not in CONFIGS:
            raise SpecError(f"{w}.configs: unknown {c!r}; valid: {', '.join(CONFIGS)}")
    wc = f"{origin}: [cluster]"
    nodes = _get(cluster, "nodes", int, wc, 4)
    if nodes < 1:
        raise SpecError(f"{wc}.nodes: must be >= 1")
    cpus = cluster.get("cpus_per_node")
    fit = cpus == FIT
    if fit:
        cpus = None
    elif cpus is not None and (
        isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0
    ):
        raise SpecError(f'{wc}.cpus_per_node: a number > 0, e.g. 0.5, or "{FIT}"')
    mechanism = _get(cluster, "cpu_mechanism", str, wc, "auto")
    if fit and "cpu_mechanism" in cluster:
        raise SpecError(f'{wc}.cpu_mechanism: cpus_per_node = "{FIT}" chooses it; remove the key')
    sweep = _sweep(doc, origin)
    quiet_limit = float(_get(exp, "quiet_limit", (int, float), w, 0.15))
    quiet_retries = _get(exp, "quiet_retries", int, w, 3)
    if quiet_limit < 0 or quiet_retries < 0:
        raise SpecError(f"{w}: quiet_limit (cores) and quiet_retries must be >= 0")
    jw = f"{origin}: [jobs]"
    wait = _wait(jobs, jw, None)
    quantum = float(_get(ctl, "quantum", (int, float), f"{origin}: [controller]", 0.2))
    if quantum < 0.01:
        raise SpecError(f"{origin}: [controller].quantum: must be >= 0.01 s")
    cgroup = _get(cluster, "cgroup", str, wc, "auto")
    if cgroup not in ("auto", "v1", "v2"):
        raise SpecError(f"{origin}: [cluster].cgroup: must be auto, v1 or v2, got {cgroup!r}")
    return ExperimentSpec(
        name=_get(exp, "name", str, w, p.stem),
        path=p,
        duration=duration,
        mixes=mixes,
        configs=configs,
        nodes=nodes,
        link=_get(cluster, "link", str, wc, "myrinet"),
        cpus_per_node=float(cpus) if cpus is not None else None,
        cpu_mechanism=mechanism,
        cfs_period_us=_get(cluster, "cfs_period_us", int, wc, 10_000),
        quantum=quantum,
        compute=_app(_get(jobs, "compute", dict, jw), f"{origin}: [jobs.compute]", wait),
        io=_app(_get(jobs, "io", dict, jw), f"{origin}: [jobs.io]", wait),
        cgroup=cgroup,
        sweep=sweep,
        cpus_fit=fit,
        quiet_limit=quiet_limit,
        quiet_retries=quiet_retries,
    )
