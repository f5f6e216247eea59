"""A prompt wake-up for the enforcement loops of the agent and the controller.

Measured on this machine kind (shared/platform-notes.md): a normal-priority
daemon saw thaws complete 6-70 ms late on a loaded machine, a SCHED_FIFO one
in 0.1-0.8 ms. One function per mechanism, and :func:`choose_wakeup`, which
takes the first the kernel grants:

* ``fifo``: SCHED_FIFO (refused below the root group on cgroup2 when the
  kernel has RT group scheduling: no group but the root has an RT budget);
* ``short-slice`` (only if asked for: measured no better than plain):
  SCHED_OTHER with a short custom slice (``sched_attr``'s ``sched_runtime``,
  honoured for fair tasks since Linux 6.12): under EEVDF it gives the woken
  loop an earlier virtual deadline and wake-up preemption, but the loop's own
  burst then outlasts its slice and the job takes the core back mid-switch;
* ``leaf-weight``: SCHED_OTHER, the agent's own cgroup leaf weighted far above
  its node's job groups (the caller's function: it needs the cgroup driver), so
  the loop stays ahead of the jobs in virtual time and wins the core at once;
* ``none``: plain SCHED_OTHER.

SCHED_DEADLINE and nice -20 are not in the chain (docs/cluster.md, measured in
docs/results/v2-wakeup/): the kernel refuses SCHED_DEADLINE to a task whose
CPUs do not cover its root domain (an agent in a one-CPU node), and a nice
value ranks a task only inside its own group, the agent's leaf, not against
the jobs' groups. The scheduling classes set reset-on-fork, so jobs start plain.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

SCHED_OTHER = 0
SCHED_DEADLINE = 6
SCHED_FLAG_RESET_ON_FORK = 0x01
# struct sched_attr (include/uapi/linux/sched/types.h): VER0 is 48 bytes, VER1
# adds the two utilization clamps (56). Native order, no padding.
_SCHED_ATTR = struct.Struct("=IIQiIQQQII")
SCHED_ATTR_SIZE = _SCHED_ATTR.size  # 56
SCHED_ATTR_SIZE_VER0 = 48
_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
# The kernel clamps a fair task's slice to 0.1..100 ms; the shortest gives the
# earliest deadline at a wake-up. The loop's work per switch is well under it.
DEFAULT_SLICE_US = 100

FIFO = "fifo"
SHORT_SLICE = "short-slice"
LEAF_WEIGHT = "leaf-weight"
NONE = "none"


@dataclass(frozen=True)
class SchedAttr:
    policy: int = SCHED_OTHER
    flags: int = 0
    nice: int = 0
    priority: int = 0
    runtime_ns: int = 0  # SCHED_OTHER: the custom slice (0 = the default)
    deadline_ns: int = 0
    period_ns: int = 0
    util_min: int = 0
    util_max: int = 0


def pack_sched_attr(attr: SchedAttr, size: int = SCHED_ATTR_SIZE) -> bytes:
    """``attr`` as the kernel's struct sched_attr of ``size`` bytes (48 or 56)."""
    if size not in (SCHED_ATTR_SIZE_VER0, SCHED_ATTR_SIZE):
        raise ValueError(f"sched_attr size must be 48 or 56, got {size}")
    raw = _SCHED_ATTR.pack(size, attr.policy, attr.flags, attr.nice, attr.priority,
                           attr.runtime_ns, attr.deadline_ns, attr.period_ns,
                           attr.util_min, attr.util_max)  # fmt: skip
    return raw[:size]


def sched_setattr(pid: int, attr: SchedAttr) -> None:
    """sched_setattr(2) for thread ``pid`` (0 = the caller); OSError when refused."""
    nr = _SYS_SCHED_SETATTR.get(platform.machine())
    if nr is None:
        raise OSError(f"sched_setattr: no syscall number known for {platform.machine()}")
    # VER0: no utilization clamps are set, and every kernel since 3.14 takes it.
    buf = ctypes.create_string_buffer(pack_sched_attr(attr, SCHED_ATTR_SIZE_VER0))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, pid, buf, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_fifo(prio: int, pid: int = 0) -> None:
    """SCHED_FIFO at ``prio`` with reset-on-fork; OSError when refused."""
    os.sched_setscheduler(pid, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(prio))


