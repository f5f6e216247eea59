"""The SIGUSR2 loop profile (agent/profile.py): on, off, a file naming what ran between."""

from __future__ import annotations

import cProfile
import os
import pstats
import signal
from pathlib import Path

from agent.profile import REST, LoopProfile, breakdown, report
from tests.support.agent_fakes import PARENT, add_fake_job, make_agent


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


def test_applies_split_into_their_parts(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path)
    agent.driver.ensure_parent(PARENT)
    add_fake_job(agent, "a")
    add_fake_job(agent, "b")
    prof = cProfile.Profile()
    prof.enable()
    for k in range(20):
        agent.apply({"ab"[k % 2]: 100}, frozenset())
    prof.disable()
    path = tmp_path / "p.pstats"
    prof.dump_stats(str(path))
    parts, n = breakdown(pstats.Stats(str(path)).stats)  # type: ignore[attr-defined]
    assert n == 20
    for p in ("freeze: write + confirm", "thaw: write + confirm", "CPU accounting",
              "switch bookkeeping"):  # fmt: skip
        assert parts.get(p, 0.0) > 0, (p, parts)
    assert "network accounting" not in parts  # not asked for, not read
    # everything the applies did lies under a part; the test's own frame is the rest
    assert parts.get(REST, 0.0) < 0.1 * sum(parts.values())
    lines = report(parts, n)
    assert lines[0].startswith("20 boundaries") and any("CPU accounting" in x for x in lines)
