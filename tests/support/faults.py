"""What the fault tests share: the cycle count (FAULT_CYCLES), the quantum, the agents'
fail-safe, and jobs that burn a known amount of CPU (and, for the fault cycles, on
until the test lets them end)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CYCLES = int(os.environ.get("FAULT_CYCLES", "5"))


QUANTUM = 0.1


FAILSAFE_S = 2.0  # the local cluster's agents (agent --failsafe-timeout default)


def burn_until(stop: Path, iterations: int = 12_000_000) -> list[str]:
    """A rank that burns ``iterations`` additions (12 million: ~1 s of CPU) and goes on
    burning until ``stop`` exists: it ends only when it was really scheduled for its
    share, and never before the test lets it, so every fault of a cycle lands mid-run
    however fast the host is (a fixed amount of work had to be sized for an idle host,
    and ran on for a minute after the cycles on a loaded one)."""
    code = (
        "import os\n"
        "x = i = 0\n"
        "while True:\n"
        "    for j in range(100_000): x += j\n"
        "    i += 100_000\n"
        f"    if i >= {iterations} and os.path.exists({str(stop)!r}): break\n"
    )
    return [sys.executable, "-c", code]
