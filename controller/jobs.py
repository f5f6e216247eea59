"""Jobs as the controller sees them: the user's spec, the lifecycle, the times.

A job is submitted with a :class:`JobSpec` (validated here, one clear error per
mistake), waits (``queued``), runs time-shared (``running`` in a quantum where
it is runnable, ``frozen`` otherwise) and ends ``done`` (every rank exited 0),
``failed`` (a rank exited non-zero or could not start) or ``killed``.

Slowdown in Wiseman & Feitelson 2003 §4.2 is response time over execution time, so every job
keeps both its wall times (submit/start/end) and the CPU time its ranks used
(summed over ranks from the agents' quantum acks). Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

QUEUED = "queued"
RUNNING = "running"
FROZEN = "frozen"
DONE = "done"
FAILED = "failed"
KILLED = "killed"
STATES = (QUEUED, RUNNING, FROZEN, DONE, FAILED, KILLED)
ACTIVE_STATES = frozenset({RUNNING, FROZEN})
ENDED_STATES = frozenset({DONE, FAILED, KILLED})

INTERACTIVE = "interactive"
PRODUCTION = "production"
STANDBY = "standby"
BENCHMARK = "benchmark"
CLASSES = (INTERACTIVE, PRODUCTION, STANDBY, BENCHMARK)

_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SPEC_FIELDS = frozenset(
    {"name", "size", "argv", "class", "env", "cwd", "estimate", "exclusive", "run_as"}
)
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")


class SpecError(ValueError):
    """A submission the controller refuses; the message says what and how to fix it."""


class RequestError(ValueError):
    """A request the scheduler refuses (bad job id, permission, limit)."""


@dataclass(frozen=True)
class JobSpec:
    """What the user asked for (docs/controller-api.md, ``submit``)."""

    size: int
    argv: tuple[str, ...]
    name: str = ""
    job_class: str = PRODUCTION
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    estimate: float = 3600.0
    exclusive: bool = False
    # the user the ranks run as when not the submitter: operators only (docs/security.md)
    run_as: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"run_as": self.run_as} if self.run_as else {}),
            "name": self.name,
            "size": self.size,
            "argv": list(self.argv),
            "class": self.job_class,
            "env": dict(self.env),
            "cwd": self.cwd,
            "estimate": self.estimate,
            "exclusive": self.exclusive,
        }


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _name(key: object) -> str:
    """A field name fit for a one-line message (a fuzzed key held a newline)."""
    text = str(key)
    return text if text.isidentifier() else repr(text)


def parse_spec(raw: object, nodes: int) -> JobSpec:
    """Validate a submission against the API contract and the cluster size.

    Raises :class:`SpecError` naming the field, what is wrong and the fix.
    """
    if not isinstance(raw, dict):
        raise SpecError("spec must be a JSON object with at least 'size' and 'argv'")
    unknown = sorted(set(raw) - SPEC_FIELDS)
    if unknown:
        raise SpecError(
            f"spec: unknown field(s) {', '.join(_name(k) for k in unknown)}; "
            f"valid: {', '.join(sorted(SPEC_FIELDS))}"
        )
    if "size" not in raw:
        raise SpecError("spec: missing field 'size' (number of nodes, an int >= 1)")
    size = raw["size"]
    if not _is_int(size) or size < 1:
        raise SpecError(f"spec.size: want an int >= 1, got {size!r}")
    if size > nodes:
        raise SpecError(
            f"spec.size: {size} exceeds the cluster's {nodes} node(s); ask for at most {nodes}"
        )
    if "argv" not in raw:
        raise SpecError("spec: missing field 'argv' (command as a list of strings)")
    argv = raw["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise SpecError('spec.argv: want a non-empty list of strings, e.g. ["./prog", "-n"]')
    name = raw.get("name", "")
    if name is None:
        name = ""
    if not isinstance(name, str) or (name and not _NAME_RE.match(name)):
        raise SpecError(f"spec.name: want 1-64 chars of [A-Za-z0-9_.+-], got {name!r}")
    job_class = raw.get("class", PRODUCTION)
    if job_class is None:
        job_class = PRODUCTION
    if job_class not in CLASSES:
        raise SpecError(f"spec.class: unknown class {job_class!r}; valid: {', '.join(CLASSES)}")
    env = raw.get("env", {}) or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and _ENV_KEY_RE.match(k) and isinstance(v, str) for k, v in env.items()
    ):
        raise SpecError('spec.env: want an object of NAME: "string value" pairs')
    if any(k.startswith("COSCHED_") for k in env):
        raise SpecError("spec.env: COSCHED_* variables are set by the controller; remove them")
    loader = sorted(k for k in env if k.startswith("LD_"))
    if loader:
        raise SpecError(
            f"spec.env: {', '.join(loader)}: the dynamic loader's variables are not passed to"
            " jobs (docs/security.md); set them inside the job's command instead"
        )
    cwd = raw.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/")):
        raise SpecError(f"spec.cwd: want an absolute path, got {cwd!r}")
    estimate = raw.get("estimate", 3600.0)
    if estimate is None:
        estimate = 3600.0
    if (
        isinstance(estimate, bool)
        or not isinstance(estimate, int | float)
        or not estimate > 0
        or estimate != estimate
    ):
        raise SpecError(f"spec.estimate: want run-time seconds > 0, got {estimate!r}")
    exclusive = raw.get("exclusive", False)
    if exclusive is None:
        exclusive = False
    if not isinstance(exclusive, bool):
        raise SpecError(f"spec.exclusive: want true or false, got {exclusive!r}")
    run_as = raw.get("run_as")
    if run_as is not None and (not isinstance(run_as, str) or not _USER_RE.match(run_as)):
        raise SpecError(f"spec.run_as: want a user name, got {run_as!r}")
    return JobSpec(
        size=size,
        argv=tuple(argv),
        name=name,
        job_class=job_class,
        env=dict(env),
        cwd=cwd,
        estimate=float(estimate),
        exclusive=exclusive,
        run_as=run_as,
    )


@dataclass
class Rank:
    """One process of a job on one node (ranks are numbered in placement order)."""

    node: str
    pid: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    ended: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pid": self.pid,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "ended": self.ended,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rank:
        return cls(
            node=str(d["node"]),
            pid=d.get("pid"),
            stdout=d.get("stdout"),
            stderr=d.get("stderr"),
            exit_code=d.get("exit_code"),
            ended=bool(d.get("ended", False)),
        )


@dataclass
class Job:
    """A job's record: spec, owner, state, placement and accounting."""

    job_id: int
    spec: JobSpec
    user: str
    submit_time: float
    job_class: str = PRODUCTION
    state: str = QUEUED
    nodes: list[str] = field(default_factory=list)
    ranks: list[Rank] = field(default_factory=list)
    start_time: float | None = None
    end_time: float | None = None
    cpu_ns: int = 0
    exit_code: int | None = None
    reason: str = ""
    # Seconds of run time (wall clock while placed) as interactive; demotion
    # after operator interactive_limit (Gorda & Brooks 1991, "promoted into the p class").
    interactive_run_s: float = 0.0
    promotions: int = 0

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def start(self, now: float, nodes: list[str]) -> None:
        if self.state != QUEUED:
            raise ValueError(f"job {self.job_id}: start from state {self.state}")
        self.state = FROZEN
        self.start_time = now
        self.nodes = list(nodes)
        self.ranks = [Rank(node=n) for n in nodes]

    def set_runnable(self, runnable: bool) -> None:
        """Per-quantum state: running while thawed, frozen while descheduled."""
        if self.active:
            self.state = RUNNING if runnable else FROZEN

    def end(self, state: str, now: float, reason: str = "", exit_code: int | None = None) -> None:
        if state not in ENDED_STATES:
            raise ValueError(f"{state} is not an end state")
        if self.ended:
            return
        self.state = state
        self.end_time = now
        self.reason = reason
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def run_user(self) -> str:
        """Whom the ranks run as: the submitter, or the operator's ``run_as``."""
        return self.spec.run_as or self.user

    def wall_s(self, now: float) -> float:
        """Response time so far (submit to end, or to now): Wiseman & Feitelson 2003 §4.2."""
        end = self.end_time if self.end_time is not None else now
        return max(0.0, end - self.submit_time)

    @property
    def cpu_s(self) -> float:
        """Execution time: CPU seconds summed over ranks (Wiseman & Feitelson 2003 §4.2
        slowdown)."""
        return self.cpu_ns / 1e9

    def record(self, now: float, *, with_ranks: bool = False) -> dict[str, Any]:
        """The API's job record (docs/controller-api.md)."""
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "name": self.spec.name,
            "user": self.user,
            "run_as": self.run_user,
            "class": self.job_class,
            "size": self.spec.size,
            "state": self.state,
            "nodes": list(self.nodes),
            "submit_time": self.submit_time,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "wall_s": round(self.wall_s(now), 6),
            "cpu_s": round(self.cpu_s, 6),
            "exit_code": self.exit_code,
            "reason": self.reason,
        }
        if with_ranks:
            out["ranks"] = [r.to_dict() for r in self.ranks]
            out["argv"] = list(self.spec.argv)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Everything needed to restore the job (controller/checkpoint.py)."""
        return {
            "job_id": self.job_id,
            "spec": self.spec.to_dict(),
            "user": self.user,
            "submit_time": self.submit_time,
            "class": self.job_class,
            "state": self.state,
            "nodes": list(self.nodes),
            "ranks": [r.to_dict() for r in self.ranks],
            "start_time": self.start_time,
            "end_time": self.end_time,
            "cpu_ns": self.cpu_ns,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "interactive_run_s": self.interactive_run_s,
            "promotions": self.promotions,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        s = d["spec"]
        spec = JobSpec(
            size=int(s["size"]),
            argv=tuple(s["argv"]),
            name=str(s.get("name", "")),
            job_class=str(s.get("class", PRODUCTION)),
            env=dict(s.get("env", {})),
            cwd=s.get("cwd"),
            estimate=float(s.get("estimate", 3600.0)),
            exclusive=bool(s.get("exclusive", False)),
            run_as=s.get("run_as") or None,
        )
        state = str(d["state"])
        if state not in STATES:
            raise ValueError(f"job {d.get('job_id')}: unknown state {state!r}")
        job_class = str(d.get("class", spec.job_class))
        if job_class not in CLASSES:
            raise ValueError(f"job {d.get('job_id')}: unknown class {job_class!r}")
        return cls(
            job_id=int(d["job_id"]),
            spec=spec,
            user=str(d["user"]),
            submit_time=float(d["submit_time"]),
            job_class=job_class,
            state=state,
            nodes=[str(n) for n in d.get("nodes", [])],
            ranks=[Rank.from_dict(r) for r in d.get("ranks", [])],
            start_time=d.get("start_time"),
            end_time=d.get("end_time"),
            cpu_ns=int(d.get("cpu_ns", 0)),
            exit_code=d.get("exit_code"),
            reason=str(d.get("reason", "")),
            interactive_run_s=float(d.get("interactive_run_s", 0.0)),
            promotions=int(d.get("promotions", 0)),
        )
