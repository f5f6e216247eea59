"""benchmarks/agent_boundary_cost.py splits a profiled agent's time into a switch's parts."""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

from tests.support.agent_fakes import PARENT, add_fake_job, make_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from agent_boundary_cost import REST, breakdown, report  # noqa: E402


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
