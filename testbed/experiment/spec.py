"""Experiment specs (TOML) for live runs on the local cluster.

Two kinds, named by ``[experiment].kind``:

* ``paired`` (the default): seed 000 §4.1, job mixes under gang and paired
  gang; see ``experiments/paired-vs-gang.toml`` for the keys.
* ``job-stream``: seed 002 §5.3/§5.5, a seeded stream of jobs with
  exponential interarrival times under every scheme and MPL; see
  ``experiments/cdc-policies.toml`` and :mod:`testbed.experiment.streams`.

:func:`load_any` reads either. Every mistake raises :class:`SpecError` with
``file: [table].key: what is wrong; how to fix it``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.experiment.streams import StreamSpec, StreamSpecError, load_stream_spec

# config name -> (policy, parameters)
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "gang": ("gang", {}),
    "paired-fig4": ("paired-gang", {"matching": "fig4"}),
    "paired-best-fit": ("paired-gang", {"matching": "best-fit"}),
}


class SpecError(ValueError):
    """A malformed experiment spec."""


@dataclass(frozen=True)
class AppParams:
    gcomp: int
    gio: int
    nbytes: int = 8193
    device_latency: float = 0.0

    def argv(self, duration: float) -> list[str]:
        args = ["--gcomp", str(self.gcomp), "--gio", str(self.gio), "--bytes", str(self.nbytes)]
        if self.device_latency > 0:
            args += ["--device-latency", str(self.device_latency)]
        return [*args, "--duration", str(duration)]


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


def _app(table: dict[str, Any], where: str) -> AppParams:
    known = {"gcomp", "gio", "bytes", "device_latency"}
    for key in table:
        if key not in known:
            raise SpecError(f"{where}.{key}: unknown key; valid keys: {', '.join(sorted(known))}")
    app = AppParams(
        gcomp=_get(table, "gcomp", int, where),
        gio=_get(table, "gio", int, where),
        nbytes=_get(table, "bytes", int, where, 8193),
        device_latency=float(_get(table, "device_latency", (int, float), where, 0.0)),
    )
    if app.gcomp < 0 or app.gio < 0 or app.nbytes < 0 or app.device_latency < 0:
        raise SpecError(f"{where}: gcomp, gio, bytes and device_latency must be >= 0")
    return app


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
    if cpus is not None and (
        isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0
    ):
        raise SpecError(f"{wc}.cpus_per_node: a number > 0, e.g. 0.5")
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
        cpu_mechanism=_get(cluster, "cpu_mechanism", str, wc, "auto"),
        cfs_period_us=_get(cluster, "cfs_period_us", int, wc, 10_000),
        quantum=quantum,
        compute=_app(_get(jobs, "compute", dict, f"{origin}: [jobs]"), f"{origin}: [jobs.compute]"),
        io=_app(_get(jobs, "io", dict, f"{origin}: [jobs]"), f"{origin}: [jobs.io]"),
        cgroup=cgroup,
    )