def set_short_slice(
    slice_us: int,
    pid: int = 0,
    setattr_: Callable[[int, SchedAttr], None] = sched_setattr,
) -> None:
    """SCHED_OTHER with a ``slice_us`` slice and reset-on-fork; OSError when refused."""
    setattr_(pid, SchedAttr(SCHED_OTHER, SCHED_FLAG_RESET_ON_FORK, runtime_ns=slice_us * 1000))


def set_plain(pid: int = 0, setattr_: Callable[[int, SchedAttr], None] = sched_setattr) -> None:
    """Plain SCHED_OTHER, nice 0, the default slice (what a job must run as)."""
    setattr_(pid, SchedAttr(SCHED_OTHER))


def set_deadline(runtime_us: int, period_us: int, pid: int = 0) -> None:
    """SCHED_DEADLINE (runtime every period) with reset-on-fork; OSError when refused.

    Not in :func:`choose_wakeup`'s chain (module docstring); the benchmark
    probes whether the kernel grants it to an agent.
    """
    sched_setattr(pid, SchedAttr(SCHED_DEADLINE, SCHED_FLAG_RESET_ON_FORK,
                                 runtime_ns=runtime_us * 1000, deadline_ns=period_us * 1000,
                                 period_ns=period_us * 1000))  # fmt: skip


def choose_wakeup(
    fifo_priority: int,
    slice_us: int,
    consequence: str,
    fifo: Callable[[int], None] = set_fifo,
    short_slice: Callable[[int], None] = set_short_slice,
    leaf_weight: Callable[[], None] | None = None,
) -> str:
    """The first of SCHED_FIFO, a short slice, a leaf weight that the kernel grants the caller.

    A mechanism given as 0 or None is skipped; ``leaf_weight`` raises OSError
    when it cannot be had. Logs once what was granted, and a warning with
    ``consequence`` when nothing was. Returns FIFO, SHORT_SLICE, LEAF_WEIGHT or NONE.
    """
    refused: list[str] = []
    if fifo_priority > 0:
        try:
            fifo(fifo_priority)
        except (OSError, AttributeError) as e:
            refused.append(f"SCHED_FIFO: {e}")
        else:
            # A GIL held by another thread (the metrics scrape) would delay us by
            # the switch interval (5 ms by default); keep that hand-off short.
            sys.setswitchinterval(0.0005)
            log.info("running at SCHED_FIFO priority %d", fifo_priority)
            return FIFO
    if slice_us > 0:
        try:
            short_slice(slice_us)
        except OSError as e:
            refused.append(f"short slice: {e}")
        else:
            sys.setswitchinterval(0.0005)
            log.info("running SCHED_OTHER with a %d us slice (%s)", slice_us,
                     "; ".join(refused) or "SCHED_FIFO not asked for")  # fmt: skip
            return SHORT_SLICE
    if leaf_weight is not None:
        try:
            leaf_weight()
        except OSError as e:
            refused.append(f"leaf weight: {e}")
        else:
            log.info("running SCHED_OTHER in a cgroup leaf weighted above the jobs' (%s)",
                     "; ".join(refused) or "SCHED_FIFO not asked for")  # fmt: skip
            return LEAF_WEIGHT
    if refused:
        log.warning("no prompt wake-up (%s): %s", "; ".join(refused), consequence)
    return NONE


def set_realtime(prio: int, consequence: str) -> bool:
    """SCHED_FIFO at ``prio`` for the calling thread, if permitted (0 = leave as is).

    RESET_ON_FORK makes children (jobs) start as SCHED_OTHER. ``consequence``
    completes the warning logged when the kernel refuses. Returns True if set.
    """
    return choose_wakeup(prio, 0, consequence) == FIFO
