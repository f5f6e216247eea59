"""NPB's pseudo-random generator ``randlc`` / ``vranlc`` (NPB report RNR-94-007 §2.2).

The linear congruential generator x_{k+1} = a * x_k mod 2^46 with
a = 5^13 = 1220703125, each draw returned as x_k * 2^-46 in (0, 1). NPB
computes it with split double-precision arithmetic so it is exact on any
machine; here Python integers (scalar) and unsigned 64-bit numpy arithmetic
(vector) give the same exact integers: 2^46 divides 2^64, so the product
a * x taken modulo 2^64 (what uint64 multiplication wraps to) has the right
remainder modulo 2^46.

Every kernel (CG's matrix, FT's initial field, IS's keys) draws from this
generator, so every rank can jump straight to its own part of a sequence
with :func:`skip` instead of generating the parts of the other ranks.
"""

from __future__ import annotations

import numpy as np

A = 1220703125  # 5**13
MOD = 1 << 46
MASK = MOD - 1
R46 = 2.0**-46
SEED = 314159265


class Randlc:
    """A scalar stream: ``next()`` is NPB's ``randlc(&x, a)``."""

    __slots__ = ("a", "x")

    def __init__(self, seed: float | int = SEED, a: int = A) -> None:
        self.x = int(seed)
        self.a = int(a)

    def next(self) -> float:
        self.x = (self.a * self.x) & MASK
        return self.x * R46


def power(a: int, n: int) -> int:
    """a^n mod 2^46 (NPB's ``ipow46``)."""
    return pow(int(a), int(n), MOD)


def skip(seed: int, n: int, a: int = A) -> int:
    """The generator state after ``n`` draws from ``seed`` (no draws made)."""
    return (int(seed) * power(a, n)) & MASK


def vranlc_ints(n: int, seed: int, a: int = A) -> np.ndarray:
    """The next ``n`` states after ``seed`` as uint64 integers (NPB's ``vranlc``).

    Built by doubling: the states k+1..2k are the states 1..k times a^k.
    """
    if n <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = np.empty(n, dtype=np.uint64)
    out[0] = (int(seed) * int(a)) & MASK
    have = 1
    with np.errstate(over="ignore"):
        while have < n:
            take = min(have, n - have)
            mult = np.uint64(power(a, have))
            out[have : have + take] = (out[:take] * mult) & np.uint64(MASK)
            have += take
    return out


def vranlc(n: int, seed: int, a: int = A) -> np.ndarray:
    """The next ``n`` draws after ``seed`` as doubles in (0, 1)."""
    return vranlc_ints(n, seed, a).astype(np.float64) * R46
