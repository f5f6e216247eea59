"""cgroup errors. All are CoschedErrors: one line, what and how to fix."""

from __future__ import annotations

from common.errors import CoschedError


class CgroupError(CoschedError):
    """A cgroup operation failed."""


class CgroupSetupError(CgroupError):
    """The host's cgroups cannot give cosched what it needs; nothing was created."""


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
