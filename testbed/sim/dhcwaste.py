"""Processing power wasted by gang scheduling (Feitelson & Rudolph 1996 §4).

* The off-line bounds under DHC-like partitioning into power-of-two blocks (§4.1):
  closed forms of Claims 1 and 2 (:data:`BOUNDS`), the total-disabling waste of a
  discrete size table (each gang rounded up to its block,
  :func:`offline_total_waste`), and an off-line packer with selective disabling
  (:func:`offline_selective_waste`): gangs largest first, each into the smallest
  free aligned block that holds its block, the rest of its block (the maximal
  subtrees it leaves untouched) freed for smaller gangs. The packer is one
  arrangement, so its waste is an upper estimate of the optimum the claims give.
* The on-line FCFS best-fit waste without the power-of-two restriction (§4.2,
  Fig. 18): unit execution times (next fit: a round takes gangs in order until the
  next one does not fit) and exponential execution times with mean 5 (gangs keep
  their PEs across rounds; a new gang takes the smallest free run of contiguous
  PEs that holds it; freed runs merge with their neighbours). The paper does not
  say whether its unrestricted blocks are contiguous; we take contiguous runs, as
  in the memory allocators it compares with (docs/dhc.md).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

from testbed.sim.dhc import size_sampler

LN2, LN3 = math.log(2), math.log(3)
#: Claims 1 and 2 and §4.1's powers of two: (total disabling, selective disabling).
BOUNDS: dict[str, tuple[float, float]] = {
    "uniform": (0.25, 0.20),
    "harmonic": ((2 * LN2 - 1) / (2 * LN2), (8 * LN2 - LN3 - 4) / (8 * LN2 - LN3)),
    "pow2": (0.0, 0.0),
}


def block_of(size: int) -> int:
    return 1 << max(0, (size - 1).bit_length())


def size_table(dist: str, pes: int, gangs: int) -> list[int]:
    """``gangs`` sizes in the exact proportions of ``dist`` (the §4.1 table)."""
    sizes, probs = size_sampler(dist, pes, random.Random(0))
    out: list[int] = []
    for s, p in zip(sizes, probs, strict=True):
        out += [s] * round(p * gangs)
    return out


def offline_total_waste(sizes: Sequence[int]) -> float:
    """Total disabling: every gang alone in its power-of-two block (internal waste)."""
    used = sum(sizes)
    blocks = sum(block_of(s) for s in sizes)
    return 1 - used / blocks


def offline_selective_waste(sizes: Sequence[int], pes: int) -> float:
    """Selective disabling, packed largest first (see the module docstring)."""
    free: dict[int, int] = {}  # free aligned block size -> how many
    columns = 0
    for s in sorted(sizes, reverse=True):
        b = block_of(s)
        fit = min((k for k, n in free.items() if n and k >= b), default=None)
        if fit is None:
            columns += 1
            fit = pes
            free[pes] = free.get(pes, 0) + 1
        free[fit] -= 1
        while fit > b:  # split the buddy: the other half stays free
            fit //= 2
            free[fit] = free.get(fit, 0) + 1
        rest = b - s  # the untouched subtrees of its own block
        k = 1
        while rest:
            if rest & k:
                free[k] = free.get(k, 0) + 1
                rest -= k
            k <<= 1
    return 1 - sum(sizes) / (columns * pes)


def fcfs_unit_waste(dist: str, pes: int, rounds: int, rng: random.Random) -> float:
    """Unit execution times: next-fit rounds (Fig. 18, lower curves)."""
    sizes, probs = size_sampler(dist, pes, rng)
    nxt = rng.choices(sizes, probs)[0]
    wasted = 0
    for _ in range(rounds):
        used = 0
        while used + nxt <= pes:
            used += nxt
            nxt = rng.choices(sizes, probs)[0]
        wasted += pes - used
    return wasted / (rounds * pes)


def fcfs_exp_waste(
    dist: str, pes: int, rounds: int, rng: random.Random, mean: float = 5.0, warmup: int = 100
) -> float:
    """Exponential execution times (mean 5): best fit into contiguous free runs."""
    sizes, probs = size_sampler(dist, pes, rng)
    holes: list[tuple[int, int]] = [(0, pes)]  # sorted (start, length) free runs
    running: list[tuple[float, int, int]] = []  # (end time, start, length)
    nxt = rng.choices(sizes, probs)[0]
    wasted = 0
    for r in range(rounds + warmup):
        # gangs whose time is up leave; their runs merge with free neighbours
        keep = []
        for end, start, length in running:
            if end <= r:
                i = bisect.bisect(holes, (start, length))
                holes.insert(i, (start, length))
            else:
                keep.append((end, start, length))
        running = keep
        merged: list[tuple[int, int]] = []
        for start, length in holes:
            if merged and merged[-1][0] + merged[-1][1] == start:
                merged[-1] = (merged[-1][0], merged[-1][1] + length)
            else:
                merged.append((start, length))
        holes = merged
        while True:  # FCFS: the head goes first or nobody does
            fits = [(length, start) for start, length in holes if length >= nxt]
            if not fits:
                break
            length, start = min(fits)
            holes.remove((start, length))
            if length > nxt:
                bisect.insort(holes, (start + nxt, length - nxt))
            running.append((r + max(1, math.ceil(rng.expovariate(1 / mean))), start, nxt))
            nxt = rng.choices(sizes, probs)[0]
        if r >= warmup:
            wasted += sum(length for _, length in holes)
    return wasted / (rounds * pes)
