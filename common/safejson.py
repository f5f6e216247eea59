"""JSON from outside with its nesting bounded before it is parsed (issue 28).

CPython's decoder recurses once per level of ``[`` or ``{``; a line of
100,000 ``[`` raised ``RecursionError`` (not a ``ValueError``) out of the
controller's request loop and stopped the daemon. Every daemon entry point
that parses what a user, a job or an unauthenticated peer sent goes through
:func:`loads`: it measures the nesting first (escapes and strings removed,
then the running sum of opening minus closing brackets, all in C loops) and
refuses a document deeper than ``max_depth`` with :class:`TooDeep`, a
``ValueError``, so callers' existing ``except ValueError`` handles it. A
``RecursionError`` from the parser itself becomes the same error, as a second
line of defence. Stdlib only: the message library uses it too.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: Far above any document cosched exchanges (a request is 4-6 levels deep) and far
#: below the interpreter's recursion limit.
MAX_DEPTH = 32

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_SYNTAX = bytes(range(256)).translate(None, b'[]{}"')  # every byte but these
# opening brackets to +1, closing ones to -1 (255 read as a signed byte)
_STEP = bytes.maketrans(b"[{]}", bytes([1, 1, 255, 255]))


class TooDeep(ValueError):
    """A document nested deeper than allowed."""


def depth(data: bytes) -> int:
    """How deep ``data`` (JSON text) nests its arrays and objects (0 for a scalar)."""
    text = _ESCAPE.sub(b"", data) if b"\\" in data else data
    syntax = text.translate(None, _NOT_SYNTAX)
    # the pieces between quotes at even places are outside strings
    brackets = b"".join(syntax.split(b'"')[0::2]) if b'"' in syntax else syntax
    return max(accumulate(memoryview(brackets.translate(_STEP)).cast("b")), default=0)


def nesting_ok(data: bytes, max_depth: int = MAX_DEPTH) -> bool:
    """True when ``data`` nests at most ``max_depth`` levels; cheap on ordinary input
    (fewer opening brackets than the limit cannot exceed it), linear otherwise."""
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return True
    return depth(data) <= max_depth


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted input; :class:`TooDeep` (a ValueError) when too deep."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if not nesting_ok(raw, max_depth):
        raise TooDeep(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(raw)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {max_depth} levels") from None
