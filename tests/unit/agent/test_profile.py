"""The SIGUSR2 loop profile (agent/profile.py): on, off, a file naming what ran between."""

from __future__ import annotations

import os
import pstats
import signal
from pathlib import Path

from agent.profile import LoopProfile


def _between() -> int:
    return sum(range(100))


def test_two_toggles_write_a_profile_of_what_ran_between(tmp_path: Path) -> None:
    lp = LoopProfile(lambda: tmp_path)
    lp.toggle()
    assert lp.prof is not None and not lp.written
    _between()
    lp.toggle()
    assert lp.prof is None and len(lp.written) == 1
    names = {fn for _, _, fn in pstats.Stats(str(lp.written[0])).stats}
    assert "_between" in names


def test_the_signal_toggles_it(tmp_path: Path) -> None:
    lp = LoopProfile(lambda: tmp_path)
    old = signal.getsignal(signal.SIGUSR2)
    try:
        lp.install()
        os.kill(os.getpid(), signal.SIGUSR2)
        _between()
        os.kill(os.getpid(), signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert [p.name for p in lp.written] == [f"profile-{os.getpid()}-1.pstats"]


def test_an_unwritable_directory_is_one_warning(tmp_path: Path) -> None:
    lp = LoopProfile(lambda: tmp_path / "missing")
    lp.toggle()
    lp.toggle()
    assert lp.written == [] and lp.prof is None
