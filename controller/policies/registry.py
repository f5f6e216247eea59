"""Names of the scheduling policies, for the CLI and experiment specs.

A new policy is a new module in this package plus one line in ``_ENTRIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from controller.policies.base import BatchPolicy, GangPolicy, PolicyError
from controller.policies.batch import EASY, FCFS
from controller.policies.conservative import Conservative
from controller.policies.dhcpolicy import DhcPolicy
from controller.policies.gang import GangBackfill, GangGreedy, StrictGang
from controller.policies.lookahead import Lookahead
from controller.policies.nplus1gang import NPlus1Gang
from controller.policies.paired import PairedGang
from controller.policies.params import ParamSpec
from controller.policies.spaceshare import SpaceShare

Policy = BatchPolicy | GangPolicy


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    name: str
    family: str  # "batch", "gang" or "cdc"
    summary: str
    factory: Callable[..., Policy]
    params: tuple[ParamSpec, ...]


def _entry(name: str, family: str, summary: str, cls: type[Policy]) -> PolicyEntry:
    params: tuple[ParamSpec, ...] = getattr(cls, "PARAMS", ())
    return PolicyEntry(name, family, summary, cls, params)


def _scheme(name: str, summary: str) -> PolicyEntry:
    """Space sharing with an MPL cap, the agents running scheme ``name`` (Yu & Byun 2011)."""
    params = SpaceShare.PARAMS
    if name == "batch":
        params = tuple(
            ParamSpec(p.name, p.kind, 1, "always 1: one job per node (Yu & Byun 2011 §2.1)")
            if p.name == "mpl"
            else p
            for p in params
        )
        return PolicyEntry(name, "cdc", summary, partial(SpaceShare, mpl=1, scheme=name), params)
    return PolicyEntry(name, "cdc", summary, partial(SpaceShare, scheme=name), params)


_ENTRIES: tuple[PolicyEntry, ...] = (
    _entry("fcfs", "batch", "first come, first served; the head blocks the queue", FCFS),
    _entry(
        "easy", "batch", "EASY (aggressive) backfilling: only the head holds a reservation", EASY
    ),
    _entry(
        "conservative",
        "batch",
        "conservative backfilling: every queued job holds a reservation",
        Conservative,
    ),
    _entry(
        "lookahead",
        "batch",
        "lookahead backfilling by dynamic programming (Shmueli & Feitelson; Rajaei et al. 2008 "
        "§3.1)",
        Lookahead,
    ),
    _entry("gang", "gang", "strict gang scheduling: one matrix row per quantum", StrictGang),
    _entry(
        "gang-greedy",
        "gang",
        "gang with greedy admission over a bounded number of slots (Rajaei et al. 2008 §3.2.1)",
        GangGreedy,
    ),
    _entry(
        "gang-backfill",
        "gang",
        "gang with lookahead-backfilling admission (Rajaei et al. 2008 §3.2.2)",
        GangBackfill,
    ),
    _entry(
        "paired-gang",
        "gang",
        "paired gang: two complementary rows per quantum (Wiseman & Feitelson 2003 §2)",
        PairedGang,
    ),
    _entry(
        "nplus1",
        "gang",
        "N + 1 gangs: up to N partner rows whose dominant devices differ (Wiseman & "
        "Feitelson 2003 §5)",
        NPlus1Gang,
    ),
    _entry(
        "dhc",
        "gang",
        "distributed hierarchical control: a buddy tree of controllers (Feitelson & Rudolph 1996)",
        DhcPolicy,
    ),
    _scheme("batch", "BATCH: FIFO space sharing, one job per node (Yu & Byun 2011 §2.1)"),
    _scheme("local", "space sharing up to the MPL; each node's own scheduler, no coscheduling"),
    _scheme("dcs", "dynamic coscheduling: boost on a message for a process not running"),
    _scheme("pb", "periodic boost: every tick, one process with pending messages, round robin"),
    _scheme("ib", "immediate block on receive; boost a blocked receiver on arrival"),
    _scheme("sb", "spin-block on receive (spin_us); boost a blocked receiver on arrival"),
    _scheme("hybrid", "immediate block; boost during collectives, restore after (HYBRID)"),
    _scheme("cc-s", "contention-aware coscheduling, spinning (Yu & Byun 2011 §4, CC-S)"),
    _scheme("cc-b", "contention-aware coscheduling, blocking (Yu & Byun 2011 §4, CC-B)"),
)

REGISTRY: Mapping[str, PolicyEntry] = {e.name: e for e in _ENTRIES}


def names() -> list[str]:
    return [e.name for e in _ENTRIES]


def lookup(name: str) -> PolicyEntry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise PolicyError(
            f"unknown policy {name!r}; valid policies: {', '.join(names())}"
        ) from None


def parse_params(entry: PolicyEntry, raw: Mapping[str, str]) -> dict[str, object]:
    """Typed keyword arguments from ``key=value`` strings; unknown keys are an error."""
    known = {p.name: p for p in entry.params}
    out: dict[str, object] = {}
    for key, text in raw.items():
        spec = known.get(key)
        if spec is None:
            valid = ", ".join(known) or "(none)"
            raise PolicyError(
                f"policy {entry.name!r} has no parameter {key!r}; valid parameters: {valid}"
            )
        try:
            out[key] = spec.parse(text)
        except ValueError as exc:
            raise PolicyError(f"policy {entry.name!r}: {exc}") from None
    return out


def make_policy(name: str, nodes: int, params: Mapping[str, object] | None = None) -> Policy:
    """Build a policy by registry name with already-typed parameters."""
    entry = lookup(name)
    known = {p.name for p in entry.params}
    kwargs = dict(params or {})
    for key in kwargs:
        if key not in known:
            valid = ", ".join(sorted(known)) or "(none)"
            raise PolicyError(
                f"policy {entry.name!r} has no parameter {key!r}; valid parameters: {valid}"
            )
    return entry.factory(nodes, **kwargs)
