"""Text views of the controller's answers, in the spirit of gangster (Gorda & Brooks 1991 §3,
Figs. 6-9).

Pure rendering: each function takes the JSON-shaped result of one controller op
(docs/controller-api.md) and returns the text ``cosched`` prints; no I/O, so
the tests compare exact strings.

* :func:`render_matrix` -- the Ousterhout matrix (op ``matrix``): a column per
  node, a row per slot. Up to about 100 characters of cells the columns are
  headed by node names and cells show job ids; wider machines (gangster showed
  hundreds of processors on one line) get one character per node, headed by
  the node index written vertically (tens over units), and jobs get letters
  like gangster's, explained in the legend. Row marks: ``>`` the slot running
  now, ``+`` its partner slot (paired gang, Wiseman & Feitelson 2003 §2), ``*`` a row holding
  a job that runs as an alternate on idle nodes (Wiseman & Feitelson 2003 §2.6). ``.`` is a
  free node.
* :func:`render_jobs` -- the job table (op ``jobs``).
* :func:`render_slice` -- gangster's ``slice`` (op ``slice``): the packed rows
  and the nodes free in every row, where a new job would get 100 % of its
  nodes' time (definition in :mod:`controller.slice`).
* :func:`render_policy` -- one line: the controller's policy and, for the
  space-sharing (CDC) policies, the MPL and the agents' scheme (op ``status``).

Under a CDC policy the matrix rows are MPL rows: row *k* is the *k*-th job
on each node, all of them running at once, time-shared by the agents.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

#: Total cell width (characters) above which the matrix switches to one
#: character per node.
WIDE_LIMIT = 100
FREE = "."
RUNS_OVER = 160  # nodes: above this the matrix lists runs of nodes, not a column each
_LETTERS = string.ascii_lowercase + string.ascii_uppercase + string.digits
_OVERFLOW = "#"  # more jobs than letters: they share this label
_CLASS_ORDER = {"interactive": 0, "production": 1, "standby": 2, "benchmark": 3}


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart, trailing blanks removed."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    out = []
    for row in [list(headers), *rows]:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _job_key(job_id: object) -> tuple[int, str]:
    # JSON turns the integer keys of ``jobs`` into strings: sort numerically anyway.
    text = str(job_id)
    return (int(text), text) if text.lstrip("-").isdigit() else (1 << 62, text)


def _labels(job_ids: Sequence[int], wide: bool) -> dict[int, str]:
    ordered = sorted(set(job_ids), key=_job_key)
    if wide:
        return {j: str(j) for j in ordered}
    return {j: _LETTERS[i] if i < len(_LETTERS) else _OVERFLOW for i, j in enumerate(ordered)}


def _is_wide(names: Sequence[str], job_ids: Sequence[int]) -> bool:
    cell = max([1, *(len(n) for n in names), *(len(str(j)) for j in job_ids)])
    return len(names) * (cell + 1) <= WIDE_LIMIT


def _grid(
    names: Sequence[str],
    rows: Sequence[Sequence[int | None]],
    labels: Mapping[int, str],
    marks: Sequence[str],
    wide: bool,
) -> list[str]:
    """Header plus one line per row: ``<mark><row number>  <cells>``."""
    num_w = max(1, len(str(max(len(rows) - 1, 0))))
    lead = " " * (num_w + 3)
    lines = []
    if len(names) > RUNS_OVER:
        # A character per node no longer fits a terminal: list runs of equal cells.
        lines.append(f"{lead}runs of nodes: FIRST-LAST:JOB ({FREE} = free)")
        for r, row in enumerate(rows):
            runcells = [FREE if j is None else labels[j] for j in row]
            runs, start = [], 0
            for i in range(1, len(runcells) + 1):
                if i == len(runcells) or runcells[i] != runcells[start]:
                    span = names[start] if i - 1 == start else f"{names[start]}-{names[i - 1]}"
                    runs.append(f"{span}:{runcells[start]}")
                    start = i
            lines.append(f"{marks[r]}{str(r).rjust(num_w)}  {' '.join(runs)}")
        return lines
    if wide:
        cell = max([1, *(len(n) for n in names), *(len(v) for v in labels.values())])
        lines.append((lead + " ".join(n.ljust(cell) for n in names)).rstrip())
        sep = " "
    else:
        cell = 1
        tens = "".join(str(i // 10).ljust(10) for i in range(0, len(names), 10))[: len(names)]
        lines.append((lead + tens).rstrip())
        lines.append(lead + "".join(str(i % 10) for i in range(len(names))))
        sep = ""
    for r, row in enumerate(rows):
        cells = sep.join((FREE if j is None else labels[j]).ljust(cell) for j in row)
        lines.append(f"{marks[r]}{str(r).rjust(num_w)}  {cells}".rstrip())
    return lines


def _alternate_ids(alternates: object) -> set[int]:
    """``running.alternates`` as job ids, whether a list of ids or a node -> id map."""
    if isinstance(alternates, Mapping):
        values: Any = alternates.values()
    elif isinstance(alternates, list | tuple | set):
        values = alternates
    else:
        return set()
    return {int(v) for v in values if v is not None}


def render_matrix(result: Mapping[str, Any]) -> str:
    """The Ousterhout matrix (op ``matrix``) as gangster-style text, with a legend."""
    names = [str(n) for n in result.get("nodes", [])]
    slots: list[list[int | None]] = [
        [None if j is None else int(j) for j in row] for row in result.get("slots", [])
    ]
    jobs: dict[int, Mapping[str, Any]] = {int(k): v for k, v in (result.get("jobs") or {}).items()}
    running = result.get("running") or {}
    slot, partner = running.get("slot"), running.get("partner")
    alternates = _alternate_ids(running.get("alternates"))

    quantum = result.get("quantum")
    head = [str(result.get("policy", "?"))]
    if result.get("mpl") is not None:
        head.append(f"MPL {result['mpl']}")
    if quantum is not None:
        head.append(f"quantum {float(quantum):g} s")
    head.append(_plural(len(names), "node"))
    head.append(_plural(len(slots), "slot"))
    lines = ["  ".join(head)]
    if not slots:
        lines.append("(no jobs in the matrix)")
        return "\n".join(lines) + "\n"

    in_matrix = [j for row in slots for j in row if j is not None]
    all_ids = sorted(set(in_matrix) | set(jobs), key=_job_key)
    wide = _is_wide(names, all_ids)
    labels = _labels(all_ids, wide)
    marks = []
    for r, row in enumerate(slots):
        if r == slot:
            marks.append(">")
        elif r == partner:
            marks.append("+")
        elif alternates & {j for j in row if j is not None}:
            marks.append("*")
        else:
            marks.append(" ")
    lines += _grid(names, slots, labels, marks, wide)
    lines.append("")

    where: dict[int, str] = {}
    for r, row in enumerate(slots):
        for j in row:
            if j is None:
                continue
            if r == slot:
                where[j] = "slot"
            elif r == partner:
                where.setdefault(j, "partner")
    for j in alternates:
        where.setdefault(j, "alternate")
    tree = result.get("tree")
    if isinstance(
        tree, Mapping
    ):  # DHC (Feitelson & Rudolph 1996): the controllers and the active front
        lines += _render_tree(tree, names)
        for j in tree.get("running") or []:
            where.setdefault(int(j), "front")
    headers = ["JOB", "USER", "CLASS", "SIZE", "STATE", "RUNS"]
    if not wide:
        headers = ["", *headers]
    table = []
    for j in all_ids:
        info = jobs.get(j, {})
        cells = [
            str(j),
            str(info.get("user", "?")),
            str(info.get("class", "?")),
            str(info.get("size", "?")),
            str(info.get("state", "?")),
            where.get(j, ""),
        ]
        table.append([labels[j], *cells] if not wide else cells)
    size_col = headers.index("SIZE")
    lines += _table(headers, table, right={size_col, headers.index("JOB")})
    return "\n".join(lines) + "\n"


def _render_tree(tree: Mapping[str, Any], names: list[str]) -> list[str]:
    """DHC's controllers with gangs, indented by level; ``*`` marks the active front."""
    front = {tuple(c) for c in tree.get("front") or []}
    ctls = list(tree.get("controllers") or [])
    top = max((int(c["level"]) for c in ctls), default=0)
    out = [f"DHC tree: a round of {tree.get('round_quanta')} quanta; the last plan at "
           f"{float(tree.get('instant', 0)):.2f} of it; * = the active front"]  # fmt: skip
    for c in ctls:
        lvl, idx = int(c["level"]), int(c["index"])
        a, b = (int(x) for x in c["pes"])
        span = names[a] if a == b else f"{names[a]}-{names[b]}" if b < len(names) else f"{a}-{b}"
        mark = "*" if (lvl, idx) in front else " "
        gangs = ", ".join(str(g) for g in c.get("gangs", []))
        out.append(f"{mark} {'  ' * (top - lvl)}level {lvl} #{idx} [{span}]: jobs {gangs}")
    out.append("")
    return out


