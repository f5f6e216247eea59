"""Where an agent's loop spends its time per quantum boundary, from its SIGUSR2 profiles.

An agent's loop thread profiled between two SIGUSR2 (agent/profile.py) leaves a pstats
file; benchmarks/gang_quantum_loss.py ``--profile`` takes one per agent during a 10 ms
strict-gang run. This reads such files and splits the loop's time into the parts of a
switch (issue 32 item 2; agent/profile.py ``breakdown`` says how). cProfile times every
Python call, so a profiled loop runs slower than an unprofiled one and Python-heavy parts
look dearer than system calls: the split says where the time goes, the unprofiled
agents' CPU in the same benchmark says how much there is.

    .venv/bin/python benchmarks/agent_boundary_cost.py profile-*.pstats
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.profile import breakdown, load, report


def main(argv: list[str]) -> int:
    if not argv:
        print("agent_boundary_cost: give one or more .pstats files (agent/profile.py)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        stats = load(argv)
    except (OSError, TypeError, ValueError, EOFError) as e:
        print(f"agent_boundary_cost: cannot read {' '.join(argv)}: {e}", file=sys.stderr)
        return 2
    parts, n = breakdown(stats)
    print("\n".join(report(parts, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
