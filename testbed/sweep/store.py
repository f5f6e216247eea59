"""The result store: one SQLite file keeping every run's outcome as it ends (docs/sweeps.md).

A row per run, keyed by study, the study's result-format version and the run's
key (a hash of study, parameters and seed: :attr:`RunSpec.key`); it holds the
parameters and seed in clear, the result as JSON or the error, the run's
seconds, the fingerprint of the code that made it, the host and the time.
Only the process coordinating a sweep writes (workers return results to it),
so a sweep on a Dask cluster needs no shared file system; each row is committed
on its own, so a sweep killed at any instant loses at most the runs in flight.

A store refuses a study whose stored results are in another result-format
version (:class:`StoreError`, one line) and changes nothing in that case.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.sweep.errors import StoreError

SCHEMA = 1  # the layout of the tables below; a store from a later layout is refused

TABLES = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (study TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    study TEXT NOT NULL,
    version INTEGER NOT NULL,
    key TEXT NOT NULL,
    params TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    result TEXT,
    error TEXT,
    detail TEXT,
    seconds REAL,
    code TEXT,
    host TEXT,
    finished REAL NOT NULL,
    PRIMARY KEY (study, version, key)
);
"""


@dataclass(frozen=True)
class Stored:
    """One stored outcome: ``result`` (decoded JSON) when ``ok``, else ``error``."""

    key: str
    ok: bool
    result: Any
    error: str
    detail: str
    seconds: float
    code: str


class ResultStore:
    """An open store (use as a context manager; see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            # WAL: a commit per run costs no fsync, and a reader never waits for the sweep;
            # a killed process loses nothing committed (only a power cut can lose the last rows)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(TABLES)
            row = self.db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            elif int(row[0]) != SCHEMA:
                raise StoreError(
                    f"result store {self.path} has layout {row[0]}, this cosched reads {SCHEMA}",
                    fix="use the cosched that wrote it, or give another --store (it is kept)",
                )
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"result store {self.path} cannot be used: {e}",
                fix="give another --store, or move that file away (it is not changed)",
            ) from None
        except OSError as e:
            raise StoreError(
                f"result store {self.path}: {e.strerror}", fix="give a writable --store"
            ) from None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def claim(self, versions: Mapping[str, int]) -> None:
        """Check every study's result-format version against the store; record new studies.

        Raises :class:`StoreError` (and writes nothing) if any study's stored
        results are in another version.
        """
        have = dict(self.db.execute("SELECT study, version FROM studies").fetchall())
        for study, version in sorted(versions.items()):
            old = have.get(study)
            if old is not None and old != version:
                raise StoreError(
                    f"result store {self.path} holds {study!r} results in format "
                    f"version {old}; this code writes version {version}",
                    fix=(
                        "give another --store (or --out) for the new results, or move "
                        "that file away; nothing in it was changed"
                    ),
                )
        with self.db:
            for study, version in versions.items():
                if study not in have:
                    self.db.execute("INSERT INTO studies VALUES (?, ?)", (study, version))

    def get(self, study: str, version: int, keys: Iterable[str]) -> dict[str, Stored]:
        """The stored outcomes among ``keys`` (missing keys are absent)."""
        out: dict[str, Stored] = {}
        wanted = list(keys)
        for i in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                "SELECT key, status, result, error, detail, seconds, code FROM runs "
                f"WHERE study = ? AND version = ? AND key IN ({marks})",
                (study, version, *chunk),
            ).fetchall()
            for key, status, result, error, detail, seconds, code in rows:
                ok = status == "ok"
                out[key] = Stored(
                    key,
                    ok,
                    json.loads(result) if ok else None,
                    error or "",
                    detail or "",
                    seconds or 0.0,
                    code or "",
                )
        return out

    def put(
        self,
        study: str,
        version: int,
        key: str,
        params: str,
        seed: int,
        *,
        result: str | None = None,
        error: str = "",
        detail: str = "",
        seconds: float = 0.0,
        code: str = "",
        host: str = "",
    ) -> None:
        """Record one outcome (``result`` is JSON text, or None for a failure), committed now."""
        status = "ok" if result is not None else "failed"
        self.db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                study,
                version,
                key,
                params,
                seed,
                status,
                result,
                error or None,
                detail or None,
                seconds,
                code,
                host or socket.gethostname(),
                time.time(),
            ),
        )

    def count(self, study: str | None = None) -> dict[str, int]:
        """Stored outcomes by status (``ok``, ``failed``), for one study or all."""
        sql = "SELECT status, COUNT(*) FROM runs"
        args: tuple[str, ...] = ()
        if study is not None:
            sql += " WHERE study = ?"
            args = (study,)
        return dict(self.db.execute(sql + " GROUP BY status", args).fetchall())
