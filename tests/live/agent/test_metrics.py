"""The tests of tests/unit/agent/test_metrics.py that start processes or sockets."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.support.agent_metrics import make


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_lint(tmp_path: Path) -> None:
    agent = make(tmp_path)
    agent.apply({"b": 100})
    text = generate_latest(agent.metrics.registry)
    res = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
