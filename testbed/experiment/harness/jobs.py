"""Jobs of a live run: submitted to the controller, waited for, and their ranks' reports read.

The controller's records (``jobs``) give each job's state and its submit, start and end
times; each rank's output file ends with the program's JSON report (apps/synthetic.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.experiment.harness import LiveError

REPO = Path(__file__).resolve().parents[3]
TERMINAL = frozenset({"done", "failed", "killed"})


def submit(
    client: Any, name: str, size: int, argv: Sequence[str], *, estimate: float | None = None,
    cwd: Path | None = REPO, job_class: str = "production",
) -> int:  # fmt: skip
    """Submit one job (class ``job_class``, docs/controller.md "Job classes"); its id."""
    spec: dict[str, Any] = {"name": name, "size": size, "argv": list(argv), "class": job_class}
    if cwd is not None:
        spec["cwd"] = str(cwd)
    if estimate is not None:
        spec["estimate"] = estimate
    return int(client.request("submit", spec=spec)["job_id"])


def records(client: Any) -> dict[int, dict[str, Any]]:
    """Every job the controller knows, by id (ended ones included)."""
    return {int(r["job_id"]): r for r in client.request("jobs", all=True)}


def wait_ended(
    client: Any, ids: Sequence[int], timeout: float, *, poll: float = 0.25, kill: bool = False,
    watch: Callable[[Any], None] | None = None,
) -> dict[int, dict[str, Any]]:  # fmt: skip
    """The records of ``ids`` once all have ended. After ``timeout`` s: raise, or with
    ``kill`` kill what still runs and raise once the kill is sent. ``watch(client)`` is
    called before every look (a trace of the controller's status)."""
    deadline = time.monotonic() + timeout
    while True:
        if watch is not None:
            watch(client)
        recs = records(client)
        mine = {j: recs[j] for j in ids if j in recs}
        if len(mine) == len(ids) and all(r["state"] in TERMINAL for r in mine.values()):
            return mine
        if time.monotonic() > deadline:
            if kill:
                for j, r in mine.items():
                    if r["state"] not in TERMINAL:
                        with contextlib.suppress(Exception):
                            client.request("kill", job_id=j)
            raise LiveError(f"jobs {list(ids)} did not end within {timeout:g} s")
        time.sleep(poll)


def drain(
    client: Any, ids: Sequence[int], timeout: float, *, poll: float = 0.25,
    on_poll: Any = None,
) -> tuple[dict[int, dict[str, Any]], int]:  # fmt: skip
    """Wait for every job to end; after ``timeout`` s kill what still runs, wait 30 s more for
    the ends; (records, how many were killed). ``on_poll()`` runs on every poll."""
    deadline = time.monotonic() + timeout
    killed = 0
    sent = False
    while True:
        recs = records(client)
        mine = {j: recs[j] for j in ids if j in recs}
        if all(r["state"] in TERMINAL for r in mine.values()):
            return mine, killed
        if time.monotonic() > deadline:
            if sent:
                return mine, killed  # killed, yet not ended: give up on them
            for j, r in mine.items():
                if r["state"] not in TERMINAL:
                    with contextlib.suppress(Exception):
                        client.request("kill", job_id=j)
                        killed += 1
            sent = True
            deadline = time.monotonic() + 30.0
        if on_poll is not None:
            on_poll()
        time.sleep(poll)


def last_json(path: Path) -> dict[str, Any]:
    """The last JSON object line of a rank's output ({} if none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    return doc
    return {}


def rank_outputs(client: Any, jid: int) -> list[Path]:
    """Every rank's output file, in rank order."""
    ranks = client.request("job", job_id=jid).get("ranks") or []
    return [Path(r["stdout"]) for r in ranks if r.get("stdout")]


def rank_reports(client: Any, jid: int, *, written: bool = False) -> list[dict[str, Any]]:
    """Every rank's JSON report, in rank order; with ``written`` each carries ``_written``:
    when its output was last written (wall clock; the program prints as its loop ends)."""
    out = []
    with contextlib.suppress(Exception):
        for path in rank_outputs(client, jid):
            doc = last_json(path)
            if written:
                with contextlib.suppress(OSError):
                    doc["_written"] = path.stat().st_mtime
            out.append(doc)
    return out


def rank0_report(client: Any, jid: int, *, written: bool = False) -> dict[str, Any]:
    reports = rank_reports(client, jid, written=written)
    return reports[0] if reports else {}


def slots_of(matrix: Mapping[str, Any]) -> dict[int, int]:
    """Job id -> the first matrix row (slot) holding it."""
    where: dict[int, int] = {}
    for s, row in enumerate(matrix.get("slots", [])):
        for cell in row:
            if cell is not None:
                where.setdefault(int(cell), s)
    return where


def rows_in_use(slots: Sequence[Sequence[int | None]]) -> int:
    """Matrix rows holding at least one job."""
    return sum(1 for row in slots if any(c is not None for c in row))