def render_policy(status: Mapping[str, Any]) -> str:
    """One line: the policy, and for CDC policies the MPL, the scheme and its agents.

    ``policy cc-b: MPL 5, scheme cc-b (tick 10 ms, spin 150 us, boost weight)``,
    followed by ``; n1 refused: ...`` for every agent that does not run it.
    """
    policy = str(status.get("policy", "?"))
    if status.get("mpl") is None:
        return f"policy {policy}"
    line = f"policy {policy}: MPL {status['mpl']}, scheme {status.get('scheme', '?')}"
    settings = []
    if status.get("tick_ms") is not None:
        settings.append(f"tick {float(status['tick_ms']):g} ms")
    if status.get("spin_us") is not None:
        settings.append(f"spin {float(status['spin_us']):g} us")
    if status.get("boost"):
        settings.append(f"boost {status['boost']}")
    if settings:
        line += f" ({', '.join(settings)})"
    agents = status.get("local_policy") or {}
    if isinstance(agents, Mapping):
        odd = [f"{n} {v}" for n, v in agents.items() if v != status.get("scheme")]
        if odd:
            line += "; " + "; ".join(odd)
    return line


def _num(value: object, fmt: str) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return format(value, fmt)


def render_jobs(records: Sequence[Mapping[str, Any]]) -> str:
    """The job table (op ``jobs``).

    ``UTIL`` is ``cpu_s / (wall_s * size)``: the share of its nodes' time the
    job actually used -- low for an I/O-bound job, near 1 for a compute-bound
    one running alone, the figure paired gang matches on (Wiseman & Feitelson 2003 §2.3).
    """
    if not records:
        return "no jobs\n"
    headers = ["ID", "NAME", "USER", "CLASS", "SIZE", "STATE", "CPU_S", "WALL_S", "UTIL", "EXIT"]
    rows = []
    for rec in sorted(records, key=lambda r: _job_key(r.get("job_id"))):
        cpu, wall, size = rec.get("cpu_s"), rec.get("wall_s"), rec.get("size")
        util: float | None = None
        if (
            isinstance(cpu, int | float)
            and isinstance(wall, int | float)
            and isinstance(size, int)
            and wall > 0
            and size > 0
        ):
            util = cpu / (wall * size)
        name = str(rec.get("name") or "-")
        if len(name) > 20:  # keep one job per line on a terminal
            name = name[:19] + "~"
        rows.append(
            [
                str(rec.get("job_id", "?")),
                name,
                str(rec.get("user") or "-"),
                str(rec.get("class") or "-"),
                str(size if size is not None else "-"),
                str(rec.get("state") or "-"),
                _num(cpu, ".1f"),
                _num(wall, ".1f"),
                _num(util, ".2f"),
                _num(rec.get("exit_code"), "d"),
            ]
        )
    return "\n".join(_table(headers, rows, right={0, 4, 6, 7, 8, 9})) + "\n"


