"""The paired-vs-gang report: ratios per matching, fidelity, run shares, sweeps, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment.paired.report import (
    fidelity,
    markdown,
    mix1,
    plots,
    targets,
    text_summary,
)
from tests.support.paired_report import CONFIGS, _result


def test_mix1_ratios_and_run_shares_per_matching() -> None:
    r = _result()
    m = mix1(r, "paired-fig4-prose")
    assert m["io_ratio"] == pytest.approx(16.0 / 5.0)
    assert m["compute_loss"] == pytest.approx(1 - 1.95 / 2.0)
    # the I/O job (slot 3): its own turn (1/4) plus 75 % of quanta as partner
    assert m["io_run_fraction"] == pytest.approx(1.0)
    assert mix1(r, "gang")["io_run_fraction"] == pytest.approx(0.25)


def test_targets_for_every_paired_config() -> None:
    got = dict(targets(_result()))
    io = [(t, ok) for t, ok in got.items() if "I/O job" in t]
    assert len(io) == 3
    assert got[next(t for t in got if "I/O job" in t and "paired-fig4 " in t)] is False
    assert got[next(t for t in got if "I/O job" in t and "paired-best-fit" in t)] is True
    comp = [ok for t, ok in got.items() if "compute jobs lose" in t]
    assert comp == [True, True, False]  # best fit lost 15 %


def test_fidelity_says_which_configuration_is_faithful() -> None:
    ok, text = fidelity({"cpus_per_node": 1.0}, {"cpu": {"mechanism": "cpuset"}})
    assert ok and "Faithful" in text and "own processor" in text
    ok, text = fidelity({"cpus_per_node": 0.5}, {"cpu": {"mechanism": "shared"}})
    assert not ok and "2 nodes share each core" in text and "reference" in text
    assert not fidelity({"cpus_per_node": 0.5}, {"cpu": {"mechanism": "cfs"}})[0]
    assert not fidelity({"cpus_per_node": None}, {"cpu": {"mechanism": "none"}})[0]


def test_markdown_and_text_carry_all_four_configs(tmp_path: Path) -> None:
    r = _result()
    md = markdown(r)
    for c in CONFIGS:
        assert f"| {c} |" in md
    assert "paired-fig4-prose / gang" in md and "3.20×" in md
    assert "Faithful to the paper's hardware" in md
    assert "I/O run share" in md and "host busy outside" in md
    txt = text_summary(r)
    assert "paired-fig4-prose" in txt and "hardware: faithful" in txt
    shared = markdown(_result(4, "shared", 0.5))
    assert "Not faithful" in shared
    plots(r, tmp_path)
    assert (tmp_path / "fig7_top.png").stat().st_size > 0
    assert (tmp_path / "fig7_bottom.png").stat().st_size > 0
