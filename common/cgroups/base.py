"""Weights, capabilities and path checks shared by every cgroup version."""

from __future__ import annotations

from dataclasses import dataclass

from common.cgroups.errors import CgroupError

DEFAULT_WEIGHT = 100
MIN_WEIGHT = 1
MAX_WEIGHT = 10000
# v1 cpu.shares bounds enforced by the kernel (MIN_SHARES/MAX_SHARES in sched.h).
MIN_SHARES = 2
MAX_SHARES = 262144
# systemd's linear mapping: weight 100 (the v2 default) == 1024 shares (the v1 default).
SHARES_PER_WEIGHT = 1024 / 100


def clamp_weight(weight: int) -> int:
    return max(MIN_WEIGHT, min(MAX_WEIGHT, int(weight)))


def weight_to_shares(weight: int) -> int:
    """v2 weight (1..10000) -> v1 cpu.shares; 100 -> 1024, linear, never below 2."""
    shares = round(clamp_weight(weight) * SHARES_PER_WEIGHT)
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def shares_to_weight(shares: int) -> int:
    """v1 cpu.shares -> v2 weight; 1024 -> 100, linear, clamped to 1..10000."""
    return clamp_weight(round(int(shares) / SHARES_PER_WEIGHT))


@dataclass(frozen=True)
class Capabilities:
    """What the layer can really enforce on this host."""

    weights_enforced: bool
    native_kill: bool


def parse_pids(text: str) -> list[int]:
    return [int(tok) for tok in text.split()]


def check_rel(path: str) -> str:
    """Refuse absolute paths and '..' so a job id can never escape the parent."""
    rel = path.strip("/")
    if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise CgroupError(f"bad cgroup path {path!r}")
    return rel
