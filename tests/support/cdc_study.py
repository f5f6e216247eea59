"""What tests/unit/testbed/sim/cdc/test_study.py
and tests/live/testbed/sim/cdc/test_study.py share."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


SPEC = REPO / "experiments" / "cdc-paper-scale.toml"
