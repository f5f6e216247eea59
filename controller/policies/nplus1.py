"""N + 1 gangs on N I/O devices (Wiseman & Feitelson 2003 §5: "a group of N + 1 gangs can be
dispatched, where N is the number of I/O devices").

Each gang (a matrix row) has a predicted demand vector over the devices, CPU first
(devices.py). The row whose turn it is runs with up to N partner rows, chosen so that

* no two of the gangs have the same *dominant* device (the component with the largest
  demand; ties go to the earlier device, so the CPU first), and
* on every device the summed demand plus the margin stays below the device:
  ``sum + m < 1`` — §2.4's pairing condition ``x + y + m < 100 %`` applied per device.

Partners are added one at a time, best fit first: among the rows that keep both rules,
the one with the largest demand on its own dominant device (§2.4's naive matcher, "the
partner with the largest y that fits", on the vector; equal values: the last in order,
as there). This is a choice: §5 gives no algorithm.

**N = 1** falls back to paired gang's rule (§2.4): one partner, the CPU alone decides
(``x + y + m < 1``), best fit — exactly :func:`matching.best_fit_match` on the CPU
components (a property test holds it to that). Paired gang's model counts what a job does
not spend on the CPU as I/O and lets two I/O-bound jobs share the disk (§4.1.2: they
"interfere with each other"), so at N = 1 the I/O device's sum is not checked; from N = 2
on it is, on every device.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from controller.policies.base import PolicyError
from controller.policies.matching import best_fit_match

K = TypeVar("K", bound=Hashable)


def dominant(vector: Sequence[float]) -> int:
    """Index of the largest demand (the earliest of equal ones: the CPU before I/O)."""
    if not vector:
        raise PolicyError("an empty demand vector")
    best = 0
    for i, v in enumerate(vector):
        if v > vector[best]:
            best = i
    return best


def fits_all(vectors: Sequence[Sequence[float]], margin: float) -> bool:
    """Every device's summed demand + ``margin`` < 1 (§2.4 per device)."""
    if not vectors:
        return True
    width = len(vectors[0])
    return all(sum(v[i] for v in vectors) + margin < 1.0 for i in range(width))


def nplus1_match(
    demands: Mapping[K, Sequence[float]], key: K, n: int, margin: float = 0.01
) -> tuple[K, ...]:
    """The partners of ``key`` for its quantum: at most ``n``, in the order chosen."""
    if n < 1:
        raise PolicyError(f"N must be >= 1, got {n}")
    if key not in demands:
        raise PolicyError(f"{key!r} has no demand vector")
    width = len(demands[key])
    if any(len(v) != width for v in demands.values()):
        raise PolicyError("demand vectors of different lengths")
    if n == 1:
        partner = best_fit_match({k: v[0] for k, v in demands.items()}, key, margin)
        return () if partner is None else (partner,)
    if n + 1 > width:
        raise PolicyError(f"N = {n} needs {n} I/O devices, the vectors have {width - 1}")
    chosen: list[K] = [key]
    used = {dominant(demands[key])}
    total = list(demands[key])
    for _ in range(n):
        best: K | None = None
        best_y, best_d = -1.0, -1
        for other, v in demands.items():
            if other in chosen:
                continue
            d = dominant(v)
            if d in used or not fits_all((total, v), margin):
                continue
            if v[d] >= best_y:
                best, best_y, best_d = other, v[d], d
        if best is None:
            break
        chosen.append(best)
        used.add(best_d)
        total = [t + x for t, x in zip(total, demands[best], strict=True)]
    return tuple(chosen[1:])
