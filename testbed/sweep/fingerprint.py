"""The code a run depends on, as one short hash (docs/sweeps.md, "Which code made a result").

The fingerprint of a run function is a hash of the source of every module of
this repository it can import, found by scanning imports (``modulefinder``,
also those inside functions) from the function's module and searching only
the repository, so library versions and unrelated modules do not enter it.
The result store records it beside each result; what decides whether a stored
result is reused is the study's result-format version, not this hash (the
trade-off is in docs/sweeps.md).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import modulefinder
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def fingerprint(module: str) -> str:
    """12 hex digits over the repository sources ``module`` can import (cached per process)."""
    finder = modulefinder.ModuleFinder(path=[str(ROOT)])
    with contextlib.suppress(ImportError):  # not in this repository (__main__, say)
        finder.import_hook(module)
    found = (getattr(m, "__file__", None) for m in finder.modules.values())
    files = sorted(
        {Path(f).resolve() for f in found if f and Path(f).resolve().is_relative_to(ROOT)}
    )
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
