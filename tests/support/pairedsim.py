"""What tests/unit/testbed/experiment/test_pairedsim.py
and tests/live/testbed/experiment/test_pairedsim.py share."""

from __future__ import annotations

from pathlib import Path

SPEC = """
kind = "paired-sim"
[study]
name = "tiny"
nodes = 8
loads = [0.5, 0.9]
mode = "fluid"
workload = "lublin"
calibration = "{cal}"

[[runs]]
label = "gang"
policy = "gang"
profile = "homogeneous"

[[runs]]
label = "paired"
policy = "paired-gang"
profile = "homogeneous"

[[runs]]
label = "paired-hetero"
policy = "paired-gang"
profile = "heterogeneous"
params = {{ band_rule = "stay" }}
"""


def _cal(tmp_path: Path, interference: float = 0.1, cs: float = 0.01) -> Path:
    p = tmp_path / "cal.toml"
    p.write_text(
        f"[model]\nquantum = 0.2\ninterference = {interference}\ncontext_switch = {cs}\n"
        "fine_grain_utilization = 0.44\n[measured]\nx = 1\n"
    )
    return p
