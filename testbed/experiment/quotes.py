"""Docs quote only what committed results hold: the numbers of docs/ checked against them.

Every page of docs/ and README.md (:func:`checked`; :data:`UNCHECKED` lists, with its
reason, each page or part left out) may quote a number with a decimal point or a
percentage only if a committed source holds it: a report generated from a results
file (docs/results/**/report.md, written from its results.json) or a printed output
committed beside results (docs/results/**/*.txt), the execution model
`cosched calibrate` measured (experiments/calibration.toml), a spec's parameter
(experiments/*.toml), or the paper being discussed (its figure, quoted). A number matches
when a source prints it, or prints it with more decimals and rounds to it (57.14 -> 57.1);
a fraction matches its percentage (0.64 -> 64 %). A page's sources are the reports it
links to or names (docs/results/NAME/), not every report, so a number is checked against
the results it is about. Code spans, code blocks and link targets
are not prose and are skipped. :data:`NOT_RESULTS` lists, with its reason, each remaining
number that is not a result (a hardware fact, a constant of the code).

A generated page is checked like any other: docs/reproduction.md (``cosched experiment
ledger``) quotes the reports it names, and each of those is rebuilt byte for byte from its
results.json by the same test, so its numbers are checked against the data they came from.

The test tests/unit/test_committed_results.py fails on any other number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from testbed.experiment.results import REPO

#: pages checked only in part ("page#heading": that section)
SECTIONS: tuple[str, ...] = ()

#: (page, why its numbers are not checked): none left; a page named here must say why
UNCHECKED: tuple[tuple[str, str], ...] = ()
PAPERS = Path("/work/shared/seeds")  # the papers' texts, where present

#: (page, number, why it is not a result)
NOT_RESULTS: tuple[tuple[str, str, str], ...] = (
    (
        "docs/experiments.md",
        "0.54",
        "BT's seconds per repetition by `cosched app run`: how "
        "the spec's npb_reps were chosen, not a result",
    ),
    ("docs/experiments.md", "0.72", "SP's seconds per repetition, likewise"),
    ("README.md", "3.11", "the Python version the commands need"),
    ("docs/monitoring.md", "2.42", "the version of Debian's Prometheus package"),
    ("docs/workloads.md", "6.5", "a QCRD phase's share of the job: the profile's definition"),
    ("docs/apps.md", "3.75", "75 ms / 20 writes: the io preset's device wait, by definition"),
    ("docs/cluster.md", "802.3", "the IEEE standards' names (802.3ab, 802.3u)"),
    ("docs/cluster.md", "22.04", "an Ubuntu release"),
)

_NUM = re.compile(r"(?<![\w.§/-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?(?![\w.]*\.\w)")
# in the sources a number may carry a sign ("-1.90", "+6.2%")
_SRC = re.compile(r"(?<![\w.§/])(?:[-+−])?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?")


@dataclass(frozen=True, order=True)
class Quote:
    page: str
    line: int
    number: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.number}"


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the prose: no code blocks, code spans or link targets."""
    out = []
    fenced = False
    for k, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        out.append((k, line))
    return out


def numbers(text: str) -> Iterable[tuple[int, str, int, bool]]:
    """(line, the number as written, decimals, a percentage) of each checked number."""
    for k, line in _prose(text):
        for m in _NUM.finditer(line):
            whole, frac, pct = m.group(1), m.group(2) or "", bool(m.group(3))
            if not frac and not pct:
                continue  # counts, sizes, figures and sections
            yield k, whole.replace(",", "") + frac, len(frac) - 1 if frac else 0, pct


Token = tuple[str, bool]  # (the number as printed, printed as a percentage)


def _tokens(text: str) -> set[Token]:
    return {(a.replace(",", "") + (b or ""), bool(c)) for a, b, c in _SRC.findall(text)}


def cited(page_text: str, root: Path = REPO) -> list[Path]:
    """The results folders a page links to or names (docs/results/NAME/...)."""
    names = set(
        re.findall(r"results/([\w.-]+(?:/[\w.-]+)*?)/(?:report\.md|results\.json)?", page_text)
    )
    out = []
    for n in sorted(names):
        d = root / "docs" / "results" / n
        if d.is_dir():
            out.append(d)
    return out


def sources(page_text: str, root: Path = REPO) -> set[Token]:
    """Every number the sources of a page print (module docstring)."""
    found: set[Token] = set()
    folders = cited(page_text, root) or [root / "docs" / "results"]
    for d in folders:
        for p in sorted([*d.rglob("*.md"), *d.rglob("*.txt")]):
            found |= _tokens(p.read_text())
    for p in sorted((root / "experiments").glob("*.toml")):
        # a measured value kept with all its digits (calibration.toml) is quoted rounded,
        # and a time kept in seconds is quoted in ms
        for tok, pct in _tokens(p.read_text()):
            found.add((tok, pct))
            if "." in tok and not pct:
                v = float(tok)
                found |= {(f"{v:.{d}f}", False) for d in (1, 2, 3)}
                if abs(v) < 1:
                    found |= {(f"{v * 100:.{d}f}", True) for d in (0, 1)}
                    found |= {(f"{v * 1000:.{d}f}", False) for d in (1, 2)}
    if PAPERS.is_dir():
        for p in sorted(PAPERS.glob("*.txt")):
            found |= _tokens(p.read_text(errors="replace"))
    return found


def _matches(number: str, decimals: int, pct: bool, held: set[Token]) -> bool:
    if (number, pct) in held or (not pct and (number, True) in held):
        return True
    want = float(number)
    for tok, tok_pct in held:
        v = float(tok)
        tok_dec = len(tok.split(".")[1]) if "." in tok else 0
        rounds = decimals <= tok_dec <= decimals + 2 and round(v, decimals) == want
        if rounds and (tok_pct == pct or not pct):
            return True
        # a fraction printed where the page quotes its percentage (0.64 -> 64 %)
        as_pct = v < 1 and tok_dec == decimals + 2 and round(v * 100, decimals) == want
        if pct and not tok_pct and as_pct:
            return True
    return False


def _section(text: str, heading: str) -> str:
    """The section of a page under ``## heading...`` (the whole page without a heading);
    the lines before it are blanked so line numbers stay the page's."""
    if not heading:
        return text
    lines = text.splitlines()
    start = next(k for k, s in enumerate(lines) if s.startswith(f"## {heading}"))
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
    return "\n" * start + "\n".join(lines[start:end])


def checked(root: Path = REPO) -> list[str]:
    """The pages (or "page#heading" sections) whose numbers are checked: every page of
    docs/ and README.md but those :data:`UNCHECKED` names, so a new page is checked."""
    skip = {page for page, _ in UNCHECKED}
    pages = ["README.md", *(p.relative_to(root).as_posix() for p in (root / "docs").glob("*.md"))]
    whole = [p for p in sorted(pages) if p not in skip]
    parts = [s for s in SECTIONS if s.partition("#")[0] in skip]
    return whole + [s for s in parts if (root / s.partition("#")[0]).exists()]


def unsourced(root: Path = REPO) -> list[Quote]:
    """Every checked number no source holds (and that NOT_RESULTS does not explain)."""
    allowed = {(page, num) for page, num, _ in NOT_RESULTS}
    out = []
    for entry in checked(root):
        page, _, heading = entry.partition("#")
        text = _section((root / page).read_text(), heading)
        held = sources(text, root)
        for k, number, decimals, pct in numbers(text):
            if (page, number) in allowed or _matches(number, decimals, pct, held):
                continue
            out.append(Quote(page, k, number + (" %" if pct else "")))
    return sorted(out)
