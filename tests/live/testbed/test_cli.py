"""The tests of test_cli.py that start processes or sockets (tests/live/)."""

from __future__ import annotations

from pathlib import Path


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "testbed.cli", "policies"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # as `| head` does once it has what it wants
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err and proc.returncode in (0, 141)
