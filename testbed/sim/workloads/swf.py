"""Standard Workload Format (SWF) reading and writing.

The format is the Parallel Workloads Archive's (Feitelson et al., "Experience
with using the Parallel Workloads Archive", JPDC 74(10), 2014, and the SWF
definition on the archive's site): one job per line, 18 whitespace-separated
numeric fields; lines starting with ``;`` are header comments (``; MaxProcs:
128``); the value -1 means "unknown".  The fields, 1-based:

  1 job number, 2 submit time, 3 wait time, 4 run time, 5 allocated
  processors, 6 average CPU time, 7 used memory, 8 requested processors,
  9 requested time, 10 requested memory, 11 status, 12 user id, 13 group id,
  14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time.

How a line becomes a :class:`~testbed.sim.job.SimJob` (compute-bound profile):

* ``job_id`` = field 1 (kept as is, also when not 1..n);
* ``submit`` = field 2 (seconds);
* ``size`` = allocated processors (field 5) when positive, else requested
  processors (field 8) when positive; a size of 0 counts as unknown, as in
  archive logs where cancelled jobs show 0 allocated processors;
* ``runtime`` = field 4, clipped to the requested time (field 9) when one is
  given (the archive's "cleaned" logs do the same: a job cannot outlive its
  kill limit);
* ``estimate`` = requested time (field 9) when given, else the run time;
  a requested time of 0 is treated as not given (it cannot be an estimate);
* ``user`` = field 12 (-1 when unknown).

All other fields are read (checked to be numeric) and dropped.

**Bad lines.**  A line that cannot be a simulated job raises :class:`SwfError`
with the message ``file:line: reason``: not 18 fields, a non-numeric field, a
non-integral job number/size/user, a negative value other than -1 in a field
we use, or an unknown submit time, run time or size (a job without them cannot
be simulated).  With ``skip_bad_lines=True`` such lines are skipped and
counted instead (:attr:`SwfResult.skipped`, with the first few reasons kept in
:attr:`SwfResult.problems`).  Blank lines are ignored.  Jobs keep file order
(archive logs are sorted by submit time; we do not re-sort).

**Writing.**  :func:`write_swf` emits the header comments, then one line per
job with the fields above and -1 in every field we do not model.  Times that
are whole numbers are written as integers; other times are written with
Python's shortest round-tripping float repr (strict SWF wants integers, but
losing precision would break ``read(write(x)) == x``).  Round trip holds for
jobs that satisfy the SWF invariants: ``estimate >= runtime`` and
``estimate > 0`` unless ``estimate == runtime`` (an underestimate is clipped on
reading back, as the semantics above require).  Profiles, barriers and the
exclusive flag are not part of SWF and are not written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from testbed.sim.job import COMPUTE_BOUND, SimJob, unchecked_job

__all__ = ["SwfError", "SwfHeader", "SwfResult", "read_swf", "write_swf"]

N_FIELDS = 18
MAX_PROBLEMS = 20

_HEADER_RE = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$")


class SwfError(ValueError):
    """A malformed SWF line; the message is ``file:line: reason``."""


@dataclass(frozen=True, slots=True)
class SwfHeader:
    """Header comments of an SWF file.

    ``comments`` are the ``;`` lines verbatim (without newline), in file
    order; ``max_procs`` and ``max_nodes`` are parsed from ``; MaxProcs: N``
    and ``; MaxNodes: N`` (``None`` when absent or not an integer).
    """

    comments: tuple[str, ...] = ()
    max_procs: int | None = None
    max_nodes: int | None = None

    @classmethod
    def from_comments(cls, comments: Iterable[str]) -> SwfHeader:
        lines = tuple(comments)
        values = _header_fields(lines)
        return cls(
            lines, _int_or_none(values.get("maxprocs")), _int_or_none(values.get("maxnodes"))
        )

    @classmethod
    def make(
        cls,
        *,
        max_procs: int | None = None,
        max_nodes: int | None = None,
        extra: Iterable[str] = (),
    ) -> SwfHeader:
        """A fresh header: ``; Version: 2.2``, the given sizes, then ``extra`` comments."""
        lines = ["; Version: 2.2"]
        if max_nodes is not None:
            lines.append(f"; MaxNodes: {max_nodes}")
        if max_procs is not None:
            lines.append(f"; MaxProcs: {max_procs}")
        lines.extend(c if c.startswith(";") else f"; {c}" for c in extra)
        return cls.from_comments(lines)

    def fields(self) -> dict[str, str]:
        """``; Key: value`` comments as a dict with lower-case keys (last one wins)."""
        return _header_fields(self.comments)

    @property
    def machine_size(self) -> int | None:
        """MaxProcs, else MaxNodes: the size jobs are measured against."""
        return self.max_procs if self.max_procs is not None else self.max_nodes


def _header_fields(lines: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        m = _HEADER_RE.match(line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


@dataclass(slots=True)
class SwfResult:
    """What :func:`read_swf` returns."""

    jobs: list[SimJob]
    header: SwfHeader
    skipped: int = 0
    problems: list[str] = field(default_factory=list)  # first MAX_PROBLEMS reasons


class _Bad(Exception):
    pass


class _Floats(dict[str, float]):
    """``float(text)`` of finite numbers, remembered: SWF columns repeat a few
    values (-1, sizes, users, queues), and a dictionary hit costs a third of a
    parse (issue 11). Infinities and NaN raise ValueError like text does, so a
    line with any of them leaves the fast path."""

    def __missing__(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        self[text] = value
        return value


_MEMO_LIMIT = 1 << 20  # distinct tokens kept; cleared beyond (memory of huge traces)


def _integral(value: float, name: str) -> int:
    if value != int(value):
        raise _Bad(f"{name} must be an integer, got {value:g}")
    return int(value)


def _parse_line(parts: list[str]) -> SimJob:
    if len(parts) != N_FIELDS:
        raise _Bad(f"expected {N_FIELDS} fields, got {len(parts)}")
    try:
        vals = list(map(float, parts))
    except ValueError:
        vals = []
    if len(vals) != N_FIELDS or not math.isfinite(sum(vals)):
        for i, text in enumerate(parts):  # slow path: name the offending field
            try:
                ok = math.isfinite(float(text))
            except ValueError:
                ok = False
            if not ok:
                raise _Bad(f"field {i + 1} is not a finite number: {text!r}")
    job_id = _integral(vals[0], "job number (field 1)")
    submit, runtime, alloc, req_procs, req_time, user = (
        vals[1],
        vals[3],
        vals[4],
        vals[7],
        vals[8],
        vals[11],
    )
    for v, name in (
        (submit, "submit time (field 2)"),
        (runtime, "run time (field 4)"),
        (alloc, "allocated processors (field 5)"),
        (req_procs, "requested processors (field 8)"),
        (req_time, "requested time (field 9)"),
        (user, "user id (field 12)"),
    ):
        if v < 0 and v != -1:
            raise _Bad(f"negative {name}: {v:g} (only -1, unknown, may be negative)")
    if submit < 0:
        raise _Bad("unknown submit time (field 2 is -1)")
    if runtime < 0:
        raise _Bad("unknown run time (field 4 is -1)")
    if alloc > 0:
        size = _integral(alloc, "allocated processors (field 5)")
    elif req_procs > 0:
        size = _integral(req_procs, "requested processors (field 8)")
    else:
        raise _Bad("unknown size (fields 5 and 8 are both -1 or 0)")
    if req_time > 0:
        estimate = req_time
        runtime = min(runtime, req_time)
    else:
        estimate = runtime
    return SimJob(
        job_id=job_id,
        submit=submit,
        size=size,
        runtime=runtime,
        estimate=estimate,
        user=_integral(user, "user id (field 12)"),
    )


def read_swf(path: str | Path, *, skip_bad_lines: bool = False) -> SwfResult:
    """Read an SWF file into compute-bound jobs (semantics in the module docstring).

    Raises :class:`SwfError` (``file:line: reason``) on the first bad line,
    or, with ``skip_bad_lines``, skips and counts bad lines.  ``OSError`` if
    the file cannot be read.

    Speed (issue 11): a line that passes every check in one test is built on
    the spot with :func:`~testbed.sim.job.unchecked_job`; any other line goes
    through :func:`_parse_line`, which either builds the same job or names
    what is wrong (tests/unit/testbed/sim/workloads/test_swf.py checks the two agree).
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8", errors="replace")
    comments: list[str] = []
    jobs: list[SimJob] = []
    append = jobs.append
    problems: list[str] = []
    skipped = 0
    memo = _Floats()
    to_float = memo.__getitem__
    make = unchecked_job
    compute = COMPUTE_BOUND
    for lineno, raw in enumerate(text.splitlines(), start=1):
        parts = raw.split()  # split() and strip() agree on what is whitespace
        if not parts:
            continue
        if parts[0][0] == ";":
            comments.append(raw.rstrip())
            continue
        if len(parts) == N_FIELDS:
            if len(memo) > _MEMO_LIMIT:
                memo.clear()
            try:
                vals = list(map(to_float, parts))  # every field a finite number
            except ValueError:
                vals = None
            if vals is not None:
                num, submit, runtime, alloc = vals[0], vals[1], vals[3], vals[4]
                req_procs, req_time, user = vals[7], vals[8], vals[11]
                size = alloc if alloc > 0 else req_procs
                if (
                    submit >= 0
                    and runtime >= 0
                    and (alloc >= 0 or alloc == -1)
                    and (req_procs >= 0 or req_procs == -1)
                    and (req_time >= 0 or req_time == -1)
                    and (user >= 0 or user == -1)
                    and size > 0
                    and size == int(size)
                    and num == int(num)
                    and user == int(user)
                ):
                    if req_time > 0:
                        estimate = req_time
                        runtime = min(runtime, req_time)
                    else:
                        estimate = runtime
                    append(
                        make(
                            int(num),
                            submit,
                            int(size),
                            runtime,
                            estimate,
                            compute,
                            0.0,
                            int(user),
                            False,
                        )
                    )
                    continue
        try:  # the slow path: the same job, or the reason the line is bad
            append(_parse_line(parts))
        except (_Bad, ValueError) as exc:
            msg = f"{p}:{lineno}: {exc}"
            if not skip_bad_lines:
                raise SwfError(msg) from None
            skipped += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(msg)
    return SwfResult(jobs, SwfHeader.from_comments(comments), skipped, problems)


def _fmt(v: float) -> str:
    if float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def write_swf(path: str | Path, jobs: Iterable[SimJob], header: SwfHeader | None = None) -> None:
    """Write ``jobs`` as SWF; ``header`` defaults to :meth:`SwfHeader.make` with
    MaxProcs = the largest job size.  Unmodelled fields are -1."""
    job_list = list(jobs)
    if header is None:
        header = SwfHeader.make(max_procs=max((j.size for j in job_list), default=None))
    out: list[str] = [c if c.startswith(";") else f"; {c}" for c in header.comments]
    for j in job_list:
        out.append(
            f"{j.job_id} {_fmt(j.submit)} -1 {_fmt(j.runtime)} {j.size} -1 -1 -1 "
            f"{_fmt(j.estimate)} -1 -1 {j.user} -1 -1 -1 -1 -1 -1"
        )
    Path(path).write_text("\n".join(out) + "\n", encoding="utf-8")
