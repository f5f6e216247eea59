"""Workload specs (TOML) and the ``--workload`` argument of the CLI.

A spec file has a ``[workload]`` table; other tables are left to whoever reads
the rest of the file (experiment specs embed this table).  Example::

    [workload]
    source = "lublin"          # "lublin" | "swf" | "mix"
    jobs = 1000
    seed = 1
    runtime_scale = 0.025      # Wiseman & Feitelson 2003 §4.2 divided times by 40
    load = 0.8                 # stretch inter-arrival gaps to this offered load
    profile = "heterogeneous"  # "compute" | "homogeneous" | "heterogeneous" | "qcrd"

Keys (type, default) and the sources they apply to:

=================  ======  ==========  =============================================
key                type    default     meaning
=================  ======  ==========  =============================================
source             str     (required)  ``lublin``, ``swf`` or ``mix``
seed               int     1           random seed (Lublin model, heterogeneous draw)
jobs               int     1000        lublin: jobs to generate; swf: keep the first N
load               float   (none)      lublin, swf: target offered load (load.py)
profile            str     compute     lublin, swf: CPU/I-O profile (synthetic.py)
runtime_scale      float   1.0         multiply submit, run and estimate times
barrier            float   (profile)   barrier interval in seconds, overrides profile
barrier_count      int     (none)      barriers per job (interval = runtime / count)
interactive        bool    true        lublin: batch + interactive types (reference)
estimate_factor    float   1.0         lublin: estimate = runtime * factor
path               str     (required)  swf: trace, relative to the spec file
skip_bad_lines     bool    false       swf: skip and count malformed lines
oversize           str     reject      swf: jobs wider than the machine: reject (the simulator
                                       rejects each, counts it, and goes on)|error|drop|clip
io_jobs            int     (required)  mix: I/O-bound jobs, 0..4 (Wiseman & Feitelson 2003 §4.1)
runtime            float   600         mix: run time of each job
io_cpu             float   0.0         mix: CPU utilization of the I/O-bound jobs
compute_cpu        float   0.95        mix: CPU utilization of the compute-bound jobs
barriers           int     250         mix: barriers per job
=================  ======  ==========  =============================================

Order of application: generate/read, ``runtime_scale``, ``load``, ``profile``,
``barrier``/``barrier_count``.  Every mistake (unknown key, wrong type, missing
or inapplicable key, bad value) raises :class:`WorkloadError` whose message
reads ``file: [workload].key: what is wrong; how to fix it``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.sim.job import SimJob
from testbed.sim.workloads.load import offered_load, scale_time, scale_to_load
from testbed.sim.workloads.swf import SwfError, SwfHeader, read_swf
from testbed.sim.workloads.synthetic import PROFILES, apply_profile, io_compute_mix, set_barrier

__all__ = [
    "SOURCES",
    "WorkloadError",
    "WorkloadInfo",
    "WorkloadSpec",
    "build_workload",
    "build_workload_info",
    "load_workload_spec",
    "parse_workload_table",
    "resolve_workload",
]

SOURCES = ("lublin", "swf", "mix")
OVERSIZE = ("reject", "error", "drop", "clip")
SECTION = "workload"


class WorkloadError(ValueError):
    """A bad workload spec or ``--workload`` argument; the message says where and how to fix."""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A validated workload description (see the module docstring for the keys)."""

    source: str
    seed: int = 1
    jobs: int | None = None
    load: float | None = None
    profile: str = "compute"
    runtime_scale: float = 1.0
    barrier: float | None = None
    barrier_count: int | None = None
    interactive: bool = True
    estimate_factor: float = 1.0
    path: Path | None = None
    skip_bad_lines: bool = False
    oversize: str = "reject"
    io_jobs: int | None = None
    runtime: float = 600.0
    io_cpu: float = 0.0
    compute_cpu: float = 0.95
    barriers: int = 250
    origin: str = "<spec>"  # where it came from, for messages


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """What was built, for logs and reports."""

    description: str
    spec: WorkloadSpec
    n_jobs: int
    offered_load: float
    skipped_lines: int = 0
    dropped_jobs: int = 0
    header: SwfHeader | None = None


