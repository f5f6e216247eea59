"""What tests/unit/testbed/test_cli.py
and tests/live/testbed/test_cli.py share."""

from __future__ import annotations

from pathlib import Path

SWF_LINE = "{id} {sub} 0 {run} {size} -1 -1 {size} {est} -1 1 1 1 -1 1 -1 -1 -1\n"


def write_trace(path: Path, rows: list[tuple[int, int, int, int, int]], bad: str = "") -> Path:
    with path.open("w") as fh:
        fh.write("; MaxProcs: 8\n")
        for i, (sub, run, size, est, _) in enumerate(rows):
            fh.write(SWF_LINE.format(id=i + 1, sub=sub, run=run, size=size, est=est))
        fh.write(bad)
    return path
