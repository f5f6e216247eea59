"""Transitional: the agent's cgroup names, now served by the one layer in common/cgroups."""

from common.cgroups import (
    DEFAULT_WEIGHT,
    Capabilities,
    CgroupError,
    Cgroups,
    FreezeError,
    ThawError,
    V1Driver,
    V2Driver,
    open_cgroups,
    shares_to_weight,
    weight_to_shares,
)

CgroupDriver = Cgroups


def make_driver(backend: str | None = None, root: str | None = None, **kw: float) -> Cgroups:
    return open_cgroups(backend or "auto", root=root, **kw)  # type: ignore[arg-type]


__all__ = [
    "DEFAULT_WEIGHT",
    "Capabilities",
    "CgroupDriver",
    "CgroupError",
    "Cgroups",
    "FreezeError",
    "ThawError",
    "V1Driver",
    "V2Driver",
    "make_driver",
    "open_cgroups",
    "shares_to_weight",
    "weight_to_shares",
]
