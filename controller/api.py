"""Request handlers for docs/controller-api.md (both channels share them).

``handle(ctx, request, caller)`` turns one request object into one reply
object, ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "<one
line>"}``; nothing raised here reaches the socket layer, so a bad request can
never stop the daemon. Operator requests (``set``, ``checkpoint``,
``shutdown``; killing or re-classing someone else's job) need an operator:
root, the user running the controller, or a name given with ``--operator``,
all as uids (controller/rights.py, with the other operator-only rights).
Gorda & Brooks 1991 §3.1 ("gangster", "operator control interface").
"""

from __future__ import annotations

import gc
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.checkpoint import CheckpointError
from controller.jobs import ENDED_STATES, RequestError, SpecError
from controller.operator import ConfigError
from controller.policies.base import PolicyError
from controller.rights import RightsError, check_class, check_submit, uid_of
from controller.scheduler import Scheduler

log = logging.getLogger("controller.api")

OPS = (
    "submit",
    "jobs",
    "job",
    "matrix",
    "slice",
    "kill",
    "class",
    "set",
    "config",
    "status",
    "checkpoint",
    "shutdown",
)
OPERATOR_OPS = frozenset({"set", "checkpoint", "shutdown"})


class ApiError(ValueError):
    """A refused request; str() is the one-line error sent back."""


@dataclass(frozen=True)
class Caller:
    user: str
    channel: str  # "unix" or "tcp"
    uid: int | None = None  # the unix peer's uid (SO_PEERCRED); TCP: from the user's name


class Daemon(Protocol):
    """What the handlers need from the daemon besides the scheduler."""

    def write_checkpoint(self) -> str: ...

    def request_shutdown(self, checkpoint: bool) -> str | None: ...

    def status_extra(self) -> dict[str, Any]: ...


@dataclass
class Context:
    sched: Scheduler
    daemon: Daemon
    operators: frozenset[int] = field(default_factory=frozenset)  # uids (controller/rights.py)
    user_exists: Callable[[str], bool] = lambda name: True
    uid_of: Callable[[str], int | None] = uid_of

    def is_operator(self, caller: Caller) -> bool:
        uid = caller.uid if caller.uid is not None else self.uid_of(caller.user)
        return uid is not None and uid in self.operators


def _one_line(msg: object) -> str:
    return " ".join(str(msg).split()) or "error"


def handle(ctx: Context, request: object, caller: Caller) -> dict[str, Any]:
    try:
        return {"ok": True, "result": _dispatch(ctx, request, caller)}
    except (
        ApiError,
        SpecError,
        RequestError,
        ConfigError,
        PolicyError,
        CheckpointError,
        RightsError,
    ) as e:
        return {"ok": False, "error": _one_line(e)}
    except Exception as e:  # a handler bug must not take the daemon down
        log.exception("request failed")
        return {"ok": False, "error": _one_line(f"internal error: {type(e).__name__}: {e}")}


def _args(request: dict[str, Any]) -> dict[str, Any]:
    args = request.get("args", {})
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ApiError("'args' must be a JSON object")
    return args