def render_slice(
    result: Mapping[str, Any], size: int | None = None, nodes: Sequence[str] | None = None
) -> str:
    """gangster's ``slice`` (op ``slice``): packed rows, holes free in every row, the verdict."""
    packed: list[list[int | None]] = [
        [None if j is None else int(j) for j in row] for row in result.get("packed", [])
    ]
    runs = [(int(a), int(b)) for a, b in result.get("free_runs", [])]
    if size is None and result.get("size") is not None:
        size = int(result["size"])
    width = len(packed[0]) if packed else (max((b for _, b in runs), default=-1) + 1)
    names = list(nodes) if nodes is not None else [str(i) for i in range(width)]
    ids = sorted({j for row in packed for j in row if j is not None}, key=_job_key)
    wide = _is_wide(names, ids)
    lines = [
        f"{_plural(len(ids), 'job')} packed space-wise into {_plural(len(packed), 'row')} "
        f"on {_plural(width, 'node')}"
    ]
    if packed:
        lines += _grid(names, packed, _labels(ids, wide), [" "] * len(packed), wide)
        free = {n for a, b in runs for n in range(a, b + 1)}
        cell = max([1, *(len(n) for n in names), *(len(str(j)) for j in ids)]) if wide else 1
        sep = " " if wide else ""
        num_w = max(1, len(str(len(packed) - 1)))
        under = sep.join(("^" if n in free else " ").ljust(cell) for n in range(width))
        if free:
            lines.append((" " * (num_w + 3) + under).rstrip())
        if not wide:
            labels = _labels(ids, wide)
            lines.append("jobs: " + ", ".join(f"{labels[j]}={j}" for j in ids))
    if runs:
        spans = ", ".join(_span(names, a, b) for a, b in runs)
        lines.append(f"free in every row: {spans}")
    else:
        lines.append("free in every row: none")
    if size is not None:
        fitting = [r for r in runs if r[1] - r[0] + 1 >= size]
        if fitting:
            where = " or ".join(_span(names, a, b) for a, b in fitting)
            lines.append(
                f"a job of {_plural(size, 'node')} placed within {where} would get 100% of the time"
            )
        else:
            lines.append(
                f"no run of {_plural(size, 'node')} is free in every row: a job of "
                f"{_plural(size, 'node')} would share its nodes' time with other jobs"
            )
    return "\n".join(lines) + "\n"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _span(names: Sequence[str], first: int, last: int) -> str:
    count = last - first + 1
    label = names[first] if first == last else f"{names[first]}-{names[last]}"
    return f"{label} ({_plural(count, 'node')})"
