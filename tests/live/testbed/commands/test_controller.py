"""The tests of tests/unit/testbed/commands/test_controller.py that start processes or sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.cli import main
from tests.support.cli import one_line_error


def test_start_reports_a_daemon_that_dies(tmp_path: Path, capsys: Any) -> None:
    rc = main(["controller", "start", "--policy", "no-such-policy", "--run-dir", str(tmp_path),
               "--wait", "20"])  # fmt: skip
    err = one_line_error(capsys)
    assert rc == 2
    assert "the controller exited with status" in err and "no-such-policy" in err
