"""``results.json``: what every study writes, and what its report is rebuilt from.

One envelope for every kind of study::

    {"kind": "cdc-stream",            the study (registry.py) whose data this is
     "schema": 1,                     the layout of "data" for that kind
     "made": {"command": "cosched experiment run experiments/cdc-policies.toml",
              "commit": "1f2e...",    git HEAD of the tree that ran it (null: not recorded)
              "tree_modified": false, whether that tree differed from the commit
              "date": "2026-11-26T12:00:00Z",
              "host": {"cores": 2, "kernel": "6.18.44", "cgroup_mode": "hybrid",
                       "python": "3.11.2"},
              "recorded": true,       false: filled in by `cosched experiment migrate`
              "note": ""},            what a reader must know about the record (below)
     "data": {...}}                   the study's own results

A run made on a branch records that branch's commit; if the branch is rebased before it
merges, that commit never reaches main. Such a record keeps the commit it ran at (that is
what ran) and says so in ``note``: the commit on main that holds the same change and the
one that brought the data in (tests/unit/test_committed_results.py fails on a committed
record whose commit is known, not on the current history and not explained). The
report's footer prints the note.

``cosched experiment report`` reads the kind from here, never from the shape
of the data. A file without ``kind`` was written before schema 1: it is
refused with the command that converts it (:mod:`testbed.experiment.migrate`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
SCHEMA = 1


class ResultsError(UsageError):
    """A results.json that cannot be read as one (one line, with the fix)."""


@dataclass(frozen=True)
class Made:
    """What made a results.json: the command, the code, the host."""

    command: str
    commit: str | None
    tree_modified: bool | None
    date: str
    host: dict[str, Any] = field(default_factory=dict)
    recorded: bool = True  # False: reconstructed afterwards (migration)
    note: str = ""

    def line(self) -> str:
        """One sentence for a report's footer."""
        if self.commit:
            code = f"at commit {self.commit[:10]}"
            if self.tree_modified:
                code += " (working tree modified)"
        else:
            code = "at a commit not recorded"
        h = self.host
        facts = [f"{h['cores']} cores"] if h.get("cores") else []
        facts += [f"kernel {h['kernel']}"] if h.get("kernel") else []
        facts += [f"cgroups {h['cgroup_mode']}"] if h.get("cgroup_mode") else []
        host = f"; host: {', '.join(facts)}" if facts else ""
        when = self.date[:10] if self.date else "an unrecorded date"
        text = f"Made by `{self.command}` {code} on {when}{host}."
        if not self.recorded:
            text += f" ({self.note})" if self.note else " (reconstructed)"
        elif self.note:
            text += f" ({self.note}.)"
        return text


@dataclass
class Results:
    kind: str
    data: Any
    made: Made
    schema: int = SCHEMA


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def repo_relative(path: str | Path) -> str:
    """``path`` relative to the repository when it is inside it (results name files the
    same on every checkout), else as given."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except (ValueError, OSError):
        return str(path)


def cgroup_mode() -> str:
    """v1, hybrid or v2, as the cgroup layer reads this host's mounts ("unknown" if it cannot)."""
    try:
        from common.cgroups.layout import detect_layout

        return str(detect_layout().mode)
    except Exception:  # a host without cgroups is a fact to record, not a failure
        return "unknown"


def host_facts() -> dict[str, Any]:
    """The host facts a result is read with: cores, kernel, cgroup mode, Python."""
    return {
        "cores": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "cgroup_mode": cgroup_mode(),
        "python": platform.python_version(),
    }


def made_now(command: str) -> Made:
    """``command`` run now, from this tree, on this host."""
    return Made(
        command=command,
        commit=_git("rev-parse", "HEAD") or None,
        tree_modified=bool(_git("status", "--porcelain", "--untracked-files=no")),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        host=host_facts(),
    )


def dumps(results: Results, dump_data: Callable[[Any], str | None] | None = None) -> str:
    """The file's text: the envelope, then ``data`` as the study lays it out (its own
    ``dump_data`` keeps a large file diffable), or indented JSON."""
    head = {"kind": results.kind, "schema": results.schema, "made": asdict(results.made)}
    data = (dump_data(results.data) if dump_data else None) or json.dumps(results.data, indent=1)
    return json.dumps(head, indent=1)[:-2] + ',\n "data": ' + data + "\n}\n"


def write(
    path: Path, results: Results, dump_data: Callable[[Any], str | None] | None = None
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(results, dump_data))
    tmp.replace(path)  # a partial write never replaces a whole file
    return path


def parse(doc: Any, origin: str, kinds: Sequence[str]) -> Results:
    """Check the envelope of a parsed results.json."""
    if not isinstance(doc, dict):
        raise ResultsError(f"{origin}: not a results.json (a JSON object with a kind)")
    kind = doc.get("kind")
    if kind is None:
        raise ResultsError(
            f"{origin}: written before results.json had a kind (schema 1)",
            fix=f"convert it once: cosched experiment migrate {origin} --kind KIND "
            f"(kinds: {', '.join(kinds)})",
        )
    if kind not in kinds:
        raise ResultsError(f"{origin}: unknown kind {kind!r}", fix="kinds: " + ", ".join(kinds))
    schema = doc.get("schema")
    if schema != SCHEMA:
        raise ResultsError(
            f"{origin}: schema {schema!r}, this cosched reads schema {SCHEMA}",
            fix="rebuild it with the cosched that wrote it, or rerun the study",
        )
    made = doc.get("made")
    if not isinstance(made, Mapping) or "data" not in doc:
        raise ResultsError(f"{origin}: no 'made' or 'data' entry", fix="give a results.json")
    try:
        m = Made(**made)
    except TypeError as e:
        raise ResultsError(f"{origin}: bad 'made' entry ({e})") from None
    return Results(kind=str(kind), data=doc["data"], made=m, schema=int(schema))


def read(path: Path, kinds: Sequence[str]) -> Results:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(
            f"{path}: no such file", fix="give the results.json a run wrote"
        ) from None
    except OSError as e:
        raise ResultsError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise ResultsError(
            f"{path}: not JSON ({e})", fix="give the results.json a run wrote"
        ) from None
    return parse(doc, str(path), kinds)
