"""Ended jobs moved out of the controller's memory (issue 13: the soak's job table).

The controller kept every job it ever ran, about 9 KB each (measured in the soak),
so a daemon that runs for months grows without bound. Beyond the ``--keep-ended``
most recent ended jobs, a job's final record (the API's ``job`` record with its
ranks) is appended to a JSON-lines archive and dropped from memory; ``jobs --all``
and ``job`` still find it there, and the exporter's per-state counts include it.

The file holds every user's commands: it is created 0600, never through a link,
and refused when it is another user's or readable by others (common/private.py
checks the same for logs and checkpoints).
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from common.errors import CoschedError

log = logging.getLogger(__name__)


class ArchiveError(CoschedError):
    """An archive file the controller must not use (a link, another user's, readable)."""


class JobArchive:
    """Append-only JSON lines of ended job records, with per-(state, class) counts."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.counts: Counter[tuple[str, str]] = Counter()
        self.archived = 0
        self._check()

    def _check(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise ArchiveError(
                f"job archive {self.path} is not a regular file (a link?)",
                fix="remove it, or give the controller another --checkpoint or --run-dir",
            )
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ArchiveError(
                f"job archive {self.path} is another user's or open to others "
                f"(mode {stat.S_IMODE(st.st_mode):04o})",
                fix=f"chmod 600 {self.path} (owned by the controller's user), or remove it",
            )

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        """Write ``records`` (one line each); returns how many."""
        lines = [json.dumps(r, separators=(",", ":"), sort_keys=True) + "\n" for r in records]
        if not lines:
            return 0
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o600)
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                raise ArchiveError(
                    f"job archive {self.path} is another user's or open to others",
                    fix=f"chmod 600 {self.path}, or remove it",
                )
            os.write(fd, "".join(lines).encode())
        finally:
            os.close(fd)
        self.archived += len(lines)
        return len(lines)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every archived record, oldest first (a torn last line is skipped)."""
        try:
            f = open(self.path, encoding="utf-8")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return
        with f:
            for n, line in enumerate(f, 1):
                try:
                    rec = json.loads(line)
                except ValueError:
                    log.warning("%s:%d: not a job record; skipped", self.path, n)
                    continue
                if isinstance(rec, dict):
                    yield rec

    def find(self, job_id: int) -> dict[str, Any] | None:
        found = None
        for rec in self.records():
            if rec.get("job_id") == job_id:
                found = rec  # the last one wins (a job archived twice after a restore)
        return found
