"""Run-time operator controls (Gorda & Brooks 1991, "operator control interface").

Gorda & Brooks 1991 lets the operator change the daemon's parameters while it runs: how
long a job may stay interactive before it is demoted, how many jobs one user
may have, the time-slice length. Here: ``quantum`` (s, >= 10 ms), ``max_slots``
(rows of the matrix, None = unlimited), ``interactive_limit`` (s of run time),
``user_limit`` (unfinished jobs per user, None = unlimited) and
``queue_limit`` (queued jobs per user who is not an operator, 100 unless set;
None = unlimited: controller/rights.py), ``disk_bps`` and ``net_bps`` (bytes per second a
node's disk and link move: the capacities a job's disk and network demands are fractions
of, for N + 1 gangs, issue 31). Pure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

MIN_QUANTUM = 0.01
SETTABLE = (
    "quantum",
    "max_slots",
    "interactive_limit",
    "user_limit",
    "queue_limit",
    "disk_bps",
    "net_bps",
)
DEFAULT_QUEUE_LIMIT = 100
# A node's disk capacity unless the operator sets one: about what the local cluster's
# shared virtual disk moved with O_DIRECT, 8 MiB in 84-100 ms (docs/results/blkio-accounting)
DEFAULT_DISK_BPS = 100e6
# ... and its link's: GigE, the local cluster's default link profile (testbed/cluster)
DEFAULT_NET_BPS = 125e6


class ConfigError(ValueError):
    """An operator setting out of range; the message names the key and the range."""


@dataclass
class OperatorConfig:
    quantum: float = 0.1
    max_slots: int | None = None
    interactive_limit: float = 60.0
    user_limit: int | None = None
    queue_limit: int | None = DEFAULT_QUEUE_LIMIT
    disk_bps: float = DEFAULT_DISK_BPS
    net_bps: float = DEFAULT_NET_BPS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OperatorConfig:
        cfg = cls()
        cfg.update({k: v for k, v in d.items() if k in SETTABLE})
        return cfg

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Validate every change first, then apply them all (all or nothing)."""
        if not changes:
            raise ConfigError(f"set: give at least one of {', '.join(SETTABLE)}")
        new = dict(self.to_dict())
        for key, value in changes.items():
            if key not in SETTABLE:
                raise ConfigError(f"set: unknown setting {key!r}; valid: {', '.join(SETTABLE)}")
            new[key] = _check(key, value)
        for key, value in new.items():
            setattr(self, key, value)
        return self.to_dict()


def _check(key: str, value: Any) -> Any:
    num = isinstance(value, int | float) and not isinstance(value, bool)
    if key == "quantum":
        if not num or not math.isfinite(value) or value < MIN_QUANTUM:
            raise ConfigError(f"set quantum: want seconds >= {MIN_QUANTUM}, got {value!r}")
        return float(value)
    if key in ("disk_bps", "net_bps"):
        if not num or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"set {key}: want bytes per second > 0, got {value!r}")
        return float(value)
    if key == "interactive_limit":
        if not num or not math.isfinite(value) or value < 0:
            raise ConfigError(f"set interactive_limit: want seconds >= 0, got {value!r}")
        return float(value)
    # max_slots, user_limit, queue_limit: positive int or null (unlimited)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"set {key}: want an int >= 1 or null (unlimited), got {value!r}")
    return value