def _dispatch(ctx: Context, request: object, caller: Caller) -> Any:
    if not isinstance(request, dict):
        raise ApiError('request must be a JSON object like {"op": "jobs", "args": {}}')
    op = request.get("op")
    if op not in OPS:
        raise ApiError(f"unknown op {op!r}; valid ops: {', '.join(OPS)}")
    args = _args(request)
    user = caller.user
    if not ctx.user_exists(user):
        raise ApiError(f"unknown user {user!r}: not a user on the controller host")
    operator = ctx.is_operator(caller)
    if op in OPERATOR_OPS and not operator:
        raise ApiError(f"{op}: operator only; {user!r} is not an operator")
    s = ctx.sched
    now = s.wall()
    if op == "submit":
        if "spec" not in args:
            raise ApiError('submit: missing args.spec, e.g. {"size": 2, "argv": ["./prog"]}')
        check_submit(args["spec"], user, operator, s.table.jobs, s.cfg)
        return {"job_id": s.submit(args["spec"], user, operator)}
    if op == "jobs":
        return s.table.records(now, bool(args.get("all", False)))
    if op == "job":
        return s.table.record(args.get("job_id"), now)
    if op == "matrix":
        return s.matrix_view()
    if op == "slice":
        return _slice(s, args)
    if op == "kill":
        return {"state": s.kill(args.get("job_id"), user, operator)}
    if op == "class":
        if "class" not in args:
            raise ApiError(
                "class: missing args.class (interactive, production, standby, benchmark)"
            )
        check_class(args["class"], operator)
        return {"class": s.set_class(args.get("job_id"), args["class"], user, operator)}
    if op == "set":
        cfg = s.cfg.update(dict(args))
        s.apply_config()
        log.info("operator %s set %s", user, args)
        return cfg
    if op == "config":
        return s.cfg.to_dict()
    if op == "status":
        t = s.telemetry
        skew = t.skew_percentiles()
        out = {
            "policy": s.policy_name,
            "family": s.family,
            # cdc family: mpl, scheme and its settings, what each agent runs
            **s.fam.describe(),
            "nodes": [n.name for n in s.nodes],
            "agents": s.pool.connected(),
            "nodes_unreachable": s.round.unreachable(),
            "rejoins": list(s.rejoins.reports),
            "quanta": t.counters.quanta,
            "skew_p50_s": skew["p50"],
            "skew_p99_s": skew["p99"],
            "queue_length": s.queue_length(),
            "matching_success_ratio": t.matching_success_ratio(),
            # Wiseman & Feitelson 2003 Fig. 7 bottom: share of quanta each slot was used as a
            # partner
            "slot_partner_ratio": {str(k): v for k, v in t.slot_matched_ratio().items()},
            "cluster_cpu_utilization": t.counters.utilization,
            # the last quantum as the policy saw it: each job's measured utilization and
            # the rows that ran (Wiseman & Feitelson 2003 Figs. 3 and 13 are made of these)
            "last_quantum": _last_quantum(s),
        }
        out.update(ctx.daemon.status_extra())
        if args.get("memory") is True:
            # on request only (a full heap walk): the soak tells a leak from an
            # allocator that keeps its high-water mark by these, not by RSS
            objs = gc.get_objects()
            out["python_objects"] = len(objs)
            # the most numerous types: what grew between two samples names a leak
            types = Counter(type(o).__qualname__ for o in objs)
            del objs
            out["python_object_types"] = dict(types.most_common(40))
            out["jobs_in_system"] = sum(j.state not in ENDED_STATES for j in s.table.jobs.values())
        return out
    if op == "checkpoint":
        return {"path": ctx.daemon.write_checkpoint()}
    # shutdown
    ck = args.get("checkpoint", True)
    if not isinstance(ck, bool):
        raise ApiError("shutdown: args.checkpoint must be true or false")
    return {"path": ctx.daemon.request_shutdown(ck)}


def _slice(s: Scheduler, args: dict[str, Any]) -> Any:
    """Gorda & Brooks 1991 "slice": pack the known jobs space-wise (controller/slice.py)."""
    size = args.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ApiError(f"slice: size must be an int >= 1, got {size!r}")
    from controller.slice import slice_matrix

    # "all the known jobs" (Gorda & Brooks 1991 §3): everything not ended, queued included.
    known = {j.job_id: j.spec.size for j in s.table.jobs.values() if not j.ended}
    try:
        return slice_matrix(len(s.nodes), known, size).to_dict()
    except ValueError as e:
        raise ApiError(f"slice: {e}") from None


def _last_quantum(s: Scheduler) -> dict[str, Any]:
    plan = s.measured_plan
    return {
        "utilization": {str(j): round(u, 4) for j, u in s.last_utilization.items()},
        # each job's demand per device measured (cpu, disk), as the policy was given it
        "devices": {
            str(j): {d: round(v, 4) for d, v in dev.items()} for j, dev in s.last_devices.items()
        },
        "slot": plan.slot if plan else None,
        "partner": plan.partner if plan else None,
        "runnable": sorted({j for cell in plan.node_jobs for j in cell}) if plan else [],
        # a policy that predicts a demand vector per row (nplus1): what its next matching
        # reads, per row, with the row's jobs (the live N + 1 study's "why")
        **_row_demands(s.policy),
    }


def _row_demands(policy: object) -> dict[str, Any]:
    row_demand = getattr(policy, "row_demand", None)
    matrix = getattr(policy, "matrix", None)
    if not callable(row_demand) or matrix is None:
        return {}
    return {
        "row_demand": {
            str(slot): {
                "jobs": list(matrix.jobs_in(slot)),
                "demand": [round(float(v), 4) for v in row_demand(slot)],
            }
            for slot in range(matrix.slot_count)
        }
    }
