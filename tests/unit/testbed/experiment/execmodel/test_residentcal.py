"""The cost per resident job (testbed/experiment/execmodel/residentcal.py): the run order,
the fit per block, the summary over blocks and the merge into a calibration file, on given
rates."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from testbed.experiment.execmodel.residentcal import (
    fit_block,
    lines,
    merge_resident,
    model_value,
    schedule,
    summarise,
)
from testbed.sim.calibration import load_calibration


def test_every_block_runs_each_k_once_in_its_own_order() -> None:
    order = schedule((0, 1, 2, 4, 8), 3, seed=25)
    assert len(order) == 15
    blocks = [[k for b, k in order if b == i] for i in range(3)]
    assert all(sorted(b) == [0, 1, 2, 4, 8] for b in blocks)
    assert len({tuple(b) for b in blocks}) > 1  # shuffled, not one order repeated
    assert schedule((0, 1, 2, 4, 8), 3, seed=25) == order  # seeded


def test_cost_is_minus_slope_over_intercept() -> None:
    # rate = 20 (1 - 0.01 k): a = 20, cost 1 % per resident job
    a, cost = fit_block({k: 20.0 * (1 - 0.01 * k) for k in (0, 1, 2, 4, 8)})
    assert a == pytest.approx(20.0) and cost == pytest.approx(0.01)
    # least squares over all k: the noise at k = 1 and 4 cancels in the slope, and the
    # intercept is the mean, not rate(0)
    a, cost = fit_block({0: 20.0, 1: 20.5, 2: 20.0, 4: 21.0, 8: 20.0})
    assert cost == pytest.approx(0.0, abs=1e-12) and a == pytest.approx(20.3)
    with pytest.raises(ValueError, match="two or more"):
        fit_block({4: 20.0})


def _runs(costs: list[float]) -> list[dict[str, Any]]:
    return [
        {"quantum": 1.0, "block": b, "k": k, "rate": 20.0 * (1 - c * k), "loadavg": 1.0 + b,
         "other_cores": 0.1, "resident_cpu_during_s": 0.0}
        for b, c in enumerate(costs)
        for k in (0, 1, 2, 4, 8)
    ]  # fmt: skip


def test_summary_over_blocks_and_the_model_value() -> None:
    s = summarise(_runs([0.01, 0.02, 0.03]))["q1"]
    c = s["cost_per_resident"]
    assert c["mean"] == pytest.approx(0.02) and c["sd"] == pytest.approx(0.01)
    # 95 % CI with 2 degrees of freedom: t = 4.303
    assert c["ci95"] == pytest.approx(4.3027 * 0.01 / 3**0.5, rel=1e-3)
    assert s["relative_rate"]["8"]["mean"] == pytest.approx(1 - 8 * 0.02)
    assert s["loadavg"] == [1.0, 3.0]
    assert model_value({"q1": s}) == pytest.approx(0.02)
    # a negative mean (faster with more residents) is noise: the model gets 0
    neg = summarise(_runs([-0.002, -0.001, 0.0005]))
    assert model_value(neg) == 0.0
    with pytest.raises(ValueError, match="quantum 1"):
        model_value(summarise([{**r, "quantum": 0.1} for r in _runs([0.01, 0.02])]))
    assert any("cost per resident job" in line for line in lines({"q1": s}))


def test_merge_puts_the_cost_in_the_model_and_keeps_the_rest(tmp_path: Path) -> None:
    existing = "[model]\ninterference = 0.1\ncontext_switch = 0.0\n[measured]\nrepeats = 3\n"
    runs = _runs([0.01, 0.02, 0.03])
    text = merge_resident(existing, summarise(runs), runs, {"date": "2026-11-27T15:00:00Z"})
    doc = tomllib.loads(text)
    assert doc["model"]["interference"] == 0.1 and doc["measured"]["repeats"] == 3
    assert doc["model"]["resident_cost"] == pytest.approx(0.02)
    got = doc["measured"]["resident"]["q1"]
    assert got["rates"] == pytest.approx([r["rate"] for r in runs]) and got["ks"] == [0, 1, 2, 4, 8]
    assert doc["host"]["resident"]["date"] == "2026-11-27T15:00:00Z"
    p = tmp_path / "cal.toml"
    p.write_text(text)
    assert load_calibration(p).resident_cost == pytest.approx(0.02)
