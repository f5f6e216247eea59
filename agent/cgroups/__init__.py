"""cgroup backends behind one interface (see base.CgroupDriver)."""

from agent.cgroups.base import (
    DEFAULT_WEIGHT,
    Capabilities,
    CgroupDriver,
    CgroupError,
    FreezeError,
    ThawError,
    shares_to_weight,
    weight_to_shares,
)
from agent.cgroups.detect import detect, make_driver
from agent.cgroups.v1 import V1Driver
from agent.cgroups.v2 import V2Driver

__all__ = [
    "DEFAULT_WEIGHT",
    "Capabilities",
    "CgroupDriver",
    "CgroupError",
    "FreezeError",
    "ThawError",
    "V1Driver",
    "V2Driver",
    "detect",
    "make_driver",
    "shares_to_weight",
    "weight_to_shares",
]
