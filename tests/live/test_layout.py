"""The tests of tests/unit/test_layout.py that start processes or sockets."""

from __future__ import annotations

import subprocess
import sys

from tests.support.tiers import REPO

SCHEDULER = "controller.scheduler"


def test_importing_the_families_loads_no_scheduler() -> None:
    """Not even through another module (the AST test sees direct imports only)."""
    code = f"import sys, controller.families; print({SCHEDULER!r} in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False", out.stderr
