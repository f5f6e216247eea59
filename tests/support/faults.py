"""What the fault tests share: the cycle count (FAULT_CYCLES), the quantum, the agents'
fail-safe and a job that burns a known amount of CPU."""

from __future__ import annotations

import os
import sys

CYCLES = int(os.environ.get("FAULT_CYCLES", "5"))


QUANTUM = 0.1


FAILSAFE_S = 2.0  # the local cluster's agents (agent --failsafe-timeout default)


# ~3 s of CPU each: they finish only if they are really scheduled
BURN = [sys.executable, "-c", "x = 0\nfor i in range(36_000_000): x += i"]


# ~1 s of CPU: for a test whose claim is about jobs carried across a restart, not about
# work lasting through several fault cycles (ten of these still need 15 s of node time)
BURN_SHORT = [sys.executable, "-c", "x = 0\nfor i in range(12_000_000): x += i"]
