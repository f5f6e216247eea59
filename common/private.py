"""Files only their owner may read: the daemons' logs, which carry every user's job
commands (docs/security.md). Opened without following a link, created 0600."""

from __future__ import annotations

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
