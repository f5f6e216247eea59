"""Real-time priority for the enforcement loops of the agent and the controller.

Measured on this machine kind (shared/platform-notes.md): a normal-priority
daemon saw thaws complete 6-70 ms late on a loaded machine, a SCHED_FIFO one
in 0.1-0.8 ms.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)


def set_realtime(prio: int, consequence: str) -> bool:
    """SCHED_FIFO at ``prio`` for the calling thread, if permitted (0 = leave as is).

    RESET_ON_FORK makes children (jobs) start as SCHED_OTHER. ``consequence``
    completes the warning logged when the kernel refuses. Returns True if set.
    """
    if prio <= 0:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(prio))
    except (OSError, AttributeError) as e:
        log.warning("cannot use SCHED_FIFO (%s): %s", e, consequence)
        return False
    # A GIL held by another thread (the metrics scrape) would delay us by the
    # switch interval (5 ms by default); keep that hand-off short.
    sys.setswitchinterval(0.0005)
    log.info("running at SCHED_FIFO priority %d", prio)
    return True
