"""The tests of tests/unit/testbed/commands/test_app.py that start processes or sockets."""

from __future__ import annotations

import json

import pytest

from testbed.cli import main


def test_run_synthetic_ranks_locally_and_pass_extra_args(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["app", "run", "synthetic", "--ranks", "2", "--", "--iterations", "7",
                 "--gcomp", "1000"]) == 0  # fmt: skip
    lines = [json.loads(x) for x in capfd.readouterr().out.strip().splitlines()]
    assert [r["rank"] for r in lines] == [0, 1]
    assert all(r["barriers"] == 7 and r["params"]["gcomp"] == 1000 for r in lines)


def test_run_cg_verifies(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["app", "run", "cg", "--ranks", "2", "--class", "S"]) == 0
    assert "VERIFIED" in capfd.readouterr().out
