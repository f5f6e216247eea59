"""cgroup errors. All are CoschedErrors: one line, what and how to fix."""

from __future__ import annotations

from common.errors import CoschedError


class CgroupError(CoschedError):
    """A cgroup operation failed."""


class CgroupSetupError(CgroupError):
    """The host's cgroups cannot give cosched what it needs; nothing was created."""


class HierarchyHeld(CgroupSetupError):
    """A v1 hierarchy stays busy and nothing this host can see holds it (a process whose
    descriptors it may not read: a sandbox's PID 1). Exit status 3, so a script can tell
    "this host cannot be switched" from a failure."""

    exit_code = 3


class FreezeError(CgroupError):
    """A freeze was not confirmed in time; the group was thawed back.

    ``done`` holds the latencies of the groups that did freeze, ``failed`` the rest.
    """

    def __init__(
        self, msg: str, done: dict[str, float] | None = None, failed: list[str] | None = None
    ) -> None:
        super().__init__(msg)
        self.done = done or {}
        self.failed = failed or []


class ThawError(CgroupError):
    """A thaw was not confirmed in time."""
