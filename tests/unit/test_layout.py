"""The controller's layout rules: families never see the scheduler module, and no
module of controller/ grows past 500 lines (docs/contributing.md says why)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = REPO / "controller"
FAMILIES = CONTROLLER / "families"
SCHEDULER = "controller.scheduler"
MAX_LINES = 500


def _imports(path: Path) -> set[str]:
    """Every module a file imports, under TYPE_CHECKING too (``from a import b``: a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", sorted(FAMILIES.glob("*.py")), ids=lambda p: p.name)
def test_a_family_does_not_import_the_scheduler(path: Path) -> None:
    assert SCHEDULER not in _imports(path), (
        f"{path.relative_to(REPO)} imports {SCHEDULER}: a family sees the core only through"
        " controller.families.base.Core"
    )


def test_the_import_check_sees_type_checking_imports(tmp_path: Path) -> None:
    f = tmp_path / "fam.py"
    f.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from controller.scheduler import Scheduler\n"
    )
    assert SCHEDULER in _imports(f)


@pytest.mark.parametrize(
    "path", sorted(CONTROLLER.rglob("*.py")), ids=lambda p: str(p.relative_to(CONTROLLER))
)
def test_no_controller_module_exceeds_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.relative_to(REPO)} has {lines} lines (> {MAX_LINES}): split it by concept"
        " (docs/contributing.md)"
    )
