"""Committed results against the git history (starts git, so the live tier): a recorded
commit a rebase left off main is explained in its note (testbed/experiment/results.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = sorted((REPO / "docs" / "results").rglob("results.json"))


def _git(*argv: str) -> int:
    return subprocess.run(["git", "-C", str(REPO), *argv], capture_output=True).returncode


@pytest.mark.parametrize(
    "path", RESULTS, ids=[str(p.parent.relative_to(REPO / "docs" / "results")) for p in RESULTS]
)
def test_a_recorded_commit_off_the_history_is_explained(path: Path) -> None:
    """A run made on a branch that was rebased before it merged records a commit main never
    had: its note must say so (testbed/experiment/results.py). A commit this clone does
    not hold (a shallow checkout) cannot be judged and passes."""
    made = json.loads(path.read_text())["made"]
    commit = made["commit"]
    if not commit or _git("cat-file", "-e", f"{commit}^{{commit}}") != 0:
        return
    if _git("merge-base", "--is-ancestor", commit, "HEAD") != 0:
        assert "is not on main" in made["note"], f"{path}: commit {commit[:10]} unexplained"
