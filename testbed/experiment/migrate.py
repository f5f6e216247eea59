"""Convert a results.json written before schema 1 (no kind) into the envelope of results.py.

Before schema 1 each study wrote its own layout and nothing said which study wrote it;
``cosched experiment report`` guessed from the keys. This module wraps such a file once,
with the kind the user names (no guessing) and what made it as far as the file recorded:
the commit and host facts some studies kept, the date, and the command the user gives (or
the study's usual command with the spec the file names). Nothing is re-run; the data are
kept, with the one addition a kind's report needs that older files lacked
(:data:`UPGRADES`). The envelope says ``recorded: false`` and how it was made.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.experiment import registry
from testbed.experiment import results as results_mod
from testbed.experiment.results import REPO, Made, Results, ResultsError

KNOWN = tuple(registry.KINDS)


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "", "unknown")), None)


def _recorded(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What the old file itself says about where and when it ran."""
    host: dict[str, Any] = {}
    commit = date = spec = None
    tree = None
    if kind == "paired-live":
        first = (doc["points"][0]["result"] if doc["points"] else {}) if "points" in doc else doc
        h = first.get("host") or {}
        commit, tree, date = h.get("cosched_commit"), h.get("working_tree_modified"), h.get("date")
        host = {"cores": h.get("cores"), "kernel": h.get("kernel"),
                "cgroup_mode": (first.get("cluster") or {}).get("cgroups")}  # fmt: skip
        spec = (first.get("spec") or {}).get("path")
    elif kind == "cdc-live":
        host = {"cgroup_mode": (doc.get("cluster") or {}).get("cgroups")}
        spec = (doc.get("spec") or {}).get("path")
    elif kind == "sim-vs-live":
        meta = doc.get("meta") or {}
        h = meta.get("host") or {}
        commit, date = h.get("commit"), meta.get("started")
        host = {"cores": h.get("cores"), "kernel": h.get("kernel"),
                "cgroup_mode": (meta.get("cluster") or {}).get("cgroups")}  # fmt: skip
        spec = (meta.get("spec") or {}).get("path")
    elif kind in ("paired-sim", "paired-scale", "rajaei-sim"):
        meta = doc.get("meta") or {}
        date = meta.get("date") or meta.get("written")
        spec = meta.get("spec")
    elif kind == "rajaei-live":
        date, spec = doc.get("started"), doc.get("spec")
    return {"commit": commit, "tree": tree, "date": date, "spec": spec,
            "host": {k: v for k, v in host.items() if v is not None}}  # fmt: skip


def _added_in(path: Path) -> str | None:
    """The commit that first added ``path`` to the repository (short), if it is in it."""
    try:
        rel = path.resolve().relative_to(REPO)
    except ValueError:
        return None
    done = subprocess.run(
        ["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%h", "--", str(rel)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = done.stdout.split()
    return lines[-1] if lines else None


def _rajaei_live(doc: dict[str, Any]) -> dict[str, Any]:
    """Older rajaei-live files named their spec's path only; the report needs the spec."""
    from testbed.experiment.rajaei.live import spec_doc

    if isinstance(doc.get("spec"), dict):
        return doc
    return {**doc, "spec": spec_doc(REPO / str(doc["spec"]))}


def _paired(doc: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 says which of the two a paired-live file holds; older files did not."""
    return {"sweep": doc} if "points" in doc else {"result": doc}


#: per kind, the one change an older file's data needs to be read as schema 1
UPGRADES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "paired-live": _paired,
    "rajaei-live": _rajaei_live,
}


def migrate(doc: Any, kind: str, command: str | None, origin: Path) -> Results:
    if not isinstance(doc, dict):
        raise ResultsError(f"{origin}: not a JSON object")
    if "kind" in doc:
        raise ResultsError(f"{origin}: already has a kind ({doc['kind']})", fix="nothing to do")
    rec = _recorded(kind, doc)
    if command is None:
        if not rec["spec"]:
            raise ResultsError(
                f"{origin}: the file does not say which spec made it", fix="give --command"
            )
        command = f"cosched experiment run {rec['spec']}"
        how = "command reconstructed from the spec the file names"
    else:
        how = "command as given"
    added = _added_in(origin)
    note = f"migrated from a results.json written before schema 1; {how}" + (
        f"; the data were first committed in {added}" if added else ""
    )
    upgrade = UPGRADES.get(kind)
    data = upgrade(doc) if upgrade is not None else doc
    made = Made(
        command=command, commit=_first(rec["commit"]), tree_modified=rec["tree"],
        date=str(rec["date"] or ""), host=rec["host"], recorded=False, note=note,
    )  # fmt: skip
    return Results(kind=kind, data=data, made=made)


def migrate_file(path: Path, kind: str, command: str | None = None) -> Path:
    """Rewrite ``path`` in the schema-1 envelope, in place."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ResultsError(f"{path}: cannot read it as JSON ({e})") from None
    res = migrate(doc, kind, command, path)
    study = registry.study(kind)
    return results_mod.write(path, res, study.dump)