# key -> (python types accepted, type name for messages, sources it applies to)
_COMMON = frozenset(SOURCES)
_KEYS: dict[str, tuple[tuple[type, ...], str, frozenset[str]]] = {
    "source": ((str,), "a string", _COMMON),
    "seed": ((int,), "an integer", _COMMON),
    "jobs": ((int,), "an integer", frozenset({"lublin", "swf"})),
    "load": ((int, float), "a number", frozenset({"lublin", "swf"})),
    "profile": ((str,), "a string", frozenset({"lublin", "swf"})),
    "runtime_scale": ((int, float), "a number", _COMMON),
    "barrier": ((int, float), "a number", _COMMON),
    "barrier_count": ((int,), "an integer", _COMMON),
    "interactive": ((bool,), "a boolean (true or false)", frozenset({"lublin"})),
    "estimate_factor": ((int, float), "a number", frozenset({"lublin"})),
    "path": ((str,), "a string", frozenset({"swf"})),
    "skip_bad_lines": ((bool,), "a boolean (true or false)", frozenset({"swf"})),
    "oversize": ((str,), "a string", frozenset({"swf"})),
    "io_jobs": ((int,), "an integer", frozenset({"mix"})),
    "runtime": ((int, float), "a number", frozenset({"mix"})),
    "io_cpu": ((int, float), "a number", frozenset({"mix"})),
    "compute_cpu": ((int, float), "a number", frozenset({"mix"})),
    "barriers": ((int,), "an integer", frozenset({"mix"})),
}
_EXAMPLES = {
    "source": '"lublin"',
    "seed": "1",
    "jobs": "1000",
    "load": "0.8",
    "profile": '"heterogeneous"',
    "runtime_scale": "0.025",
    "barrier": "0.01",
    "barrier_count": "250",
    "interactive": "true",
    "estimate_factor": "1.0",
    "path": '"traces/KTH.swf"',
    "skip_bad_lines": "true",
    "oversize": '"drop"',
    "io_jobs": "2",
    "runtime": "600",
    "io_cpu": "0.0",
    "compute_cpu": "0.95",
    "barriers": "250",
}


def _err(origin: str, key: str | None, reason: str) -> WorkloadError:
    where = f"[{SECTION}]" + (f".{key}" if key else "")
    return WorkloadError(f"{origin}: {where}: {reason}")


def _describe(value: object) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), type(value).__name__
    )
    return f"{kind} {value!r}"


