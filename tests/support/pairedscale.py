"""What tests/unit/testbed/experiment/test_pairedscale.py
and tests/live/testbed/experiment/test_pairedscale.py share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pairedtrace import CAL


@pytest.fixture
def cal(tmp_path: Path) -> Path:
    p = tmp_path / "cal.toml"
    p.write_text(CAL)
    return p


def _spec(tmp_path: Path, cal: Path) -> Path:
    text = Path("experiments/paired-scale-fig10-12.toml").read_text()
    p = tmp_path / "spec.toml"
    p.write_text(text.replace('calibration = "default"', f'calibration = "{cal}"'))
    return p
