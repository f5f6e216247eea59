"""The synthetic program's compute loop's cost on this host, ns per iteration.

Studies size their jobs' compute (G_comp) from it; the figure drifts with the host's
speed (docs/experiments.md), so each live study measures it when it starts. It is the
program's own measurement (``python -m apps.synthetic --loop-cost``), best of three.
"""

from __future__ import annotations


def ns_per_iteration() -> float:
    from apps.synthetic import loop_cost

    return float(loop_cost(500_000, 8193, None, None)["ns_per_iteration"])
