"""What tests/unit/testbed/sim/cdc/test_workload.py
and tests/live/testbed/sim/cdc/test_workload.py share."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.cli import main

REPO = Path(__file__).resolve().parents[2]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err
