"""agent/realtime.py: struct sched_attr packing and the choice of a wake-up mechanism by
what the kernel refuses (fake syscalls; nothing here changes a real scheduling class)."""

from __future__ import annotations

import logging
import struct

import pytest

from agent import realtime
from agent.realtime import (
    FIFO,
    LEAF_WEIGHT,
    NONE,
    SCHED_DEADLINE,
    SCHED_FLAG_RESET_ON_FORK,
    SHORT_SLICE,
    SchedAttr,
    choose_wakeup,
    pack_sched_attr,
    set_plain,
    set_short_slice,
)


def test_sched_attr_layout_is_the_kernels() -> None:
    a = SchedAttr(SCHED_DEADLINE, 1, nice=-3, priority=7, runtime_ns=2, deadline_ns=3,
                  period_ns=4, util_min=5, util_max=6)  # fmt: skip
    raw = pack_sched_attr(a)
    assert len(raw) == 56
    # u32 size, u32 policy, u64 flags, s32 nice, u32 prio, u64 runtime/deadline/period, u32 x2
    assert struct.unpack_from("<I", raw, 0)[0] == 56
    assert struct.unpack_from("<I", raw, 4)[0] == SCHED_DEADLINE
    assert struct.unpack_from("<Q", raw, 8)[0] == 1
    assert struct.unpack_from("<i", raw, 16)[0] == -3
    assert struct.unpack_from("<I", raw, 20)[0] == 7
    assert struct.unpack_from("<QQQ", raw, 24) == (2, 3, 4)
    assert struct.unpack_from("<II", raw, 48) == (5, 6)


def test_sched_attr_ver0_is_the_first_48_bytes_with_its_own_size() -> None:
    a = SchedAttr(runtime_ns=100_000, util_max=1024)
    v0 = pack_sched_attr(a, 48)
    assert len(v0) == 48 and struct.unpack_from("<I", v0, 0)[0] == 48
    assert v0[4:] == pack_sched_attr(a)[4:48]
    with pytest.raises(ValueError, match="48 or 56"):
        pack_sched_attr(a, 40)


def test_short_slice_asks_for_a_fair_task_with_reset_on_fork() -> None:
    calls: list[tuple[int, SchedAttr]] = []
    set_short_slice(100, pid=42, setattr_=lambda pid, a: calls.append((pid, a)))
    set_plain(pid=7, setattr_=lambda pid, a: calls.append((pid, a)))
    (pid, a), (pid2, plain) = calls
    assert pid == 42 and a.policy == realtime.SCHED_OTHER and a.runtime_ns == 100_000
    assert a.flags & SCHED_FLAG_RESET_ON_FORK  # jobs forked by the agent start plain
    assert pid2 == 7 and plain == SchedAttr()  # default slice, nice 0, no flags


class Kernel:
    """A fake kernel that refuses the mechanisms named in ``refuse`` with EPERM."""

    def __init__(self, *refuse: str) -> None:
        self.refuse = set(refuse)
        self.calls: list[tuple[str, int]] = []

    def fifo(self, prio: int) -> None:
        self.calls.append((FIFO, prio))
        if FIFO in self.refuse:
            raise PermissionError(1, "Operation not permitted")

    def slice(self, us: int) -> None:
        self.calls.append((SHORT_SLICE, us))
        if SHORT_SLICE in self.refuse:
            raise OSError(22, "Invalid argument")

    def leaf(self) -> None:
        self.calls.append((LEAF_WEIGHT, 0))
        if LEAF_WEIGHT in self.refuse:
            raise OSError("not in its leaf")


def _choose(k: Kernel, prio: int = 10, slice_us: int = 100, leaf: bool = False) -> str:
    return choose_wakeup(prio, slice_us, "thaws late", fifo=k.fifo, short_slice=k.slice,
                         leaf_weight=k.leaf if leaf else None)  # fmt: skip


def test_fifo_when_granted_and_nothing_else_asked_for() -> None:
    k = Kernel()
    assert _choose(k, leaf=True) == FIFO and k.calls == [(FIFO, 10)]


def test_short_slice_when_fifo_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel(FIFO)
    with caplog.at_level(logging.INFO, logger="agent.realtime"):
        assert _choose(k, leaf=True) == SHORT_SLICE
    assert k.calls == [(FIFO, 10), (SHORT_SLICE, 100)]
    # logged once, at info, with why SCHED_FIFO was not had; no warning
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "100 us slice" in caplog.text and "Operation not permitted" in caplog.text


def test_leaf_weight_when_the_others_are_refused_or_not_asked_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    k = Kernel(FIFO, SHORT_SLICE)
    with caplog.at_level(logging.INFO, logger="agent.realtime"):
        assert _choose(k, leaf=True) == LEAF_WEIGHT
    assert k.calls == [(FIFO, 10), (SHORT_SLICE, 100), (LEAF_WEIGHT, 0)]
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "weighted above the jobs" in caplog.text and "Invalid argument" in caplog.text
    k = Kernel(FIFO)
    assert _choose(k, slice_us=0, leaf=True) == LEAF_WEIGHT  # the agent's default
    assert k.calls == [(FIFO, 10), (LEAF_WEIGHT, 0)]


def test_none_when_all_are_refused_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel(FIFO, SHORT_SLICE, LEAF_WEIGHT)
    with caplog.at_level(logging.INFO, logger="agent.realtime"):
        assert _choose(k, leaf=True) == NONE
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "SCHED_FIFO" in caplog.text and "short slice" in caplog.text
    assert "leaf weight: not in its leaf" in caplog.text and "thaws late" in caplog.text


def test_a_mechanism_given_as_zero_is_not_tried(caplog: pytest.LogCaptureFixture) -> None:
    k = Kernel()
    assert _choose(k, prio=0) == SHORT_SLICE and k.calls == [(SHORT_SLICE, 100)]
    k = Kernel()
    with caplog.at_level(logging.INFO, logger="agent.realtime"):
        assert _choose(k, prio=0, slice_us=0) == NONE
    assert k.calls == [] and not caplog.records  # nothing asked, nothing to warn about
