"""The tests of tests/unit/test_prometheus_rules.py
that start processes or sockets (tests/live/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "prometheus"


PROMTOOL = shutil.which("promtool")


needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")


def promtool(*args: str) -> str:
    assert PROMTOOL is not None
    out = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


@needs_promtool
def test_check_config() -> None:
    promtool("check", "config", "prometheus.yml")


@needs_promtool
def test_check_rules() -> None:
    text = promtool("check", "rules", *sorted(str(p) for p in (ROOT / "rules").glob("*.yml")))
    assert "SUCCESS" in text


@needs_promtool
def test_rule_unit_tests() -> None:
    promtool("test", "rules", *sorted(str(p) for p in (ROOT / "tests").glob("*.yml")))