def parse_workload_table(
    table: Mapping[str, Any], *, origin: str = "<spec>", base_dir: Path | None = None
) -> WorkloadSpec:
    """Validate an already parsed ``[workload]`` table into a :class:`WorkloadSpec`.

    ``origin`` names the file in messages; ``path`` is resolved against ``base_dir``.
    """
    for key in table:
        if key not in _KEYS:
            import difflib  # only to suggest a name for a mistyped key

            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(_KEYS)}"
            raise _err(origin, key, f"unknown key; {hint}")
    if "source" not in table:
        raise _err(
            origin,
            "source",
            f"missing; add source = {_EXAMPLES['source']} (one of {', '.join(SOURCES)})",
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        types, type_name, _ = _KEYS[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            raise _err(
                origin,
                key,
                f"expected {type_name}, got {_describe(value)}; "
                f"write e.g. {key} = {_EXAMPLES[key]}",
            )
        values[key] = float(value) if float in types else value
    source = values["source"]
    if source not in SOURCES:
        raise _err(origin, "source", f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    for key in values:
        applies = _KEYS[key][2]
        if source not in applies:
            raise _err(
                origin,
                key,
                f"does not apply to source = {source!r} "
                f"(only to {', '.join(sorted(applies))}); remove it",
            )
    _check_values(values, origin)
    if source == "swf":
        if "path" not in values:
            raise _err(origin, "path", 'missing for source = "swf"; add path = "trace.swf"')
        p = Path(values["path"])
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        values["path"] = p
    if source == "mix" and "io_jobs" not in values:
        raise _err(origin, "io_jobs", 'missing for source = "mix"; add io_jobs = 0..4')
    return WorkloadSpec(origin=origin, **values)


def _check_values(values: dict[str, Any], origin: str) -> None:
    def need(key: str, cond: bool, what: str) -> None:
        if key in values and not cond:
            raise _err(
                origin, key, f"{what}, got {values[key]!r}; write e.g. {key} = {_EXAMPLES[key]}"
            )

    need("jobs", values.get("jobs", 1) >= 1, "must be at least 1")
    need("load", 0 < values.get("load", 1.0) < float("inf"), "must be a positive number")
    need("profile", values.get("profile") in PROFILES, f"must be one of {', '.join(PROFILES)}")
    need("runtime_scale", values.get("runtime_scale", 1.0) > 0, "must be positive")
    need("barrier", values.get("barrier", 0.0) >= 0, "must be >= 0 (0 = no barriers)")
    need("barrier_count", values.get("barrier_count", 1) >= 1, "must be at least 1")
    need("estimate_factor", values.get("estimate_factor", 1.0) > 0, "must be positive")
    need(
        "oversize",
        values.get("oversize", "reject") in OVERSIZE,
        f"must be one of {', '.join(OVERSIZE)}",
    )
    need(
        "io_jobs",
        0 <= values.get("io_jobs", 0) <= 4,
        "must be 0..4 (Wiseman & Feitelson 2003 §4.1 mixes)",
    )
    need("runtime", values.get("runtime", 1.0) > 0, "must be positive")
    need("io_cpu", 0 <= values.get("io_cpu", 0.0) <= 1, "must be in [0, 1]")
    need("compute_cpu", 0 <= values.get("compute_cpu", 0.0) <= 1, "must be in [0, 1]")
    need("barriers", values.get("barriers", 1) >= 1, "must be at least 1")
    if "barrier" in values and "barrier_count" in values:
        raise _err(origin, "barrier_count", "conflicts with barrier; keep only one of the two")


def load_workload_spec(path: str | Path) -> WorkloadSpec:
    """Read the ``[workload]`` table of a TOML file (see the module docstring)."""
    import tomllib  # here, not at the top: most runs have no spec file (start-up time)

    p = Path(path)
    try:
        with p.open("rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise WorkloadError(f"{p}: cannot read workload spec: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{p}: invalid TOML: {exc}") from None
    table = doc.get(SECTION)
    if table is None:
        raise WorkloadError(
            f'{p}: [{SECTION}]: missing table; add a [{SECTION}] section with source = "lublin"'
        )
    if not isinstance(table, dict):
        raise WorkloadError(f"{p}: [{SECTION}]: must be a table, got {_describe(table)}")
    return parse_workload_table(table, origin=str(p), base_dir=p.parent)


def build_workload(spec: WorkloadSpec, nodes: int) -> list[SimJob]:
    """The jobs ``spec`` describes, for a ``nodes``-node machine."""
    return build_workload_info(spec, nodes)[0]


def build_workload_info(spec: WorkloadSpec, nodes: int) -> tuple[list[SimJob], WorkloadInfo]:
    """:func:`build_workload` plus a :class:`WorkloadInfo` describing the result."""
    if nodes < 1:
        raise WorkloadError(f"{spec.origin}: machine size must be >= 1 node, got {nodes}")
    skipped = dropped = 0
    header: SwfHeader | None = None
    if spec.source == "lublin":
        # imported here: the model needs numpy, which an SWF run does not (start-up time)
        from testbed.sim.workloads.lublin import generate_lublin

        n = spec.jobs if spec.jobs is not None else 1000
        jobs = generate_lublin(
            n, nodes, spec.seed, interactive=spec.interactive, estimate_factor=spec.estimate_factor
        )
        kind = "batch+interactive" if spec.interactive else "single-type"
        desc = f"Lublin-Feitelson model ({kind}), {n} jobs, seed {spec.seed}"
    elif spec.source == "swf":
        assert spec.path is not None
        try:
            result = read_swf(spec.path, skip_bad_lines=spec.skip_bad_lines)
        except SwfError as exc:
            raise WorkloadError(
                f"{exc}; fix the line or set skip_bad_lines = true in [{SECTION}] "
                "(or --skip-bad-lines)"
            ) from None
        except OSError as exc:
            raise _err(
                spec.origin, "path", f"cannot read {spec.path}: {exc.strerror or exc}"
            ) from None
        jobs, skipped, header = result.jobs, result.skipped, result.header
        if spec.jobs is not None:
            jobs = jobs[: spec.jobs]
        jobs, dropped = _fit(jobs, nodes, spec)
        desc = f"SWF trace {spec.path}, {len(jobs)} jobs"
    else:
        assert spec.io_jobs is not None
        jobs = io_compute_mix(
            spec.io_jobs,
            nodes,
            runtime=spec.runtime,
            io_cpu=spec.io_cpu,
            compute_cpu=spec.compute_cpu,
            barriers=spec.barriers,
        )
        desc = f"Wiseman & Feitelson 2003 §4.1 mix {spec.io_jobs} ({spec.io_jobs} I/O-bound, "
        desc += f"{4 - spec.io_jobs} compute-bound)"
    if not jobs:
        raise WorkloadError(f"{spec.origin}: the workload has no jobs")
    if spec.runtime_scale != 1.0:
        jobs = scale_time(jobs, spec.runtime_scale)
    if spec.load is not None:
        try:
            jobs = scale_to_load(jobs, nodes, spec.load)
        except ValueError as exc:
            raise _err(spec.origin, "load", f"{exc}; remove load") from None
    if spec.source != "mix":  # the mix carries its own profiles
        jobs = apply_profile(jobs, spec.profile, seed=spec.seed)
    if spec.barrier is not None:
        jobs = set_barrier(jobs, interval=spec.barrier)
    elif spec.barrier_count is not None:
        jobs = set_barrier(jobs, count=spec.barrier_count)
    if spec.profile != "compute":
        desc += f", profile {spec.profile}"
    info = WorkloadInfo(
        description=desc,
        spec=spec,
        n_jobs=len(jobs),
        offered_load=offered_load(jobs, nodes),
        skipped_lines=skipped,
        dropped_jobs=dropped,
        header=header,
    )
    return jobs, info


def _fit(jobs: list[SimJob], nodes: int, spec: WorkloadSpec) -> tuple[list[SimJob], int]:
    wide = [j for j in jobs if j.size > nodes]
    if not wide or spec.oversize == "reject":
        return jobs, 0
    if spec.oversize == "drop":
        return [j for j in jobs if j.size <= nodes], len(wide)
    if spec.oversize == "clip":
        return [dataclasses.replace(j, size=nodes) if j.size > nodes else j for j in jobs], 0
    biggest = max(j.size for j in wide)
    raise _err(
        spec.origin,
        "oversize",
        f"{len(wide)} job(s) of the trace need up to {biggest} processors but the machine has "
        f'{nodes} nodes; use more nodes, or set oversize = "drop" or "clip"',
    )


def resolve_workload(
    arg: str,
    *,
    nodes: int,
    seed: int | None = None,
    jobs: int | None = None,
    load: float | None = None,
    skip_bad_lines: bool | None = None,
    profile: str | None = None,
    oversize: str | None = None,
) -> tuple[list[SimJob], WorkloadInfo]:
    """Resolve the CLI's ``--workload`` value: ``lublin``, ``lublin1`` (single type),
    ``swf:PATH``, ``mix:I`` or ``SPEC.toml``.  Options given (not ``None``) override
    the spec file's values; otherwise defaults apply (seed 1, 1000 Lublin jobs).
    ``oversize`` (reject|error|drop|clip) says what to do with trace jobs wider than ``nodes``."""
    origin = f"--workload {arg}"
    spec: WorkloadSpec
    if arg in ("lublin", "lublin1"):
        spec = WorkloadSpec(source="lublin", interactive=arg == "lublin", origin=origin)
    elif arg.startswith("swf:"):
        path = arg[4:]
        if not path:
            raise WorkloadError(f"{origin}: missing trace path; write --workload swf:PATH")
        spec = WorkloadSpec(source="swf", path=Path(path), origin=origin)
    elif arg.startswith("mix:"):
        try:
            i = int(arg[4:])
        except ValueError:
            i = -1
        if not 0 <= i <= 4:
            raise WorkloadError(f"{origin}: the mix number must be 0..4; write e.g. mix:2")
        spec = WorkloadSpec(source="mix", io_jobs=i, origin=origin)
    elif arg.endswith(".toml"):
        spec = load_workload_spec(arg)
    else:
        raise WorkloadError(
            f"{origin}: unknown workload; use lublin, lublin1, swf:PATH, mix:I or a SPEC.toml file"
        )
    overrides: dict[str, Any] = {}
    if seed is not None:
        overrides["seed"] = seed
    if jobs is not None and spec.source != "mix":
        overrides["jobs"] = jobs
    if load is not None:
        if spec.source == "mix":
            raise WorkloadError(f"{origin}: --load does not apply to a mix (all jobs at t = 0)")
        overrides["load"] = load
    if skip_bad_lines is not None and spec.source == "swf":
        overrides["skip_bad_lines"] = skip_bad_lines
    if profile is not None:
        if spec.source == "mix":
            raise WorkloadError(f"{origin}: --profile does not apply to a mix (it has its own)")
        if profile not in PROFILES:
            raise WorkloadError(
                f"{origin}: unknown profile {profile!r}; use one of {', '.join(PROFILES)}"
            )
        overrides["profile"] = profile
    if oversize is not None:
        if oversize not in OVERSIZE:
            raise WorkloadError(f"{origin}: oversize must be one of {', '.join(OVERSIZE)}")
        overrides["oversize"] = oversize
    if overrides:
        spec = dataclasses.replace(spec, **overrides)
    return build_workload_info(spec, nodes)
