"""How a cosched program reports a :class:`~common.errors.CoschedError` and exits.

One line on stderr, ``<prog>: error: <what, why> — <how to fix>``, and the
error's exit status. Used by the console script and by the two daemons'
``__main__`` modules, each catching the base class once at the top.
"""

from __future__ import annotations

import sys
from typing import TextIO

from common.errors import CoschedError


def error_line(prog: str, err: BaseException) -> str:
    """``prog: error: ...`` on one line (a multi-line message is joined with '; ')."""
    text = "; ".join(part.strip() for part in str(err).splitlines() if part.strip())
    return f"{prog}: error: {text or type(err).__name__}"


def report(prog: str, err: CoschedError, stream: TextIO | None = None) -> int:
    """Print :func:`error_line` to ``stream`` (stderr) and return the exit status."""
    print(error_line(prog, err), file=stream or sys.stderr, flush=True)
    return err.exit_code
