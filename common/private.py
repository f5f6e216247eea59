"""Files only their owner may read: the daemons' logs, which carry every user's job
commands (docs/security.md), and the SSH set-up of `cluster up --ssh`. Opened without
following a link, created 0600."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import BinaryIO


def append_private(path: str | os.PathLike[str]) -> BinaryIO:
    """``open(path, "ab")``, but created 0600, never through a link, made 0600 if wider."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(fd, 0o600)  # a log from before logs were private
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def write_private(path: str | os.PathLike[str], text: str, mode: int = 0o600) -> None:
    """Write ``text`` to a fresh file at ``path``, created ``mode`` (0600) from the start.

    Whatever was at ``path`` (an old file, a planted symlink) is removed first and
    never written through: O_EXCL | O_NOFOLLOW on the new one.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
