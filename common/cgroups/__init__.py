"""The one cgroup layer of cosched: v1, hybrid and v2-only hosts behind one interface.

* ``layout``: which hierarchy serves each resource on this host (detected per controller)
* ``fs``: the single module through which every cgroup file is read or written
* ``v1`` / ``v2``: the files of each version (as runc's fs / fs2)
* ``driver``: :class:`Cgroups`, what the agent, the cluster and ``clean`` call
* ``delegation``: the root, or a systemd-delegated subtree
* ``fake``: the one fake, for unit tests

:func:`open_cgroups` detects everything and returns a ready driver.
"""

from __future__ import annotations

import os

from common.cgroups.base import (
    DEFAULT_WEIGHT,
    Capabilities,
    check_rel,
    shares_to_weight,
    weight_to_shares,
)
from common.cgroups.delegation import base_join, env_base, prepare_base, resolve_base
from common.cgroups.driver import Cgroups
from common.cgroups.errors import CgroupError, CgroupSetupError, FreezeError, ThawError
from common.cgroups.fs import CgroupFS
from common.cgroups.layout import Hierarchy, Layout, detect_layout, parse_layout

CGROUP_VERSIONS = ("auto", "v1", "v2")


def open_cgroups(
    prefer: str = "auto",
    *,
    root: str | None = None,
    base: str | None = None,
    fs: CgroupFS | None = None,
    freeze_timeout: float = 1.0,
    poll_interval: float = 50e-6,
) -> Cgroups:
    """Detect the host's layout (or use ``root``) and the base; return the driver.

    ``root`` overrides detection: a v1 hierarchy directory (``<root>/freezer``
    ...) with ``prefer="v1"``, else a cgroup2 mount.
    """
    fs = fs or CgroupFS()
    if root is not None:
        if prefer == "v1" or (prefer == "auto" and os.path.isdir(os.path.join(root, "freezer"))):
            layout = Layout.v1_at(root)
        else:
            layout = _v2_layout(root, fs)
    else:
        layout = detect_layout(prefer, fs=fs)
    layout = resolve_base(layout, fs, override=base if base is not None else env_base())
    return Cgroups(layout, fs=fs, freeze_timeout=freeze_timeout, poll_interval=poll_interval)


def V1Driver(root: str | os.PathLike[str] = "/sys/fs/cgroup", **kw: object) -> Cgroups:
    """A driver on v1 hierarchies at ``<root>/<controller>``."""
    return Cgroups(Layout.v1_at(str(root)), **kw)  # type: ignore[arg-type]


def V2Driver(root: str | os.PathLike[str] = "/sys/fs/cgroup", **kw: object) -> Cgroups:
    """A driver on the cgroup2 tree at ``root``, with the controllers its root offers."""
    fs = kw.get("fs") or CgroupFS()
    assert isinstance(fs, CgroupFS)
    return Cgroups(_v2_layout(str(root), fs), **kw)  # type: ignore[arg-type]


def _v2_layout(root: str, fs: CgroupFS) -> Layout:
    """The cgroup2 tree at ``root`` with the controllers its root offers."""
    try:
        offered = frozenset(fs.read(os.path.join(root, "cgroup.controllers")).split())
    except OSError:
        offered = frozenset()
    return Layout.v2_at(root, offered)


__all__ = [
    "CGROUP_VERSIONS",
    "DEFAULT_WEIGHT",
    "Capabilities",
    "CgroupError",
    "CgroupFS",
    "CgroupSetupError",
    "Cgroups",
    "FreezeError",
    "Hierarchy",
    "Layout",
    "ThawError",
    "V1Driver",
    "V2Driver",
    "base_join",
    "check_rel",
    "detect_layout",
    "open_cgroups",
    "parse_layout",
    "prepare_base",
    "resolve_base",
    "shares_to_weight",
    "weight_to_shares",
]
