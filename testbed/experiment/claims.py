"""What a paper says, what we measured, and the verdict: the one rule for every study.

A :class:`Claim` is one result of a paper's evaluation set beside our figure. Its verdict
follows :data:`RULES` (quoted at the top of docs/reproduction.md):

* **reproduced** — our figure is within the stated tolerance of the paper's (for a
  direction: the same direction) AND the difference between the schemes compared is
  larger than the seed-to-seed spread (a stated figure: within the tolerance in every
  seed, :func:`judge_value`);
* **direction only** — the same direction as the paper, but outside the tolerance, or a
  difference not larger than the seed-to-seed spread, or a single seed or run (no spread
  measured, so the difference cannot be told from noise);
* **not reproduced** — the opposite direction, or no difference where the paper reports
  one;
* **not attempted** — no committed result measures it (docs/reproduction.md says why).

The seed-to-seed spread of a difference is measured on its per-seed values: each seed is
one workload both schemes ran, so the difference is taken seed by seed (:func:`judge`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    REPRODUCED = "reproduced"
    DIRECTION = "direction only"
    NOT_REPRODUCED = "not reproduced"
    NOT_ATTEMPTED = "not attempted"


RULES = (
    "**reproduced**: our figure is within the stated tolerance of the paper's (for a "
    "stated direction: the same direction) *and* the difference between the schemes "
    "compared is larger than its seed-to-seed spread: it has the same sign in every seed "
    "and its mean is larger than half the range of its per-seed values. A figure the paper "
    "states, where no two schemes are compared: within its tolerance in every one of "
    "several seeds.",
    "**direction only**: the same direction as the paper, but outside the stated "
    "tolerance, or a difference not larger than its seed-to-seed spread, or one seed or "
    "one run only (nothing to tell the difference from noise); a stated figure within its "
    "tolerance in one seed or run only, or not in every seed.",
    "**not reproduced**: the opposite direction (or no difference where the paper "
    "reports one), in the mean over the seeds; a stated figure outside its tolerance.",
    "**not attempted**: no committed result measures it; the row says why.",
)

# worst first: a claim checked in several conditions takes the worst verdict
_ORDER = (Verdict.NOT_REPRODUCED, Verdict.DIRECTION, Verdict.REPRODUCED, Verdict.NOT_ATTEMPTED)


@dataclass(frozen=True)
class Claim:
    """One result of a paper's evaluation beside ours."""

    id: str  # stable, e.g. "rajaei2008/fig5/gang-greedy"; docs/reproduction.md cites it
    where: str  # the paper's section, figure or table
    says: str  # what the paper says (quoted or close to it)
    measured: str  # what we measured, with the figures
    verdict: Verdict
    why: str = ""  # how the verdict follows from the rules (tolerance, spread)


@dataclass(frozen=True)
class Difference:
    """A difference between two schemes, per seed (one value: one seed or one run)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, a: Sequence[float], b: Sequence[float]) -> Difference:
        """Seed by seed ``a - b`` (the two lists in the same seed order)."""
        if len(a) != len(b) or not a:
            raise ValueError("per-seed values of both schemes, in the same seed order")
        return cls(tuple(x - y for x, y in zip(a, b, strict=True)))

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def spread(self) -> float | None:
        """Half the range of the per-seed values; None for one seed."""
        if len(self.values) < 2:
            return None
        return (max(self.values) - min(self.values)) / 2

    def beyond_spread(self) -> bool:
        """Same sign in every seed and a mean larger than the spread."""
        s = self.spread
        if s is None or self.mean == 0:
            return False
        same = all(math.copysign(1, v) == math.copysign(1, self.mean) and v != 0
                   for v in self.values)  # fmt: skip
        return same and abs(self.mean) > s

    def text(self, fmt: str = "{:+.1f}") -> str:
        if self.spread is None:
            return fmt.format(self.mean) + " (one seed)"
        per = ", ".join(fmt.format(v) for v in self.values)
        return f"{fmt.format(self.mean)} (per seed {per}; spread ±{self.spread:.2g})"


def judge(diff: Difference, sign: int, within: bool | None = None) -> tuple[Verdict, str]:
    """The verdict for a difference the paper says has ``sign`` (+1: the first scheme
    higher, -1: lower) and, where it states a figure, whether ours is ``within`` its
    tolerance (None: a direction only is stated)."""
    m = diff.mean
    if m == 0 or math.copysign(1, m) != sign:
        return Verdict.NOT_REPRODUCED, "the opposite direction" if m else "no difference"
    if diff.spread is None:
        return Verdict.DIRECTION, "one seed or run: no seed-to-seed spread to tell it from noise"
    if not diff.beyond_spread():
        return Verdict.DIRECTION, "the difference is not larger than its seed-to-seed spread"
    if within is False:
        return Verdict.DIRECTION, "outside the stated tolerance"
    return Verdict.REPRODUCED, (
        "within the stated tolerance and " if within else ""
    ) + "beyond the seed-to-seed spread"


def judge_value(within: Sequence[bool], tolerance: str) -> tuple[Verdict, str]:
    """The verdict for a figure the paper states, held to ``tolerance``: ``within[0]`` says
    whether ours (the mean over the seeds) is within it, ``within[1:]`` whether each
    seed's figure is (none: one seed or run). A figure within its tolerance in one seed
    only is not told from noise (direction only), nor one that some seed takes outside it
    (the seed-to-seed spread crosses the tolerance)."""
    if not within[0]:
        return Verdict.NOT_REPRODUCED, f"outside {tolerance}"
    per_seed = within[1:]
    if len(per_seed) < 2:
        return Verdict.DIRECTION, (
            f"within {tolerance}, but one seed or run: no seed-to-seed spread to tell it from noise"
        )
    if not all(per_seed):
        return Verdict.DIRECTION, (
            f"within {tolerance} in the mean, not in every seed: the seed-to-seed spread crosses it"
        )
    return Verdict.REPRODUCED, f"within {tolerance} in every seed"


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict of a claim checked in several conditions: the worst of them."""
    if not verdicts:
        return Verdict.NOT_ATTEMPTED
    return min(verdicts, key=_ORDER.index)


def terminal(claims: Sequence[Claim], width: int = 0) -> str:
    """What the terminal shows after a run (a study's ``summary``): one line per claim,
    its verdict first, right-aligned in ``width`` columns."""
    return "\n".join(f"{str(c.verdict).rjust(width)}: {c.where}: {c.measured}" for c in claims)


def markdown(claims: Sequence[Claim], heading: str = "## The paper beside ours") -> list[str]:
    """A report's section: paper says / we measured / verdict."""
    lines = [heading, "", "| where | the paper says | we measured | verdict |", "|---|---|---|---|"]
    for c in claims:
        why = f" ({c.why})" if c.why else ""
        lines.append(f"| {c.where} | {c.says} | {c.measured} | **{c.verdict}**{why} |")
    lines += ["", "Verdicts by the rules of docs/reproduction.md.", ""]
    return lines
