"""The one module through which cosched reads and writes cgroup files.

Every cgroup access of the agent, the cluster, ``cosched clean`` and the tests
goes through a :class:`CgroupFS` (as runc's ``cgroups.WriteFile``): unit tests
swap in :class:`common.cgroups.fake.FakeCgroupFS`, which plays the kernel's part.
Paths are absolute strings (or Paths) into a mounted hierarchy.
"""

from __future__ import annotations

import os
from pathlib import Path


class OpenedWrite:
    """A cgroup file opened now and written later with one ``write()``.

    For a write that must land at a deadline (a time-triggered thaw,
    agent/plan.py): opening a cgroup file costs as much as writing it
    (measured ~30 us each for v1 ``freezer.state``), so the open is done ahead.
    """

    def __init__(self, path: Path | str, value: str) -> None:
        self.path = str(path)
        self._data = value.encode("ascii")
        self._fd = os.open(path, os.O_WRONLY)

    def write(self) -> None:
        os.write(self._fd, self._data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CgroupFS:
    """Plain file I/O on a cgroup filesystem (the real kernel does the rest)."""

    def read(self, path: Path | str) -> str:
        # Raw os calls: this sits in the freeze-confirmation poll loop, where
        # a buffered text open() costs several times more CPU.
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = []
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("ascii")

    def write(self, path: Path | str, value: str) -> None:
        # One write() per value: cgroup files act on each write call.
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)

    def open_write(self, path: Path | str, value: str) -> OpenedWrite:
        """Open ``path`` now to write ``value`` later (:class:`OpenedWrite`)."""
        return OpenedWrite(path, value)

    def mkdir(self, path: Path | str) -> None:
        os.mkdir(path)

    def rmdir(self, path: Path | str) -> None:
        os.rmdir(path)

    def exists(self, path: Path | str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: Path | str) -> list[str]:
        """Names of the child cgroups (directories) of ``path``."""
        return [e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]

    def getxattr(self, path: Path | str, name: str) -> bytes | None:
        try:
            return os.getxattr(path, name)
        except OSError:
            return None

    def is_real(self) -> bool:
        """True on the kernel's files (poll() notifications work there)."""
        return True
