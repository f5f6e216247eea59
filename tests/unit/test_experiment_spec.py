"""Live experiment specs: the shipped default loads; the cgroup choice is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment.spec import SpecError, load_experiment

REPO = Path(__file__).resolve().parents[2]


def test_default_spec_loads_with_its_cgroup_choice() -> None:
    spec = load_experiment(REPO / "experiments/paired-vs-gang.toml")
    assert spec.cgroup == "auto" and spec.nodes == 4


def test_bad_cgroup_choice_is_one_line(tmp_path: Path) -> None:
    text = (REPO / "experiments/paired-vs-gang.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('cgroup = "auto"', 'cgroup = "v3"'))
    with pytest.raises(SpecError, match=r"\[cluster\]\.cgroup: must be auto, v1 or v2") as err:
        load_experiment(bad)
    assert "\n" not in str(err.value)
