"""The live harness every live study shares: the local cluster brought up and down
(:mod:`.cluster`), the controller started one way (:mod:`.controller`), jobs submitted,
waited for and read (:mod:`.jobs`), the compute loop's cost here (:mod:`.loopcost`) and
whether the host was quiet (:mod:`.hostload`).

Live studies need root (network namespaces, cgroups) and the host to themselves; they run
one run at a time, never through the sweep executor.
"""

from __future__ import annotations

from common.errors import CoschedError


class LiveError(CoschedError):
    """A live run that could not go on (one line, with what to do)."""
